#!/usr/bin/env bash
# Install headless Chromium from Debian's packages for the embed page test (idempotent).
#
# usage: ops/chromium.sh [install|path]
#   install   apt-get install chromium (and chromium-driver) when `chromium` is missing (default)
#   path      print the browser's path; exit 1 when it is not installed
#
# The embed page test (tests/integration/chat_api/test_embed.py) drives this browser; `make test`
# runs `ops/chromium.sh install` first, so a fresh machine (CI) gets it. A failed install fails
# `make test`: the test never skips for a missing browser.
set -Eeuo pipefail
trap 'printf "ops: error: \`%s\` failed (line %s)\n" "$BASH_COMMAND" "$LINENO" >&2' ERR

readonly LOCK_FILE=${TMPDIR:-/tmp}/chatscribe-chromium.lock
readonly LOCK_TIMEOUT_S=900

browser_path() {
    command -v chromium || command -v chromium-browser
}

install() {
    if browser_path >/dev/null; then
        return 0
    fi
    exec 9>"$LOCK_FILE"
    flock -w "$LOCK_TIMEOUT_S" 9
    if browser_path >/dev/null; then
        return 0
    fi
    echo "ops: apt-get install chromium chromium-driver"
    local sudo=()
    if [[ $(id -u) -ne 0 ]]; then sudo=(sudo); fi
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq </dev/null
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends chromium chromium-driver \
        fonts-liberation </dev/null >/dev/null
    browser_path >/dev/null
}

case ${1:-install} in
    install) install ;;
    path) browser_path ;;
    *) echo "usage: $0 [install|path]" >&2; exit 2 ;;
esac
