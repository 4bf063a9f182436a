# Two commands for a fresh machine with python3 and make: `make demo`, then `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The CPU build of torch, pinned (constraints.txt holds the pin for every install): an
# unpinned torch, or a package asking for a newer one, pulls gigabytes of CUDA wheels.
# --no-compile: Python compiles what is imported when it is first imported; compiling all of
# torch and transformers at install took longer than the tests use of them.
PIP := $(BIN)/pip install --quiet --no-compile --constraint constraints.txt

.PHONY: setup demo test lint clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP) torch
	$(PIP) -e ".[dev,integrations,html]"
	touch $@

demo: setup
	$(BIN)/python scripts/demo.py

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy

test: lint
	$(BIN)/pytest

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
