#!/usr/bin/env bash
# Create the project's virtualenv with the system's python3 (3.11 or newer).
#
# usage: ops/bootstrap-python.sh VENV_DIR
#
# On a fresh Debian machine python3 or its venv module (package python3-venv) may be missing:
# then they are installed with apt-get and the venv is created again. An existing, working
# virtualenv is left as it is.
set -euo pipefail

venv=${1:?usage: ops/bootstrap-python.sh VENV_DIR}

say() { printf 'ops: %s\n' "$*"; }

python_ok() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; }

apt_install() {
    local sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo -n)
    say "apt-get install $*"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq </dev/null
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" \
        </dev/null >/dev/null
}

if [[ -x $venv/bin/python ]] && python_ok "$venv/bin/python" && [[ -x $venv/bin/pip ]]; then
    say "virtualenv $venv already exists"
    exit 0
fi

command -v python3 >/dev/null || apt_install python3 python3-venv
python_ok python3 || { echo "ops: error: python3 is $(python3 -V 2>&1); need 3.11+" >&2; exit 1; }

say "creating virtualenv $venv with $(python3 -V)"
if ! python3 -m venv "$venv" 2>/dev/null; then
    rm -rf "$venv" # a failed attempt leaves a venv without pip
    apt_install python3-venv
    python3 -m venv "$venv"
fi
