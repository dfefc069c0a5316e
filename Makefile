# minigrad: every target sets up what it needs by itself on a fresh clone.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-dev
BENCH_VENV := .venv-bench
BENCH_PY   := $(BENCH_VENV)/bin/python

.PHONY: venv test test-fast test-numpy1 demo bench gpu-check assignments grade gradescope lab clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# The whole suite, notebooks included. The 'cuda' cases run on the NumPy-backed CUDA emulator here,
# so device dispatch, transfers and mixing errors are exercised without a GPU (make gpu-check runs them
# on a real GPU).
test: $(STAMP)
	$(PY) -m autograder generate --check
	MINIGRAD_EMULATE_CUDA=1 $(PY) -m pytest -q -n 2 -p no:cacheprovider

test-fast: $(STAMP)
	MINIGRAD_EMULATE_CUDA=1 $(PY) -m pytest -q -n 2 -p no:cacheprovider -m "not notebook and not slow"

# The core, nn, optim, data and memory suites again under NumPy 1.26 (minigrad supports 1.26 and 2.x).
NP1_VENV := .venv-numpy1
$(NP1_VENV)/.installed: pyproject.toml
	test -x $(NP1_VENV)/bin/python || $(PYTHON) -m venv $(NP1_VENV)
	$(NP1_VENV)/bin/python -m pip install -q --upgrade pip
	$(NP1_VENV)/bin/python -m pip install -q -e '.[dev]' 'numpy==1.26.4'
	touch $@

test-numpy1: $(NP1_VENV)/.installed
	MINIGRAD_EMULATE_CUDA=1 $(NP1_VENV)/bin/python -m pytest -q -n 2 -p no:cacheprovider \
		--ignore=tests/autograder --ignore=tests/course --ignore=tests/lectures --ignore=tests/examples \
		--ignore=tests/benchmarks

# The main job: an MLP and a CNN on 8x8 digits (>= 95 % test accuracy) and a tiny GPT on a text corpus;
# curves (PNG), checkpoints and a generated sample land in results/. DEMO_ARGS="--only tiny_gpt" etc.
demo: $(STAMP)
	$(PY) -m minigrad.examples.demo $(DEMO_ARGS)

# Benchmarks against PyTorch (CPU) in their own environment, side by side in one run.
$(BENCH_VENV)/.installed: pyproject.toml
	test -x $(BENCH_PY) || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_PY) -m pip install -q --upgrade pip
	$(BENCH_PY) -m pip install -q torch==2.13.0
	$(BENCH_PY) -m pip install -q -e '.[data]'
	touch $@

bench: $(BENCH_VENV)/.installed
	$(BENCH_PY) benchmarks/overhead.py

# On a machine with an NVIDIA GPU: cuda tests + GPU benchmarks with that machine's own python3 and packages
# (no installs, no network). Results land in $${OUT:-results}/.
gpu-check:
	bash benchmarks/gpu_check.sh

# The course: student notebooks are generated from solutions/ (the single source of truth).
assignments: $(STAMP)
	$(PY) -m autograder generate

# Grade your own copy of an assignment: make grade A=a1
A ?= a1
grade: $(STAMP)
	$(PY) -m autograder grade $(firstword $(wildcard assignments/$(A)_*.ipynb)) --assignment $(A)

gradescope: $(STAMP)
	$(PY) -m autograder gradescope-bundle $(A) --out dist

lab: $(STAMP)
	$(PY) -m pip install -q -e '.[course]'
	$(VENV)/bin/jupyter lab

clean:
	rm -rf $(VENV) $(BENCH_VENV) $(NP1_VENV) results .pytest_cache .hypothesis
