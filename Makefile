# minigrad: every target sets up .venv by itself on a fresh clone.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-dev

.PHONY: venv test demo bench gpu-check clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q -n 2 -p no:cacheprovider

demo: $(STAMP)
	$(PY) -m minigrad.examples.toy

clean:
	rm -rf $(VENV) results .pytest_cache .hypothesis
