# Two commands for a fresh machine with python3 and make: `make demo`, then `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The CPU build of torch, pinned (constraints.txt holds the pin for every install): an
# unpinned torch, or a package asking for a newer one, pulls gigabytes of CUDA wheels.
# --no-compile: Python compiles what is imported when it is first imported and keeps it;
# compiling all of torch and transformers at install took longer than the tests use of them.
# That needs Python allowed to write its bytecode: with PYTHONDONTWRITEBYTECODE set (some CI
# images set it) every rank of every job compiled torch again, 1.5 s of CPU each.
# pip itself first, to the version constraints.txt pins: the pip a venv is born with (23.2 on
# Python 3.11) takes 20 s of CPU to resolve what the one pinned resolves in 8; the tests' fresh
# environments are installed by this pip too (tests/support/venvs.py).
PIP := $(BIN)/pip install --quiet --no-compile --constraint constraints.txt
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup demo check test suite lint warm clean

# What the demo needs: torch (the job's ranks) and distmon itself, no extra.
$(VENV)/.demo: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) torch -e .
	touch $@

# What the tests need besides: every extra, and the tools (torch with them: one resolution, not two).
$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) torch -e ".[dev,stacks,integrations,html]"
	touch $(VENV)/.demo $@

setup: $(VENV)/.installed

demo: $(VENV)/.demo
	$(BIN)/python scripts/demo.py

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy

# torch compiled once, where it is first imported (--no-compile above): else the ranks of the
# jobs the tests start first each compile it at once, 5 CPU-s a process.
warm: setup
	$(BIN)/python -c "import torch, torch.distributed, torch.distributed.run, torch._dynamo, torch.nn.parallel, torch.utils.data"

# What to run before a commit, within 3 minutes on 2 cores: lint, types, the unit tests.
check: lint
	$(BIN)/pytest -n 2 -q tests/unit

# The lint beside the tests, not before them: while the first jobs stand in their injected hangs
# the tests leave a core idle at moments, and mypy's 10 CPU-s fit there.
test: warm
	$(MAKE) --no-print-directory -j2 lint suite

# The tests in two runs side by side. The tests of real jobs four files at a time: most of such
# a test is waiting (for a step, a threshold, an alert), so four share the 2 cores of a small CI
# machine; a file's module-scoped jobs stay in one worker; the longest files start first
# (tests/conftest.py), so that no long file starts last. The unit tests in one process beside
# them from the start: while the first jobs stand in their injected hangs a sixth of the
# machine is idle (measured with /proc/stat), which the unit tests take, where in one run they
# waited behind the jobs' files. The unit tests' output is shown once both runs have ended.
# (Run by `test`, which warms torch first.)
UNIT_TESTS := $(BIN)/pytest -p no:xdist tests/unit
JOB_TESTS := $(BIN)/pytest -n 4 --dist loadfile --no-loadscope-reorder --durations=25 tests/jobs tests/installed
suite: setup
	@echo "$(UNIT_TESTS) (beside)"; echo "$(JOB_TESTS)"
	@log=$$(mktemp); $(UNIT_TESTS) > $$log 2>&1 & unit=$$!; \
	$(JOB_TESTS); jobs=$$?; \
	wait $$unit; units=$$?; cat $$log; rm -f $$log; exit $$((jobs | units))

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .import_linter_cache
