#!/usr/bin/env bash
# Resolve Kafka Connect standalone and the Debezium JDBC sink connector from Maven Central, the
# way ops/services.sh resolves the Kafka broker (Maven copies runtime jars; no tarball, no Docker).
#
# usage: ops/connect.sh [install|dir]
#   install   resolve the jars when missing or when a pom changed (default); print nothing else
#   dir       print the directory holding runtime/ (the worker's classpath) and plugins/ (its
#             plugin.path, one folder per plugin); exit 1 when not installed
#
# Poms: ops/connect/runtime.pom.xml (org.apache.kafka:connect-runtime) and
# ops/connect/jdbc-sink.pom.xml (io.debezium:debezium-connector-jdbc with its PostgreSQL driver),
# read with ops/connect/maven-settings.xml (every repository a pom names is read from Maven
# Central). State: CHATSCRIBE_STATE_DIR (default ~/.local/state/chatscribe)/connect.
# The Kafka Connect bench (bench/kafka_connect.py) runs it first.
set -Eeuo pipefail
trap 'printf "ops: error: \`%s\` failed (line %s)\n" "$BASH_COMMAND" "$LINENO" >&2' ERR

OPS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly OPS_DIR
readonly POM_DIR=$OPS_DIR/connect
HOME=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
readonly CONNECT_DIR=${CHATSCRIBE_STATE_DIR:-$HOME/.local/state/chatscribe}/connect
readonly SUM_FILE=$CONNECT_DIR/poms.sha256
readonly LOCK_TIMEOUT_S=600
# Drivers of other databases, and the Kafka and Jackson jars the runtime provides (at the same
# versions: ops/connect/runtime.pom.xml), stay out of the plugin folder.
readonly PLUGIN_EXCLUDES=mariadb-java-client,mssql-jdbc,mysql-connector-j,ojdbc11,connect-api,kafka-clients,jackson-annotations,jackson-core,jackson-databind

say() { printf 'ops: %s\n' "$*" >&2; }

poms_sum() { cat "$POM_DIR"/*.xml | sha256sum | cut -d' ' -f1; }

current() { [[ -f $SUM_FILE && "$(cat "$SUM_FILE")" == "$(poms_sum)" ]]; }

# copy POM OUT [ARGS...]: the pom's runtime dependencies into OUT.
copy() {
    local pom=$1 out=$2
    shift 2
    mvn -B -q -Dstyle.color=never -s "$POM_DIR/maven-settings.xml" -f "$POM_DIR/$pom" \
        dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$out" "$@" \
        >>"$CONNECT_DIR/maven.log" 2>&1 </dev/null || {
        tail -n 40 "$CONNECT_DIR/maven.log" >&2
        say "Maven could not resolve $pom (log: $CONNECT_DIR/maven.log)"
        return 1
    }
}

install() {
    current && return 0
    if ! command -v java >/dev/null || ! command -v mvn >/dev/null; then
        "$OPS_DIR/services.sh" install >&2
    fi
    mkdir -p "$CONNECT_DIR"
    exec 9>"$CONNECT_DIR/.lock"
    flock -w "$LOCK_TIMEOUT_S" 9
    current && return 0
    say "resolving Kafka Connect and the Debezium JDBC sink with Maven into $CONNECT_DIR"
    : >"$CONNECT_DIR/maven.log"
    rm -rf "$CONNECT_DIR/new"
    copy runtime.pom.xml "$CONNECT_DIR/new/runtime"
    copy jdbc-sink.pom.xml "$CONNECT_DIR/new/plugins/debezium-jdbc" \
        -DexcludeArtifactIds="$PLUGIN_EXCLUDES"
    rm -rf "$CONNECT_DIR/runtime" "$CONNECT_DIR/plugins"
    mv "$CONNECT_DIR/new/runtime" "$CONNECT_DIR/new/plugins" "$CONNECT_DIR/"
    rmdir "$CONNECT_DIR/new"
    poms_sum >"$SUM_FILE"
}

case ${1:-install} in
    install) install ;;
    dir) current && echo "$CONNECT_DIR" ;;
    *) echo "usage: $0 [install|dir]" >&2; exit 2 ;;
esac
