# easerve: two commands on a fresh machine.
#   make run   set up .venv, run the headline evaluation (quick) on embedded defaults
#   make test  set up .venv (with the test extras), run the whole test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
OUT    ?= runs/headline
# --no-compile: pip would byte-compile every module of every wheel (torch alone: 40 s against
# 12 s without); Python compiles the modules a run imports, once, on first import instead.
PIP    := $(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile

.PHONY: run test lint bench clean

# the package alone: what `make run` needs
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch first and pinned: 2.13.0 is a local CPU wheel here; an unpinned
	# torch would pull a multi-GB CUDA build.
	$(PIP) torch==2.13.0
	$(PIP) -e .
	touch $(STAMP)

# the test extras besides (pytest, ruff, mypy, the PostgreSQL driver, Ray)
$(TEST_STAMP): $(STAMP)
	$(PIP) -e '.[test]'
	touch $(TEST_STAMP)

run: $(STAMP)
	$(BIN)/easerve reproduce --quick --force --out $(OUT)

test: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -q

lint: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/policy_overhead.py
	$(BIN)/python bench/sim_speed.py
	$(BIN)/python bench/has_speed.py

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache .hypothesis
