#!/usr/bin/env bash
# Start, stop and watch the real Kafka and PostgreSQL that chatscribe's tests, demo and CI use.
#
# usage: ops/services.sh COMMAND [--brokers 1|3]
#   up                 install what is missing, start both services, wait until they answer
#   down               stop what `up` started (and nothing else)
#   status             report both; exit 0 when both answer, 1 otherwise
#   install            install packages and resolve the Kafka jars; start nothing
#   start-kafka | stop-kafka | restart-kafka | kill-kafka (SIGKILL, no clean shutdown)
#   reset-kafka        delete all topics and offsets (wipe and re-format storage), then start
#   start-postgres | stop-postgres | restart-postgres
#   --brokers 3        (or CHATSCRIBE_KAFKA_BROKERS=3) up, down and status act on a three-node
#                      cluster instead of the single node; `down --brokers 3` stops the cluster only
#   kill-broker N | stop-broker N | cont-broker N | start-broker N
#                      node N (1-3) of the cluster: SIGKILL, SIGSTOP, SIGCONT, start again
#
# Kafka: Apache Kafka 3.9.1 from Maven Central jars (ops/kafka/pom.xml), one KRaft node,
#   PLAINTEXT on 127.0.0.1:19092 (CHATSCRIBE_KAFKA_BOOTSTRAP), controller on 127.0.0.1:19093
#   (CHATSCRIBE_KAFKA_CONTROLLER_PORT).
# Cluster: three KRaft nodes from the same jars, each broker and controller (combined mode,
#   ops/kafka/cluster.properties.in), node N on 127.0.0.1:BASE+2(N-1), its controller on the next
#   port; BASE is CHATSCRIBE_KAFKA_CLUSTER_PORT (29092: 29092/29094/29096, controllers
#   29093/29095/29097). Internal topics have 3 replicas, min.insync.replicas 2. Heap per node:
#   CHATSCRIBE_KAFKA_CLUSTER_HEAP (384m). Point the pipeline at it with
#   CHATSCRIBE_KAFKA_BOOTSTRAP=127.0.0.1:29092,127.0.0.1:29094,127.0.0.1:29096.
# PostgreSQL: the server at CHATSCRIBE_DATABASE_URL. If one already answers there (and the login
#   works) it is used as it is; otherwise a private cluster is created and started on that port.
# State: CHATSCRIBE_STATE_DIR (default ~/.local/state/chatscribe): kafka/{libs,data,logs,kafka.pid},
#   kafka-cluster/node-N/{data,logs,kafka.pid}, postgres/{data,log}, and `started`, the list of
#   services that `up` started.
set -Eeuo pipefail
trap 'printf "ops: error: \`%s\` failed (line %s)\n" "$BASH_COMMAND" "$LINENO" >&2' ERR

OPS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly OPS_DIR
readonly KAFKA_POM=$OPS_DIR/kafka/pom.xml
readonly KAFKA_PROPS_TEMPLATE=$OPS_DIR/kafka/server.properties.in
readonly CLUSTER_PROPS_TEMPLATE=$OPS_DIR/kafka/cluster.properties.in
readonly KAFKA_LOG4J=$OPS_DIR/kafka/log4j.properties

readonly DEFAULT_DATABASE_URL=postgresql+psycopg://chatscribe:chatscribe@127.0.0.1:15432/chatscribe
readonly DEFAULT_KAFKA_BOOTSTRAP=127.0.0.1:19092
readonly DEFAULT_KAFKA_CONTROLLER_PORT=19093
readonly DEFAULT_CLUSTER_PORT=29092
readonly DEFAULT_CLUSTER_HEAP=384m
readonly CLUSTER_SIZE=3
readonly CLUSTER_HOST=127.0.0.1
readonly KAFKA_READY_TIMEOUT_S=${CHATSCRIBE_KAFKA_READY_TIMEOUT_S:-90}
readonly KAFKA_STOP_TIMEOUT_S=30
readonly PG_READY_TIMEOUT_S=60
readonly LOCK_TIMEOUT_S=300

HOME=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
readonly STATE_DIR=${CHATSCRIBE_STATE_DIR:-$HOME/.local/state/chatscribe}
readonly STARTED_FILE=$STATE_DIR/started
readonly KAFKA_DIR=$STATE_DIR/kafka
readonly KAFKA_LIBS=$KAFKA_DIR/libs
readonly KAFKA_LIBS_SUM=$KAFKA_DIR/libs.pom.sha256
readonly KAFKA_DATA=$KAFKA_DIR/data
readonly KAFKA_LOGS=$KAFKA_DIR/logs
readonly KAFKA_PID_FILE=$KAFKA_DIR/kafka.pid
readonly KAFKA_PROPS=$KAFKA_DIR/server.properties
readonly KAFKA_ADMIN_PROPS=$KAFKA_DIR/admin.properties
readonly KAFKA_CLUSTER_ID_FILE=$KAFKA_DIR/cluster.id
readonly PG_STATE=$STATE_DIR/postgres
readonly CLUSTER_DIR=$STATE_DIR/kafka-cluster
readonly CLUSTER_ID_FILE=$CLUSTER_DIR/cluster.id

