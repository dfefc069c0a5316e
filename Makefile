# minigrad: every target sets up what it needs by itself on a fresh clone.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-dev
BENCH_VENV := .venv-bench
BENCH_PY   := $(BENCH_VENV)/bin/python

# setuptools prints an "Editable installation" banner for every editable install of a flat layout;
# it is information only, so it is filtered out (by its message) of the build backend's warnings.
PIP_QUIET := PYTHONWARNINGS="ignore:Editable installation"

.PHONY: venv test test-fast test-numpy1 test-cuda check-handouts size-budget site browser demo bench bench-compat gpu-check assignments start grade release \
	gradescope lab clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PIP_QUIET) $(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# The whole suite, notebooks included. The 'cuda' cases run on the NumPy-backed CUDA emulator here,
# so device dispatch, transfers and mixing errors are exercised without a GPU (make gpu-check runs them
# on a real GPU).
# TESTS narrows the run (make test TESTS=tests/ops); the handout check compares without writing anything.
# The fake CuPy modules record the calls minigrad makes into them (build/cupy-calls/, read by make test-cuda).
TESTS ?=
CALL_LOG := build/cupy-calls
test: $(STAMP) browser check-handouts size-budget
	rm -rf $(CALL_LOG)
	MINIGRAD_EMULATE_CUDA=1 MINIGRAD_CUPY_CALL_LOG=$(CALL_LOG) $(PY) -m pytest -q -n 2 -p no:cacheprovider $(TESTS)
	$(if $(TESTS),,mkdir -p $(CALL_LOG) && touch $(CALL_LOG)/.complete)

check-handouts: $(STAMP)
	$(PY) -m autograder generate --check

# The course website (Sphinx + MyST-NB): README, the lectures executed, the assignment handouts (never
# the solutions), the autograder README and docs/ -> build/site/html/index.html (open it, or
# python -m http.server -d build/site/html). Rebuilds re-run only notebooks that changed (jupyter-cache).
site: $(STAMP)
	$(PY) site/build.py

# Headless Chromium for the site's browser tests (tests/site): Debian's package, as root (as on CI).
browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium) \
		|| echo "no chromium could be installed: the browser tests in tests/site will skip"

# Line budget (tools/size_budget.py): no file in minigrad/ or autograder/ over 500 lines, the core under 6,700.
size-budget: $(STAMP)
	$(PY) -m tools.size_budget

test-fast: $(STAMP)
	MINIGRAD_EMULATE_CUDA=1 $(PY) -m pytest -q -n 2 -p no:cacheprovider -m "not notebook and not slow"

# The core, nn, optim, data and memory suites again under NumPy 1.26 (minigrad supports 1.26 and 2.x).
NP1_VENV := .venv-numpy1
$(NP1_VENV)/.installed: pyproject.toml
	test -x $(NP1_VENV)/bin/python || $(PYTHON) -m venv $(NP1_VENV)
	$(NP1_VENV)/bin/python -m pip install -q --upgrade pip
	$(PIP_QUIET) $(NP1_VENV)/bin/python -m pip install -q -e '.[dev]' 'numpy==1.26.4'
	touch $@

test-numpy1: $(NP1_VENV)/.installed
	MINIGRAD_EMULATE_CUDA=1 $(NP1_VENV)/bin/python -m pytest -q -n 2 -p no:cacheprovider \
		--ignore=tests/autograder --ignore=tests/course --ignore=tests/lectures --ignore=tests/examples \
		--ignore=tests/benchmarks --ignore=tests/compat --ignore=tests/site

# The real CUDA toolchain, no GPU needed (tests/cuda, in its own .venv-cuda: cupy-cuda12x, NVIDIA's NVRTC,
# CUDA headers and NCCL wheels, ~1 GB): NVRTC compiles every CUDA source minigrad can generate, as CuPy hands
# it over, for sm_80 and sm_90; the real CuPy's signatures are checked against the calls the fake CuPy
# modules record (re-recorded by running the fake harness unless the last full make test left a fresh log).
CUDA_VENV := .venv-cuda
CUDA_PY   := $(CUDA_VENV)/bin/python
FAKE_HARNESS := tests/backend/test_cuda_kernels_on_cpu.py tests/backend/test_amp_kernels_on_cpu.py \
	tests/backend/test_fused_kernels_on_cpu.py tests/backend/test_devices.py tests/memory/test_cupy_pool.py \
	tests/distributed/test_nccl_fake.py
