# Compactor — the two commands that work on a fresh machine:
#   make run    embedded default (SQLite + filesystem broker + offline summarizer)
#   make test   the test suite (SQLite by default; DATABASE_URL/REDIS_URL to use real services)
# and production:
#   make serve  gunicorn + Celery worker + beat on PostgreSQL and Redis (README.md "Deploy")

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run serve test coverage venv dev-venv migrate lint typecheck lint-imports check bench clean

$(VENV)/.installed: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -r requirements.txt
	touch $@

$(VENV)/.dev-installed: $(VENV)/.installed requirements-dev.txt
	$(PIP) install --quiet -r requirements-dev.txt
	touch $@

venv: $(VENV)/.installed
dev-venv: $(VENV)/.dev-installed

migrate: venv
	DEBUG=$${DEBUG:-1} $(PY) manage.py migrate --noinput

run: venv
	DEBUG=$${DEBUG:-1} HOST=$(HOST) PORT=$(PORT) bash scripts/run.sh

serve: venv
	HOST=$(HOST) PORT=$(PORT) bash scripts/serve.sh

test: dev-venv
	$(PY) -m pytest $(PYTEST_ARGS)

# The suite with coverage: fails under the floor in pyproject.toml ([tool.coverage.report]).
coverage: dev-venv
	$(PY) -m pytest --cov --cov-report=term $(PYTEST_ARGS)

lint: dev-venv lint-imports
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# mypy over the packages in pyproject.toml [tool.mypy] `files` (the core under the strict flags).
typecheck: dev-venv
	$(VENV)/bin/mypy

# Everything CI checks before the tests: style, formatting, layer contracts, types.
check: lint typecheck

# The layer contracts (pyproject.toml [tool.importlinter], docs/architecture.md).
lint-imports: dev-venv
	$(VENV)/bin/lint-imports

bench: dev-venv
	DEBUG=1 $(PY) bench/run_all.py

clean:
	rm -rf $(VENV) var
