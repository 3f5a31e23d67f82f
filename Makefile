# The two commands the README gives.  Each sets itself up on a fresh machine:
# a virtualenv in .venv, the kit installed into it, and the pinned Apache
# Artemis fetched from Maven Central into a cache outside git.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: main test setup vectors bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

setup: $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]' tox
	$(BIN)/python -m conformance.artemis fetch
	$(BIN)/python -m conformance.artemis build-tools

# The main job.  For now: the codec proven against the real Artemis (vectors made
# by Artemis's classes, and Artemis decoding ours), then the codec benchmark.
main: setup
	$(BIN)/pytest -q tests/codec tests/artemis
	$(BIN)/python benchmarks/codec_bench.py --quick

# Every test: the whole tox matrix (lint, type, py311, and py312/py313 where present).
test: setup
	$(BIN)/tox run

vectors: setup
	$(BIN)/python -m conformance.artemis vectors

bench: setup
	$(BIN)/python benchmarks/codec_bench.py

clean:
	rm -rf $(VENV) .tox build *.egg-info
