# Targets are named by intent. `make demo` and `make test` set everything up on a fresh machine.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The strict editable install links each file; a new or removed module needs a re-install.
SOURCES := $(sort $(shell find src domain application infrastructure -name '*.py' 2>/dev/null))
# Package data is linked file by file too (the console's templates).
SOURCES += $(sort $(wildcard infrastructure/console/templates/*.html))
STAMP := $(VENV)/.installed

.PHONY: install demo console test test-slow test-dist lint typecheck bench bench-scale clean

install: $(STAMP)

$(STAMP): pyproject.toml $(SOURCES)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "installing session-awareness (strict editable) and its dev tools (log: $(VENV)/install.log)…"
	@{ $(PY) -m pip install --upgrade pip \
	   && $(PY) -m pip install --config-settings editable_mode=strict -e '.[dev]'; } \
	   > $(VENV)/install.log 2>&1 || { tail -n 30 $(VENV)/install.log; exit 1; }
	@$(PY) -c 'import session_awareness.application, session_awareness.infrastructure.cli'
	@touch $(STAMP)

# The story is kept in demo.db (written afresh each time), so its last line can be tried as printed.
demo: install
	@rm -f demo.db demo.db-wal demo.db-shm
	$(VENV)/bin/session-awareness demo --database-url sqlite:///demo.db

# The read-only operator console over the demo's store (made by `make demo` when missing).
console: install
	@test -f demo.db || $(MAKE) --no-print-directory demo
	$(VENV)/bin/session-awareness console --database-url sqlite:///demo.db

test: install
	$(PY) -m pytest

test-slow: install
	$(PY) -m pytest -m slow

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy -m session_awareness -m session_awareness.logs -m session_awareness.configuration -p session_awareness.testing \
	  -p session_awareness.domain -p session_awareness.application

test-dist: install
	rm -rf dist build/dist-venv
	$(PY) -m build --wheel --outdir dist
	$(PYTHON) -m venv build/dist-venv
	build/dist-venv/bin/python -c 'import sys, zipfile; names = zipfile.ZipFile(sys.argv[1]).namelist(); \
	  assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), "no LICENSE in the wheel"' dist/*.whl
	build/dist-venv/bin/pip install --quiet "$$(ls dist/*.whl)[dev,mcp]"
	cd build && dist-venv/bin/python -m pytest -p no:cacheprovider -c ../pyproject.toml --rootdir .. ../tests

bench: install
	$(PY) -m bench

# A PostgreSQL store of SESSIONS sessions (about ten events each) against one of 1,000 in the
# same run (issue 39, item 6): not part of `bench`, it takes long. SESSIONS=100000 to try;
# SCALE_ARGS="--wait-maintenance 60" measures without waiting for the first prune to finish.
SESSIONS ?= 1000000
bench-scale: install
	$(PY) -m bench.scale --sessions $(SESSIONS) $(SCALE_ARGS)

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache demo.db demo.db-wal demo.db-shm
