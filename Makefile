# Two commands: `make train` and `make test`. Each creates .venv if missing and installs what it needs.
PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test train bench venv clean

$(STAMP): pyproject.toml
	test -x $(VPY) || $(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -e '.[test,examples]'
	touch $(STAMP)

venv: $(STAMP)

# TESTS selects a subset: make test TESTS=tests/test_ir.py. The whole suite runs as
# TEST_CHUNKS pytest processes (tests/run_chunks.py: one process reached vm.max_map_count
# with the kernel libraries it had loaded).
TESTS ?= tests
TEST_CHUNKS ?= 3
test: $(STAMP)
ifeq ($(TESTS),tests)
	$(VPY) tests/run_chunks.py $(TEST_CHUNKS)
else
	$(VPY) -m pytest -q -n 2 $(TESTS)
endif

train: $(STAMP)
	$(VPY) examples/gpt2/train.py --config tiny

# The GPT-2 training step side by side with PyTorch eager, torch.compile and jax.jit (issue 5);
# the bench extra brings torch==2.13.0 (CPU build) and jax.
bench: $(STAMP)
	$(VPY) -m pip install -q -e '.[bench]'
	$(VPY) bench/gpt2_step.py

clean:
	rm -rf $(VENV) .pytest_cache
