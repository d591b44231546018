# The README's two commands: `make run` (the demo) and `make test` (the suite);
# `make bench` runs the benchmark (docs/performance.md).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY = $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test bench load scale clean screenshots docs

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	touch $@

run: $(VENV)/.installed
	$(PY) manage.py migrate --noinput
	@echo
	@echo "JSON-RPC endpoint: http://$(HOST):$(PORT)/rpc/"
	@echo "Try it:  curl -s -X POST -d '{\"jsonrpc\":\"2.0\",\"method\":\"subtract\",\"params\":[42,23],\"id\":1}' http://$(HOST):$(PORT)/rpc/"
	@echo "Admin:   http://$(HOST):$(PORT)/admin/  (create a login with: $(PY) manage.py createsuperuser)"
	@echo
	$(PY) manage.py runserver $(HOST):$(PORT)

test: $(VENV)/.installed
	$(PY) -m pytest $(PYTEST_ARGS)

# The benchmark has a venv of its own: django-modern-rpc, one of the targets it
# measures, must never reach the app's runtime or test environment.
BENCH_VENV ?= .venv-bench

$(BENCH_VENV)/.installed: requirements.txt bench/requirements.txt
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install -q --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install -q -r requirements.txt -r bench/requirements.txt
	touch $@

bench: $(BENCH_VENV)/.installed
	$(BENCH_VENV)/bin/python -m bench $(BENCH_ARGS)

# The call-log load test (not part of `make test`): 20,000 calls under gunicorn -w 4 on
# PostgreSQL with a restart in the middle, then on SQLite. LOAD_ARGS="--db sqlite --calls 2000"
load: $(VENV)/.installed
	$(PY) -m bench.load_test $(LOAD_ARGS)

# The call log at scale (docs/scale.md): the admin pages timed on 10,000,000
# calls on PostgreSQL and 1,000,000 on SQLite, and a month pruned under load. The seeded
# databases are kept and reused. SCALE_ARGS="--calls 1000000 --reseed"
scale: $(VENV)/.installed
	$(PY) -m bench.scale $(SCALE_ARGS)

# The admin pages in a real Chromium; their screenshots go to docs/ for the Admin page.
screenshots: $(VENV)/.installed
	$(PY) -m pytest tests/browser
	mkdir -p docs
	for page in method-browser try-it replay-comparison usage-dashboard usage-dashboard-empty; do \
	  cp test-artifacts/screenshots/$$page-light.png docs/admin-$$page.png; \
	  cp test-artifacts/screenshots/$$page-dark.png docs/admin-$$page-dark.png; \
	done

# The documentation site (MkDocs, docs/requirements.txt) into build/site; any warning fails it.
DOCS_VENV ?= .venv-docs

$(DOCS_VENV)/.installed: docs/requirements.txt
	$(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install -q --upgrade pip
	$(DOCS_VENV)/bin/python -m pip install -q -r docs/requirements.txt
	touch $@

docs: $(DOCS_VENV)/.installed
	$(DOCS_VENV)/bin/mkdocs build --strict

clean:
	rm -rf $(VENV) $(BENCH_VENV) $(DOCS_VENV) build db.sqlite3 .pytest_cache
