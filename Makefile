# easerve: two commands on a fresh machine.
#   make run   set up .venv, run the headline evaluation (quick) on embedded defaults
#   make test  set up .venv (with the test extras), run the whole test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
OUT    ?= runs/headline
PIP    := $(BIN)/python -m pip install --quiet --disable-pip-version-check
# make run installs without byte-compiling (pip compiles every module of every wheel: torch
# alone takes 40 s, 12 s without); make test then compiles the whole environment on both cores
# at once, because with PYTHONDONTWRITEBYTECODE set (as on these machines) nothing else writes
# the .pyc files and every test process would compile torch again (the suite: 16 min, not 9).
# compileall exits 1 on the few test-data files in wheels that are not Python 3; its output
# and status are not ours to judge.
PIP_NC := $(PIP) --no-compile

.PHONY: run test lint bench clean

# the package alone: what `make run` needs
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch first and pinned: 2.13.0 is a local CPU wheel here; an unpinned
	# torch would pull a multi-GB CUDA build.
	$(PIP_NC) torch==2.13.0
	$(PIP_NC) -e .
	touch $(STAMP)

# the test extras besides (pytest, ruff, mypy, the PostgreSQL driver, Ray)
$(TEST_STAMP): $(STAMP)
	$(PIP) -e '.[test]'
	-$(BIN)/python -m compileall -q -j 0 $(VENV)/lib > /dev/null 2>&1
	touch $(TEST_STAMP)

run: $(STAMP)
	$(BIN)/easerve reproduce --quick --force --out $(OUT)

# the tests in two passes: on two processes, then the `serial` ones alone (tests/conftest.py).
# Two, not three: the pass keeps this 2-core host at ~1.3 cores busy either way, and three
# processes took 575 s against 465 s for two, run back to back (2026-12-03).
test: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -n 2 --dist loadfile -m "not serial"
	$(BIN)/python -m pytest -q -m serial

lint: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/policy_overhead.py
	$(BIN)/python bench/sim_speed.py
	$(BIN)/python bench/has_speed.py

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache .hypothesis