readonly KAFKA_BOOTSTRAP=${CHATSCRIBE_KAFKA_BOOTSTRAP:-$DEFAULT_KAFKA_BOOTSTRAP}
readonly KAFKA_HOST=${KAFKA_BOOTSTRAP%:*}
readonly KAFKA_PORT=${KAFKA_BOOTSTRAP##*:}
readonly KAFKA_CONTROLLER_PORT=${CHATSCRIBE_KAFKA_CONTROLLER_PORT:-$DEFAULT_KAFKA_CONTROLLER_PORT}
readonly DATABASE_URL=${CHATSCRIBE_DATABASE_URL:-$DEFAULT_DATABASE_URL}
readonly CLUSTER_PORT=${CHATSCRIBE_KAFKA_CLUSTER_PORT:-$DEFAULT_CLUSTER_PORT}
readonly CLUSTER_HEAP=${CHATSCRIBE_KAFKA_CLUSTER_HEAP:-$DEFAULT_CLUSTER_HEAP}
# 1: the single node; 3: the cluster (--brokers overrides it).
BROKERS=${CHATSCRIBE_KAFKA_BROKERS:-1}

# Filled by parse_database_url / pg_locate.
PG_HOST='' PG_PORT='' PG_USER='' PG_PASSWORD='' PG_DB=''
PG_BIN='' PG_ROOT='' PG_DATA='' PG_LOG='' PG_SOCKET_DIR='' PG_SUPERUSER=''
PG_AS=()
APT_UPDATED=0
KAFKA_LOG_START_LINE=0

say() { printf 'ops: %s\n' "$*"; }
die() {
    printf 'ops: error: %s\n' "$*" >&2
    exit 1
}

# ---------------------------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------------------------

# One mutating command at a time (several test runs may call `up` together). Long-lived
# children are started with `9>&-` so they do not inherit, and hold, this lock.
take_lock() {
    mkdir -p "$STATE_DIR"
    exec 9>"$STATE_DIR/ops.lock"
    flock -w "$LOCK_TIMEOUT_S" 9 ||
        die "waited ${LOCK_TIMEOUT_S}s for $STATE_DIR/ops.lock: another ops/services.sh is running"
}

mark_started() {
    touch "$STARTED_FILE"
    grep -qx "$1" "$STARTED_FILE" || echo "$1" >>"$STARTED_FILE"
}

unmark_started() {
    [[ -f $STARTED_FILE ]] || return 0
    local rest
    rest=$(grep -vx "$1" "$STARTED_FILE" || true)
    printf '%s' "${rest:+$rest$'\n'}" >"$STARTED_FILE"
}

was_started() { [[ -f $STARTED_FILE ]] && grep -qx "$1" "$STARTED_FILE"; }

is_loopback() { [[ $1 == 127.* || $1 == localhost || $1 == ::1 || $1 == '[::1]' ]]; }

tcp_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

apt_install() {
    local sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        command -v sudo >/dev/null || die "need root to install $*; install them and re-run"
        sudo=(sudo -n)
    fi
    if ((!APT_UPDATED)); then
        say "apt-get update"
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq </dev/null
        APT_UPDATED=1
    fi
    say "apt-get install $*"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" \
        </dev/null >/dev/null
}

# ---------------------------------------------------------------------------------------------
# Kafka
# ---------------------------------------------------------------------------------------------

ensure_java() {
    if ! command -v java >/dev/null || ! command -v mvn >/dev/null; then
        apt_install default-jdk-headless maven
    fi
}

pom_sum() { sha256sum "$KAFKA_POM" | cut -d' ' -f1; }

kafka_libs_current() {
    [[ -f $KAFKA_LIBS_SUM && "$(cat "$KAFKA_LIBS_SUM")" == "$(pom_sum)" ]] &&
        compgen -G "$KAFKA_LIBS/kafka_2.13-*.jar" >/dev/null
}

kafka_resolve() {
    ensure_java
    if kafka_libs_current; then
        say "kafka jars cached in $KAFKA_LIBS"
        return
    fi
    if kafka_pid >/dev/null; then
        say "warning: $KAFKA_POM changed but Kafka is running; run restart-kafka to use new jars"
        return
    fi
    say "resolving Kafka jars with Maven into $KAFKA_LIBS (first run: about a minute)"
    mkdir -p "$KAFKA_DIR" "$KAFKA_LOGS"
    rm -rf "$KAFKA_LIBS.tmp"
    if ! mvn -B -q -Dstyle.color=never -f "$KAFKA_POM" dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$KAFKA_LIBS.tmp" \
        >"$KAFKA_LOGS/maven.log" 2>&1 </dev/null; then
        tail -n 40 "$KAFKA_LOGS/maven.log" >&2
        die "Maven could not resolve the Kafka jars (log: $KAFKA_LOGS/maven.log)"
    fi
    rm -rf "$KAFKA_LIBS"
    mv "$KAFKA_LIBS.tmp" "$KAFKA_LIBS"
    pom_sum >"$KAFKA_LIBS_SUM"
}

# kafka_tool LEVEL CLASS ARGS...: a short-lived JVM running one of Kafka's command-line tools,
# logging at LEVEL and above to stderr, stopped after 60 s at most.
kafka_tool() {
    local level=$1
    shift
    timeout 60 java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
        -Dlog4j.configuration="file:$KAFKA_LOG4J" \
        -Dchatscribe.root.logger=stderr -Dchatscribe.log.threshold="$level" \
        -cp "$KAFKA_LIBS/*" "$@" 9>&-
}

# Print the PID of our broker if it is alive (guards against a recycled PID).
kafka_pid() {
    local pid
    [[ -f $KAFKA_PID_FILE ]] || return 1
    pid=$(cat "$KAFKA_PID_FILE")
    [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null &&
        tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'kafka\.Kafka' || return 1
    echo "$pid"
}

# True when the broker answers an admin call: a TCP connect alone is not readiness. A KRaft
# broker serves no request before it has caught up with the metadata log and is unfenced, so a
# DescribeConfigs of broker 1 (node.id in server.properties.in) answering means ready. (Listing
# every topic costs more each run: test topics accumulate until reset-kafka.)
kafka_answers() {
    tcp_open "$KAFKA_HOST" "$KAFKA_PORT" || return 1
    [[ -d $KAFKA_LIBS ]] || return 1
    if [[ ! -f $KAFKA_ADMIN_PROPS ]]; then
        mkdir -p "$KAFKA_DIR"
        printf 'request.timeout.ms=5000\ndefault.api.timeout.ms=10000\n' >"$KAFKA_ADMIN_PROPS"
    fi
    kafka_tool OFF kafka.admin.ConfigCommand --bootstrap-server "$KAFKA_BOOTSTRAP" \
        --command-config "$KAFKA_ADMIN_PROPS" --describe --entity-type brokers --entity-name 1 \
        >/dev/null 2>&1 </dev/null
}

kafka_render_config() {
    mkdir -p "$KAFKA_DATA" "$KAFKA_LOGS"
    sed -e "s|@KAFKA_HOST@|$KAFKA_HOST|g" -e "s|@KAFKA_PORT@|$KAFKA_PORT|g" \
        -e "s|@CONTROLLER_PORT@|$KAFKA_CONTROLLER_PORT|g" -e "s|@LOG_DIR@|$KAFKA_DATA|g" \
        "$KAFKA_PROPS_TEMPLATE" >"$KAFKA_PROPS"
}

kafka_format_once() {
    [[ -f $KAFKA_DATA/meta.properties ]] && return
    local cluster_id
    if [[ -s $KAFKA_CLUSTER_ID_FILE ]]; then
        cluster_id=$(cat "$KAFKA_CLUSTER_ID_FILE")
    else
        cluster_id=$(kafka_tool WARN kafka.tools.StorageTool random-uuid)
        echo "$cluster_id" >"$KAFKA_CLUSTER_ID_FILE"
    fi
    say "formatting Kafka storage $KAFKA_DATA (cluster id $cluster_id)"
    kafka_tool WARN kafka.tools.StorageTool format --ignore-formatted -t "$cluster_id" \
        -c "$KAFKA_PROPS" >"$KAFKA_LOGS/format.log" 2>&1 ||
        { cat "$KAFKA_LOGS/format.log" >&2; die "kafka storage format failed"; }
}

kafka_fail() {
    local log=$KAFKA_LOGS/server.log
    say "last 60 lines of $log:"
    tail -n 60 "$log" 2>/dev/null || true
    if [[ -f $log ]] && ((KAFKA_LOG_START_LINE > 0)); then
        say "errors logged since this start:"
        tail -n "+$KAFKA_LOG_START_LINE" "$log" | grep -E '^\[[^]]*\] (ERROR|FATAL) |^Caused by: ' |
            tail -n 20 || true
    fi
    if [[ -s $KAFKA_LOGS/kafka.out ]]; then
        say "last 20 lines of $KAFKA_LOGS/kafka.out:"
        tail -n 20 "$KAFKA_LOGS/kafka.out"
    fi
    kafka_stop quiet
    die "$1"
}

# True while the process in the PID file exists and is not a zombie. Unlike kafka_pid it does not
# require `kafka.Kafka` in the command line: right after `setsid nohup java ... &` the child may
# not have exec'd java yet, and a busy machine made that window long enough to fail a start.
kafka_process_alive() {
    local pid state
    [[ -f $KAFKA_PID_FILE ]] || return 1
    pid=$(cat "$KAFKA_PID_FILE")
    [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
    [[ $state != Z ]]
}

kafka_wait_ready() {
    local started=$SECONDS
    while ! kafka_answers; do
        kafka_process_alive || kafka_fail "the Kafka broker exited during start-up"
        ((SECONDS - started < KAFKA_READY_TIMEOUT_S)) ||
            kafka_fail "Kafka did not answer at $KAFKA_BOOTSTRAP within ${KAFKA_READY_TIMEOUT_S}s"
        sleep 1
    done
    say "kafka ready at $KAFKA_BOOTSTRAP (pid $(kafka_pid), $((SECONDS - started))s)"
}

kafka_start() {
    is_loopback "$KAFKA_HOST" ||
        die "CHATSCRIBE_KAFKA_BOOTSTRAP=$KAFKA_BOOTSTRAP is not on this machine; start it there"
    local pid
    if pid=$(kafka_pid); then
        say "kafka already running (pid $pid)"
        kafka_wait_ready
        return
    fi
    if tcp_open "$KAFKA_HOST" "$KAFKA_PORT"; then
        kafka_answers || die "port $KAFKA_PORT is taken by something that is not a Kafka broker"
        say "kafka already answers at $KAFKA_BOOTSTRAP (not started by ops/services.sh); using it"
        return
    fi
    if tcp_open "$KAFKA_HOST" "$KAFKA_CONTROLLER_PORT"; then
        die "port $KAFKA_CONTROLLER_PORT (Kafka controller) is taken by another process"
    fi
    kafka_resolve
    kafka_render_config
    kafka_format_once
    say "starting Kafka at $KAFKA_BOOTSTRAP (logs: $KAFKA_LOGS)"
    KAFKA_LOG_START_LINE=1
    if [[ -f $KAFKA_LOGS/server.log ]]; then
        KAFKA_LOG_START_LINE=$(($(wc -l <"$KAFKA_LOGS/server.log") + 1))
    fi
    mark_started kafka
    # A background job of this non-interactive script is no process-group leader, so setsid
    # does not fork and $! is the broker's PID.
    setsid nohup java -Xms256m -Xmx512m -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
        -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent \
        -Djava.awt.headless=true -Dlog4j.configuration="file:$KAFKA_LOG4J" \
        -Dkafka.logs.dir="$KAFKA_LOGS" -cp "$KAFKA_LIBS/*" kafka.Kafka "$KAFKA_PROPS" \
        >>"$KAFKA_LOGS/kafka.out" 2>&1 </dev/null 9>&- &
    echo $! >"$KAFKA_PID_FILE"
    kafka_wait_ready
}

# kafka_stop [quiet|kill]: SIGTERM and wait up to 30 s, then SIGKILL; `kill` sends SIGKILL at once.
kafka_stop() {
    local pid mode=${1:-}
    if ! pid=$(kafka_pid); then
        [[ $mode == quiet ]] || say "kafka is not running (nothing of ours to stop)"
        rm -f "$KAFKA_PID_FILE"
        return
    fi
    if [[ $mode == kill ]]; then
        say "killing Kafka (pid $pid, SIGKILL)"
        kill -KILL "$pid" 2>/dev/null || true
    else
        say "stopping Kafka (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
    fi
    local started=$SECONDS
    while kafka_pid >/dev/null; do
        if ((SECONDS - started >= KAFKA_STOP_TIMEOUT_S)); then
            say "kafka still alive after ${KAFKA_STOP_TIMEOUT_S}s; SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
        fi
        sleep 0.5
    done
    rm -f "$KAFKA_PID_FILE"
    say "kafka stopped ($((SECONDS - started))s)"
}

# Delete every topic, record and consumer-group offset: stop our broker, wipe its storage,
# format it again and start it.
kafka_reset() {
    if ! kafka_pid >/dev/null && tcp_open "$KAFKA_HOST" "$KAFKA_PORT"; then
        die "the Kafka at $KAFKA_BOOTSTRAP was not started by services.sh; not resetting it"
    fi
    kafka_stop quiet
    say "deleting Kafka storage $KAFKA_DATA"
    rm -rf "$KAFKA_DATA"
    kafka_start
}

# ---------------------------------------------------------------------------------------------
# Kafka cluster: three KRaft nodes on loopback (--brokers 3)
# ---------------------------------------------------------------------------------------------

node_port() { echo $((CLUSTER_PORT + 2 * ($1 - 1))); }
node_controller_port() { echo $((CLUSTER_PORT + 2 * ($1 - 1) + 1)); }
node_dir() { echo "$CLUSTER_DIR/node-$1"; }

cluster_bootstrap() {
    local n out=()
    for ((n = 1; n <= CLUSTER_SIZE; n++)); do out+=("$CLUSTER_HOST:$(node_port "$n")"); done
    (
        IFS=,
        echo "${out[*]}"
    )
}

cluster_voters() {
    local n out=()
    for ((n = 1; n <= CLUSTER_SIZE; n++)); do
        out+=("$n@$CLUSTER_HOST:$(node_controller_port "$n")")
    done
    (
        IFS=,
        echo "${out[*]}"
    )
}

check_node() {
    [[ $1 =~ ^[0-9]+$ ]] && (($1 >= 1 && $1 <= CLUSTER_SIZE)) ||
        die "broker number must be 1 to $CLUSTER_SIZE (got '${1:-}')"
}

# node_pid N: the PID of node N if it is alive (stopped with SIGSTOP counts as alive).
node_pid() {
    local pid file
    file=$(node_dir "$1")/kafka.pid
    [[ -f $file ]] || return 1
    pid=$(cat "$file")
    [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "node-$1/server.properties" || return 1
    echo "$pid"
}

# node_alive N: the process in node N's PID file exists and is no zombie (see kafka_process_alive).
node_alive() {
    local pid state file
    file=$(node_dir "$1")/kafka.pid
    [[ -f $file ]] || return 1
    pid=$(cat "$file")
    [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
    [[ $state != Z ]]
}

# node_answers N: node N serves an admin call about itself (ready and unfenced, as kafka_answers).
node_answers() {
    local port
    port=$(node_port "$1")
    tcp_open "$CLUSTER_HOST" "$port" || return 1
    [[ -d $KAFKA_LIBS ]] || return 1
    mkdir -p "$CLUSTER_DIR"
    printf 'request.timeout.ms=5000\ndefault.api.timeout.ms=10000\n' >"$CLUSTER_DIR/admin.properties"
    kafka_tool OFF kafka.admin.ConfigCommand --bootstrap-server "$CLUSTER_HOST:$port" \
        --command-config "$CLUSTER_DIR/admin.properties" --describe --entity-type brokers \
        --entity-name "$1" >/dev/null 2>&1 </dev/null
}

node_render_config() {
    local dir
    dir=$(node_dir "$1")
    mkdir -p "$dir/data" "$dir/logs"
    sed -e "s|@NODE_ID@|$1|g" -e "s|@KAFKA_HOST@|$CLUSTER_HOST|g" \
        -e "s|@KAFKA_PORT@|$(node_port "$1")|g" \
        -e "s|@CONTROLLER_PORT@|$(node_controller_port "$1")|g" \
        -e "s|@VOTERS@|$(cluster_voters)|g" -e "s|@LOG_DIR@|$dir/data|g" \
        "$CLUSTER_PROPS_TEMPLATE" >"$dir/server.properties"
}

# A Kafka Uuid (as `kafka-storage.sh random-uuid` prints it, without starting a JVM): 16 random
# bytes in unpadded URL-safe base64, never starting with '-'.
cluster_id() {
    if [[ ! -s $CLUSTER_ID_FILE ]]; then
        local id='-'
        while [[ $id == -* ]]; do
            id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
        done
        mkdir -p "$CLUSTER_DIR"
        echo "$id" >"$CLUSTER_ID_FILE"
    fi
    cat "$CLUSTER_ID_FILE"
}

# Every node is formatted with the one cluster id of $CLUSTER_ID_FILE.
node_format_once() {
    local dir
    dir=$(node_dir "$1")
    [[ -f $dir/data/meta.properties ]] && return
    say "formatting node $1 storage $dir/data (cluster id $2)"
    kafka_tool WARN kafka.tools.StorageTool format --ignore-formatted -t "$2" \
        -c "$dir/server.properties" >"$dir/logs/format.log" 2>&1 ||
        { cat "$dir/logs/format.log" >&2; die "storage format of node $1 failed"; }
}

# node_launch N: start node N's JVM in the background (no wait); a running node is left alone.
node_launch() {
    local dir port pid
    if pid=$(node_pid "$1"); then
        say "node $1 already running (pid $pid)"
        return
    fi
    port=$(node_port "$1")
    for port in "$port" "$(node_controller_port "$1")"; do
        ! tcp_open "$CLUSTER_HOST" "$port" || die "port $port (node $1) is taken by another process"
    done
    dir=$(node_dir "$1")
    node_render_config "$1"
    node_format_once "$1" "$(cluster_id)"
    if [[ -f $dir/logs/server.log ]]; then
        wc -l <"$dir/logs/server.log" >"$dir/log.start"
    else
        echo 0 >"$dir/log.start"
    fi
    say "starting node $1 at $CLUSTER_HOST:$(node_port "$1") (logs: $dir/logs)"
    # As in kafka_start: setsid does not fork here, so $! is the node's PID.
    setsid nohup java -Xms128m -Xmx"$CLUSTER_HEAP" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
        -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent \
        -XX:TieredStopAtLevel=1 -XX:ParallelGCThreads=1 \
        -XX:ConcGCThreads=1 -Djava.awt.headless=true -Dlog4j.configuration="file:$KAFKA_LOG4J" \
        -Dkafka.logs.dir="$dir/logs" -cp "$KAFKA_LIBS/*" kafka.Kafka "$dir/server.properties" \
        >>"$dir/logs/kafka.out" 2>&1 </dev/null 9>&- &
    echo $! >"$dir/kafka.pid"
}

node_fail() {
    local dir skip
    dir=$(node_dir "$1")
    skip=$(cat "$dir/log.start" 2>/dev/null || echo 0)
    say "last 40 lines of $dir/logs/server.log:"
    tail -n 40 "$dir/logs/server.log" 2>/dev/null || true
    if [[ -f $dir/logs/server.log ]]; then
        say "errors logged since this start:"
        tail -n "+$((skip + 1))" "$dir/logs/server.log" |
            grep -E '^\[[^]]*\] (ERROR|FATAL) |^Caused by: ' | tail -n 20 || true
    fi
    [[ -s $dir/logs/kafka.out ]] && tail -n 20 "$dir/logs/kafka.out"
    die "$2"
}

# node_started N: node N logged its start (caught up, unfenced, serving) since its launch. Reading
# the log costs nothing; an admin tool (node_answers) is a JVM, seconds of CPU on a busy machine.
node_started() {
    local dir skip
    dir=$(node_dir "$1")
    skip=$(cat "$dir/log.start" 2>/dev/null || echo 0)
    # grep reads to the end (no -q): tail killed by SIGPIPE would fail the pipe (pipefail).
    tail -n "+$((skip + 1))" "$dir/logs/server.log" 2>/dev/null |
        grep "\[KafkaRaftServer nodeId=$1\] Kafka Server started" >/dev/null &&
        tcp_open "$CLUSTER_HOST" "$(node_port "$1")"
}

# node_wait_ready N...: wait until each node has started (their start-ups overlap).
node_wait_ready() {
    local started=$SECONDS n
    for n in "$@"; do
        while ! node_started "$n"; do
            node_alive "$n" || node_fail "$n" "node $n exited during start-up"
            ((SECONDS - started < KAFKA_READY_TIMEOUT_S)) ||
                node_fail "$n" "node $n did not start within ${KAFKA_READY_TIMEOUT_S}s"
            sleep 0.5
        done
        say "node $n ready at $CLUSTER_HOST:$(node_port "$n") (pid $(node_pid "$n"))"
    done
}

cluster_start() {
    local n id nodes=() jobs=()
    kafka_resolve
    id=$(cluster_id)
    # Formatting is a JVM per node: the three run together.
    for ((n = 1; n <= CLUSTER_SIZE; n++)); do
        node_pid "$n" >/dev/null && continue
        node_render_config "$n"
        node_format_once "$n" "$id" &
        jobs+=($!)
    done
    for n in "${jobs[@]}"; do wait "$n"; done
    mark_started kafka-cluster
    # A quorum needs two voters: every node starts before any is waited for.
    for ((n = 1; n <= CLUSTER_SIZE; n++)); do
        node_launch "$n"
        nodes+=("$n")
    done
    node_wait_ready "${nodes[@]}"
    say "kafka cluster ready at $(cluster_bootstrap)"
}

# node_stop N [quiet]: SIGCONT (a paused node cannot handle SIGTERM), SIGTERM, and SIGKILL after
# KAFKA_STOP_TIMEOUT_S.
node_stop() {
    local pid started=$SECONDS
    if ! pid=$(node_pid "$1"); then
        [[ ${2:-} == quiet ]] || say "node $1 is not running"
        return
    fi
    kill -CONT "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || true
    while node_pid "$1" >/dev/null; do
        if ((SECONDS - started >= KAFKA_STOP_TIMEOUT_S)); then
            say "node $1 still alive after ${KAFKA_STOP_TIMEOUT_S}s; SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
        fi
        sleep 0.5
    done
    say "node $1 stopped ($((SECONDS - started))s)"
}

# All nodes at once: stopped one after another, the last ones would wait for a lost quorum.
cluster_stop() {
    local n pids=()
    for ((n = 1; n <= CLUSTER_SIZE; n++)); do
        node_stop "$n" quiet &
        pids+=($!)
    done
    for n in "${pids[@]}"; do wait "$n"; done
    unmark_started kafka-cluster
    say "kafka cluster stopped"
}

# node_signal N SIGNAL WHAT: send SIGNAL to node N (kill-broker waits until it is gone).
node_signal() {
    local pid
    pid=$(node_pid "$1") || die "node $1 is not running"
    say "$3 node $1 (pid $pid, SIG$2)"
    kill "-$2" "$pid"
    if [[ $2 == KILL ]]; then
        while node_alive "$1"; do sleep 0.2; done
    fi
}

cluster_status() {
    local n ok=0 pid
    for ((n = 1; n <= CLUSTER_SIZE; n++)); do
        pid=$(node_pid "$n") && pid="pid $pid" || pid="not started by services.sh"
        if [[ $pid == pid* && $(awk '{print $3}' "/proc/${pid#pid }/stat") == T ]]; then
            say "kafka node $n: STOPPED (SIGSTOP) at $CLUSTER_HOST:$(node_port "$n") ($pid)"
            ok=1
        elif node_answers "$n"; then
            say "kafka node $n: up at $CLUSTER_HOST:$(node_port "$n") ($pid)"
        else
            say "kafka node $n: DOWN (no answer at $CLUSTER_HOST:$(node_port "$n"))"
            ok=1
        fi
    done
    return "$ok"
}

# ---------------------------------------------------------------------------------------------
# PostgreSQL
# ---------------------------------------------------------------------------------------------

urldecode() { printf '%b' "${1//%/\\x}"; }

parse_database_url() {
    # scheme://[user[:password]@][host][:port][/database][?query]
    local re='^[A-Za-z0-9+.-]+://(([^:@/]*)(:([^@/]*))?@)?'
    re+='(\[[^]/]+\]|[^:/?]+)?(:([0-9]+))?(/([^?]*))?'
    [[ $DATABASE_URL =~ $re ]] || die "cannot parse CHATSCRIBE_DATABASE_URL"
    PG_USER=$(urldecode "${BASH_REMATCH[2]:-$(id -un)}")
    PG_PASSWORD=$(urldecode "${BASH_REMATCH[4]}")
    PG_HOST=${BASH_REMATCH[5]:-127.0.0.1}
    PG_HOST=${PG_HOST#[}
    PG_HOST=${PG_HOST%]}
    PG_PORT=${BASH_REMATCH[7]:-5432}
    PG_DB=$(urldecode "${BASH_REMATCH[9]:-$PG_USER}")
}

pg_client() {
    if command -v "$1" >/dev/null; then
        command -v "$1"
    elif [[ -n $PG_BIN && -x $PG_BIN/$1 ]]; then
        echo "$PG_BIN/$1"
    else
        return 1
    fi
}

# True when a server answers at the URL and the URL's login works.
pg_answers() {
    local isready psql
    isready=$(pg_client pg_isready) && psql=$(pg_client psql) || return 1
    "$isready" -q -h "$PG_HOST" -p "$PG_PORT" -t 3 || return 1
    PGPASSWORD=$PG_PASSWORD PGCONNECT_TIMEOUT=5 "$psql" -X -q -w -h "$PG_HOST" -p "$PG_PORT" \
        -U "$PG_USER" -d "$PG_DB" -tAc 'select 1' >/dev/null 2>&1 </dev/null
}

pg_find_bin() {
    local initdb
    if initdb=$(command -v initdb); then
        PG_BIN=$(dirname "$(readlink -f "$initdb")")
        return
    fi
    initdb=$(compgen -G '/usr/lib/postgresql/*/bin/initdb' | sort -V | tail -n 1 || true)
    [[ -n $initdb ]] || return 1
    PG_BIN=$(dirname "$initdb")
}

pg_ensure_installed() {
    pg_find_bin && return
    apt_install postgresql
    pg_find_bin || die "PostgreSQL installed but initdb not found under /usr/lib/postgresql"
}

# Where our private cluster lives. As root the server runs as the `postgres` user, which cannot
# enter a state dir under /root (mode 700): then the cluster lives under /var/lib/postgresql and
# $STATE_DIR/postgres/{data,log} are symlinks to it.
pg_locate() {
    mkdir -p "$PG_STATE"
    if [[ $(id -u) -eq 0 ]]; then
        PG_SUPERUSER=postgres
        PG_AS=(runuser -u postgres --)
        chown postgres: "$PG_STATE"
        if (cd / && runuser -u postgres -- test -w "$PG_STATE"); then
            PG_ROOT=$PG_STATE
        else
            local key
            key=$(printf '%s' "$STATE_DIR" | cksum | cut -d' ' -f1)
            PG_ROOT=/var/lib/postgresql/chatscribe-$key
            mkdir -p "$PG_ROOT"
            chown postgres: "$PG_ROOT"
            chmod 700 "$PG_ROOT"
            ln -sfn "$PG_ROOT/data" "$PG_STATE/data"
            ln -sfn "$PG_ROOT/log" "$PG_STATE/log"
        fi
    else
        PG_SUPERUSER=$(id -un)
        PG_AS=()
        PG_ROOT=$PG_STATE
    fi
    PG_DATA=$PG_ROOT/data
    PG_LOG=$PG_ROOT/log/postgres.log
    PG_SOCKET_DIR=$PG_ROOT/run
    pg_as mkdir -p "$PG_ROOT/log" "$PG_SOCKET_DIR"
}

# Run a command as the cluster's OS user, from / (the postgres user cannot enter /root).
pg_as() { (cd / && "${PG_AS[@]}" "$@"); }

pg_ours_running() {
    [[ -n $PG_DATA && -f $PG_DATA/PG_VERSION ]] &&
        pg_as "$PG_BIN/pg_ctl" -D "$PG_DATA" status >/dev/null 2>&1
}

pg_init_once() {
    [[ -f $PG_DATA/PG_VERSION ]] && return
    say "initdb $PG_DATA"
    pg_as rm -rf "$PG_DATA"
    pg_as "$PG_BIN/initdb" -D "$PG_DATA" -U "$PG_SUPERUSER" --auth-local=peer \
        --auth-host=scram-sha-256 --encoding=UTF8 --no-locale >"$PG_STATE/initdb.log" 2>&1 ||
        { tail -n 30 "$PG_STATE/initdb.log" >&2; die "initdb failed"; }
}

# Settings for a test box, rewritten on each start. Durability stays on: fsync and
# synchronous_commit are never relaxed, because the archive's guarantees are tested against it.
pg_write_config() {
    local listen=$PG_HOST
    [[ $listen == localhost ]] && listen=127.0.0.1
    pg_as tee "$PG_DATA/chatscribe.conf" >/dev/null <<EOF
# Written by ops/services.sh on every start; edit the script, not this file.
listen_addresses = '$listen'
port = $PG_PORT
unix_socket_directories = '$PG_SOCKET_DIR'
max_connections = 200
shared_buffers = 256MB
fsync = on
synchronous_commit = on
full_page_writes = on
log_timezone = 'UTC'
timezone = 'UTC'
EOF
    grep -qx "include 'chatscribe.conf'" "$PG_DATA/postgresql.conf" ||
        echo "include 'chatscribe.conf'" | pg_as tee -a "$PG_DATA/postgresql.conf" >/dev/null
}

pg_wait_ready() {
    local started=$SECONDS
    until "$PG_BIN/pg_isready" -q -h "$PG_HOST" -p "$PG_PORT" -t 2; do
        if ((SECONDS - started >= PG_READY_TIMEOUT_S)); then
            tail -n 40 "$PG_LOG" >&2 || true
            die "PostgreSQL did not answer at $PG_HOST:$PG_PORT within ${PG_READY_TIMEOUT_S}s"
        fi
        sleep 0.5
    done
}

# Create the URL's role and database if missing; keep the role's password in step with the URL.
pg_ensure_role_and_db() {
    pg_as "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$PG_SOCKET_DIR" -p "$PG_PORT" \
        -U "$PG_SUPERUSER" -d postgres \
        -v role="$PG_USER" -v password="$PG_PASSWORD" -v db="$PG_DB" <<'SQL' >/dev/null
SELECT format('CREATE ROLE %I LOGIN PASSWORD %L', :'role', :'password')
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'role') \gexec
SELECT format('ALTER ROLE %I LOGIN PASSWORD %L', :'role', :'password') \gexec
SELECT format('CREATE DATABASE %I OWNER %I', :'db', :'role')
 WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'db') \gexec
SQL
}

pg_start() {
    parse_database_url
    local where="$PG_HOST:$PG_PORT/$PG_DB as $PG_USER"
    if pg_answers; then
        if pg_find_bin && pg_locate && pg_ours_running; then
            say "postgres already running at $where (ours, $PG_DATA)"
        else
            say "postgres already answers at $where; using it"
        fi
        return
    fi
    is_loopback "$PG_HOST" ||
        die "no PostgreSQL answers at $where and that host is not this machine"
    pg_ensure_installed
    pg_locate
    if ! pg_ours_running; then
        if "$PG_BIN/pg_isready" -q -h "$PG_HOST" -p "$PG_PORT" -t 2; then
            die "another PostgreSQL listens on $PG_HOST:$PG_PORT and login as $PG_USER fails"
        fi
        pg_init_once
        pg_write_config
        say "starting PostgreSQL at $PG_HOST:$PG_PORT (data: $PG_DATA)"
        mark_started postgres
        setsid -w "${PG_AS[@]}" "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" \
            -w -t "$PG_READY_TIMEOUT_S" -s start </dev/null >/dev/null 9>&- ||
            { tail -n 40 "$PG_LOG" >&2 || true; die "pg_ctl start failed (log: $PG_LOG)"; }
    fi
    pg_wait_ready
    pg_ensure_role_and_db
    pg_answers || die "PostgreSQL started but login to $where fails"
    say "postgres ready at $where"
}

# pg_managed: true when the URL's server is our private cluster (so we may stop or restart it).
pg_managed() {
    parse_database_url
    pg_find_bin || return 1
    pg_locate
    [[ -f $PG_DATA/PG_VERSION ]]
}

pg_stop() {
    if ! pg_managed || ! pg_ours_running; then
        say "postgres: no cluster of ours is running (nothing to stop)"
        return
    fi
    say "stopping PostgreSQL ($PG_DATA)"
    pg_as "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w -t 60 -s stop
    say "postgres stopped"
}

pg_restart() {
    pg_managed || die "the PostgreSQL at CHATSCRIBE_DATABASE_URL is not managed by services.sh"
    pg_ours_running || die "our PostgreSQL cluster is not running; use start-postgres"
    say "restarting PostgreSQL ($PG_DATA)"
    pg_write_config
    setsid -w "${PG_AS[@]}" "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -m fast -w \
        -t "$PG_READY_TIMEOUT_S" -s restart </dev/null >/dev/null 9>&-
    pg_wait_ready
    say "postgres restarted at $PG_HOST:$PG_PORT"
}

# ---------------------------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------------------------

cmd_install() {
    kafka_resolve
    parse_database_url
    if pg_answers; then
        say "postgres answers at $PG_HOST:$PG_PORT; nothing to install"
    else
        pg_ensure_installed
        say "postgres binaries in $PG_BIN"
    fi
}

cmd_up() {
    local started=$SECONDS
    pg_start
    if ((BROKERS == CLUSTER_SIZE)); then
        cluster_start
    else
        kafka_start
    fi
    say "services up ($((SECONDS - started))s; state: $STATE_DIR)"
}

cmd_down() {
    local any=0
    if ((BROKERS == CLUSTER_SIZE)); then
        cluster_stop
        return
    fi
    if was_started kafka; then
        kafka_stop
        unmark_started kafka
        any=1
    fi
    if was_started kafka-cluster; then
        cluster_stop
        any=1
    fi
    if was_started postgres; then
        pg_stop
        unmark_started postgres
        any=1
    fi
    ((any)) || say "nothing to stop: services.sh up started nothing that is still recorded"
}

cmd_status() {
    local ok=0 pid
    parse_database_url
    pg_find_bin || true
    if pg_answers; then
        say "postgres: up at $PG_HOST:$PG_PORT/$PG_DB (user $PG_USER)"
    else
        say "postgres: DOWN (nothing answers at $PG_HOST:$PG_PORT/$PG_DB as $PG_USER)"
        ok=1
    fi
    if ((BROKERS == CLUSTER_SIZE)); then
        cluster_status || ok=1
    elif kafka_answers; then
        pid=$(kafka_pid) && pid="pid $pid" || pid="not started by services.sh"
        say "kafka: up at $KAFKA_BOOTSTRAP ($pid)"
    else
        say "kafka: DOWN (no answer at $KAFKA_BOOTSTRAP)"
        ok=1
    fi
    return "$ok"
}

usage() {
    sed -n '2,31p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

# main COMMAND [N] [--brokers 1|3]
main() {
    local cmd=${1:-} node=''
    shift || true
    while (($#)); do
        case $1 in
            --brokers)
                BROKERS=${2:-}
                shift 2 || die "--brokers needs a number"
                ;;
            --brokers=*)
                BROKERS=${1#--brokers=}
                shift
                ;;
            *)
                node=$1
                shift
                ;;
        esac
    done
    [[ $BROKERS == 1 || $BROKERS == "$CLUSTER_SIZE" ]] ||
        die "--brokers (CHATSCRIBE_KAFKA_BROKERS) must be 1 or $CLUSTER_SIZE (got '$BROKERS')"
    case $cmd in
        status) cmd_status || exit 1 ;;
        up | down | install | start-kafka | stop-kafka | restart-kafka | kill-kafka | \
            reset-kafka | start-postgres | stop-postgres | restart-postgres)
            take_lock
            case $cmd in
                up) cmd_up ;;
                down) cmd_down ;;
                install) cmd_install ;;
                start-kafka) kafka_start ;;
                stop-kafka) kafka_stop ;;
                restart-kafka) kafka_stop && kafka_start ;;
                kill-kafka) kafka_stop kill ;;
                reset-kafka) kafka_reset ;;
                start-postgres) pg_start ;;
                stop-postgres) pg_stop ;;
                restart-postgres) pg_restart ;;
            esac
            ;;
        kill-broker | stop-broker | cont-broker | start-broker)
            check_node "$node"
            take_lock
            case $cmd in
                kill-broker) node_signal "$node" KILL killing ;;
                stop-broker) node_signal "$node" STOP pausing ;;
                cont-broker) node_signal "$node" CONT resuming ;;
                start-broker) node_launch "$node" && node_wait_ready "$node" ;;
            esac
            ;;
        -h | --help | help) usage ;;
        *)
            usage >&2
            exit 2
            ;;
    esac
}

main "$@"
