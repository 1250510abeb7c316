# The two front-door commands: `make run` (set up and serve) and `make test` (set up and test).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
STAMP := $(VENV)/.requirements-installed
# The scaled-out configuration the second test pass runs against (real PostgreSQL and Redis).
PG_URL ?= postgres://postgres@127.0.0.1:5432/openprogram
REDIS_TEST_URL ?= redis://127.0.0.1:6379/0

.PHONY: setup run test test-embedded test-scaled services browser bench clean

$(STAMP): requirements.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements.txt 2>&1 | grep -v "is ignored: it is neither" || true
	@$(BIN)/python -c "import django, channels, daphne, rest_framework" || { echo "dependency install failed" >&2; exit 1; }
	@touch $(STAMP)

setup: $(STAMP)
	@$(BIN)/python manage.py migrate --noinput -v 0

run: setup
	@$(BIN)/python manage.py ensure_local_user
	@$(BIN)/python manage.py interrupt_orphaned_runs
	$(BIN)/daphne -b $(HOST) -p $(PORT) openprogram_web.asgi:application

# Every test: first on the embedded default (SQLite, in-memory layer), then the Django tests again on
# PostgreSQL + Redis. pytest exits 5 when it collected nothing: that is a failure here, said plainly.
test: setup services browser test-embedded test-scaled

test-embedded:
	@$(BIN)/python -m pytest $(PYTEST_ARGS); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests" >&2; fi; exit $$rc

test-scaled:
	@DATABASE_URL=$(PG_URL) REDIS_URL=$(REDIS_TEST_URL) $(BIN)/python -m pytest tests/web -m "not e2e" $(PYTEST_ARGS); \
	  rc=$$?; if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests on PostgreSQL" >&2; fi; exit $$rc

services:
	@bash bin/ensure-services

browser:
	@bash bin/ensure-browser

bench: setup services
	@for script in bench/bench_*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

clean:
	rm -rf $(VENV) var .pytest_cache