$(CUDA_VENV)/.installed: pyproject.toml
	test -x $(CUDA_PY) || $(PYTHON) -m venv $(CUDA_VENV)
	$(PIP_QUIET) $(CUDA_PY) -m pip install -q -e '.[cuda-check]'
	touch $@

test-cuda: $(STAMP) $(CUDA_VENV)/.installed
	@if [ -f $(CALL_LOG)/.complete ] && [ -z "$$(find minigrad tests -name '*.py' -newer $(CALL_LOG)/.complete)" ]; \
	then echo "CuPy calls: as recorded by the last make test ($(CALL_LOG))"; \
	else rm -rf $(CALL_LOG) && MINIGRAD_EMULATE_CUDA=1 MINIGRAD_CUPY_CALL_LOG=$(CALL_LOG) \
		$(PY) -m pytest -q -n 2 -p no:cacheprovider $(FAKE_HARNESS) && touch $(CALL_LOG)/.complete; fi
	MINIGRAD_CUDA_CHECK=1 MINIGRAD_CUPY_CALL_LOG=$(CALL_LOG) $(CUDA_PY) -m pytest -q -n 2 -p no:cacheprovider \
		--confcutdir=tests/cuda tests/cuda

# The main job: an MLP and a CNN on 8x8 digits (>= 95 % test accuracy) and a tiny GPT on a text corpus;
# curves (PNG), checkpoints and a generated sample land in results/. DEMO_ARGS="--only tiny_gpt" etc.
demo: $(STAMP)
	$(PY) -m minigrad.examples.demo $(DEMO_ARGS)

# Benchmarks against PyTorch (CPU) in their own environment, side by side in one run.
$(BENCH_VENV)/.installed: pyproject.toml
	test -x $(BENCH_PY) || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_PY) -m pip install -q --upgrade pip
	$(BENCH_PY) -m pip install -q torch==2.13.0 tensorboard requests
	$(PIP_QUIET) $(BENCH_PY) -m pip install -q -e '.[data,plot,tensorboard,export]'
	touch $@

bench: $(BENCH_VENV)/.installed
	$(BENCH_PY) benchmarks/overhead.py

# The compatibility programs (tests/compat) on PyTorch and on minigrad: end to end, and losses and
# gradients in lockstep from the same weights (tensorboard and requests: what the programs import).
bench-compat: $(BENCH_VENV)/.installed
	$(BENCH_PY) benchmarks/compat_compare.py

# On a machine with an NVIDIA GPU: cuda tests + GPU benchmarks with that machine's own python3 and packages
# (no installs, no network). Results land in $${OUT:-results}/.
gpu-check:
	bash benchmarks/gpu_check.sh

# The course. Students: `make start A=a1` copies the handout to work/ (yours: nothing ever writes there),
# `make grade A=a1` grades work/a1_*.ipynb (NB=path grades another notebook), `make lab` opens JupyterLab.
A ?= a1
NB ?=
start: $(STAMP)
	$(PY) -m autograder start $(A)

grade: $(STAMP)
	$(PY) -m autograder grade $(NB) --assignment $(A)

# Instructors: handouts in assignments/ are generated from solutions/ (the single source of truth); the
# generator refuses to overwrite a handout edited by hand (FORCE=1 overwrites it).
assignments: $(STAMP)
	$(PY) -m autograder generate $(if $(FORCE),--force)

# The repository students clone: no solutions/, no hidden cases, no instructor tests (see autograder/README.md).
RELEASE ?= dist/student-release
release: $(STAMP)
	$(PY) -m autograder release --out $(RELEASE) $(if $(FORCE),--force)

gradescope: $(STAMP)
	$(PY) -m autograder gradescope-bundle $(A) --out dist

# Jupyter refuses to run as root unless told to (containers and CI images often run as root).
lab: $(STAMP)
	$(PIP_QUIET) $(PY) -m pip install -q -e '.[course]'
	$(VENV)/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root)

clean:
	rm -rf $(VENV) $(BENCH_VENV) $(NP1_VENV) $(CUDA_VENV) results .pytest_cache .hypothesis   # never work/: your answers
