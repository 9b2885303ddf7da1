# The two commands of policylab: `make demo` and `make test`.
# Both create .venv when missing and reinstall only when pyproject.toml changes.
PYTHON     ?= python3
VENV       ?= .venv
# Installed before anything that depends on torch, so pip never resolves a CUDA build.
# On a laptop without a local wheel: make TORCH_SPEC=torch TORCH_INDEX=--index-url=https://download.pytorch.org/whl/cpu
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=
BIN        := $(VENV)/bin

.PHONY: demo test lint assets clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.torch: | $(BIN)/python
	$(BIN)/python -m pip install --quiet $(TORCH_INDEX) "$(TORCH_SPEC)"
	touch $@

$(VENV)/.installed: pyproject.toml $(VENV)/.torch
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml $(VENV)/.torch
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $@

# The main job: GRPO on the shipped tiny model, held-out accuracy before and after.
# A new demo replaces the previous one's run folder (runs/demo).
demo: $(VENV)/.installed
	rm -rf runs/demo
	$(BIN)/policylab train --config examples/demo.yaml

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q

# Rebuilds the shipped tiny model from scratch (fixed seeds, SFTConfig defaults).
assets: $(VENV)/.installed
	$(BIN)/policylab sft out=src/policylab/assets/tiny overwrite=true device=cpu

lint: $(VENV)/.installed-test
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
