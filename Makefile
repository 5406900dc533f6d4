# chatscribe: one set of commands for people and CI (.ci/run runs `make test`).
#
#   make test             venv + real Kafka and PostgreSQL (ops/services.sh up) + headless
#                         Chromium for the embed page test (ops/chromium.sh), then pytest in two
#                         processes: the integration tests in order in one, the unit tests beside
#   make check            ruff format --check, ruff check, mypy, then `make test`
#   make demo             venv + services, then `chatscribe demo examples/questions.yaml`
#   make console          the web console over the archive at http://127.0.0.1:8500/
#   make services-up | services-down | services-status
#                         (CHATSCRIBE_KAFKA_BROKERS=3: a three-node Kafka cluster, ops/services.sh)
#   make chaos            the fault tests marked chaos (pytest -m chaos), left out of `make test`,
#                         among them a two-minute chaos soak (python -m bench.chaos --minutes 2)
#   make llm-smoke        the language-model reader against a real small model (llama.cpp
#                         serving SmolLM2-135M; compiles llama.cpp once), left out of `make test`
#   make fmt | bench | clean
#
# Every target is safe to run twice: the venv is (re)installed only when pyproject.toml changes,
# and `ops/services.sh up` leaves running services alone.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

VENV ?= .venv
PY = $(VENV)/bin/python
STAMP = $(VENV)/.installed
SERVICES = ops/services.sh
PYTEST_ARGS ?=
BENCH_ARGS ?=

.PHONY: help venv chromium services-up services-down services-status demo test chaos llm-smoke lint check fmt bench clean

help:
	@sed -n '3,15p' Makefile | sed 's/^# \{0,1\}//'

venv: $(STAMP)

$(STAMP): pyproject.toml ops/bootstrap-python.sh
	ops/bootstrap-python.sh $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --disable-pip-version-check --progress-bar off -e '.[dev]'
	touch $@

services-up:
	$(SERVICES) up

chromium:
	ops/chromium.sh install

services-down:
	$(SERVICES) down

services-status:
	$(SERVICES) status

demo: venv services-up
	$(VENV)/bin/chatscribe demo examples/questions.yaml

console: venv services-up
	$(VENV)/bin/chatscribe console

# Two pytest processes: the integration tests in order in one (they share the machine's Kafka
# and PostgreSQL, and the fault tests restart them), the unit tests beside them in the other,
# their report printed after; one process when PYTEST_ARGS names tests.
test: venv services-up chromium
ifeq ($(strip $(PYTEST_ARGS)),)
	unit_log=$$(mktemp); \
	$(VENV)/bin/pytest -p no:cacheprovider tests/unit >"$$unit_log" 2>&1 & unit_pid=$$!; \
	integration=0; $(VENV)/bin/pytest tests/integration || integration=$$?; \
	unit=0; wait $$unit_pid || unit=$$?; \
	echo "== unit tests (run beside the integration tests) =="; cat "$$unit_log"; rm -f "$$unit_log"; \
	echo "make test: integration exit $$integration, unit exit $$unit"; \
	test $$integration -eq 0 -a $$unit -eq 0
else
	$(VENV)/bin/pytest $(PYTEST_ARGS)
endif

chaos: venv services-up
	$(VENV)/bin/pytest -m chaos $(PYTEST_ARGS)

llm-smoke: venv
	VENV=$(VENV) ops/llm-smoke.sh

lint: venv
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

check: lint
	$(MAKE) --no-print-directory test

fmt: venv
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# BENCH_ARGS: e.g. `--scale small`, `--only sink`, `--profile` (bench/README.md).
bench: venv services-up
	$(PY) -m bench $(BENCH_ARGS)

# Caches and build output only: the venv and the services' state (ops/services.sh down) stay.
clean:
	rm -rf .mypy_cache .ruff_cache .pytest_cache build dist
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
