# `make run` and `make test` are all a fresh machine with python3 and make needs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: venv run test test-quick test-postgres test-browser lint bench chaos clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(BIN)/ocd serve --config config/ocd.toml

# pytest workers (pytest-xdist) for every test but the browser ones: two cut a run by a third
# on two cores. The browser tests then run in one process of their own, with nothing beside
# them: under another worker's load Chromium's context close hung for 60 s in one run of five
# (docs/development.md). TEST_WORKERS=0: no workers, one process at a time.
TEST_WORKERS ?= 2
BROWSER := tests/browser

test: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --ignore=$(BROWSER)
	$(BIN)/python -m pytest $(BROWSER)

# The inner loop: unit tests and the store's conformance suite on SQLite (under a minute).
test-quick: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit tests/store -k "not postgres"

# The tests that run daemons, on PostgreSQL (a throw-away cluster; see README, Development).
test-postgres: $(STAMP)
	OCD_TEST_STORE=postgres $(BIN)/python -m pytest -n $(TEST_WORKERS) tests/integration tests/acceptance
	OCD_TEST_STORE=postgres $(BIN)/python -m pytest $(BROWSER)

# The dashboard in Chromium (apt-get install chromium; see README, Dashboard).
test-browser: $(STAMP)
	$(BIN)/python -m pytest $(BROWSER)

lint: $(STAMP)
	$(BIN)/ruff check ocd runtime tests bench chaos examples
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/run.py

# Real daemons through real faults (kill -9, full disk, clock steps, damaged files, hostile
# connections); not part of `make test`, which runs the quick version of each (tests/chaos).
chaos: $(STAMP)
	$(BIN)/python chaos/run.py

clean:
	rm -rf $(VENV) .ocd build *.egg-info
