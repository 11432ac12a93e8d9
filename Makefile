# Two commands: `make train` and `make test`. Each creates .venv if missing and installs what it needs.
PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test train venv clean

$(STAMP): pyproject.toml
	test -x $(VPY) || $(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -e '.[test,examples]'
	touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(VPY) -m pytest -q -n 2 tests

train: $(STAMP)
	$(VPY) examples/mlp_demo.py

clean:
	rm -rf $(VENV) .pytest_cache
