"""The real CUDA toolchain, without a GPU: NVRTC compiles every kernel minigrad generates (test_nvrtc.py) and
the real CuPy's API is checked against the calls the fake CuPy modules record (test_cupy_api.py).

They need the packages of .venv-cuda (cupy-cuda12x, nvidia-cuda-nvrtc-cu12, nvidia-cuda-runtime-cu12,
nvidia-nccl-cu12), which ``make test-cuda`` builds and runs them in. Elsewhere (``make test``) they skip,
unless MINIGRAD_CUDA_CHECK=1 (set by ``make test-cuda``) turns a missing package into a failure.
The totals (kernels compiled, CuPy names and calls checked) are printed at the end of the run.
"""
import os

import pytest

REQUIRED = os.environ.get("MINIGRAD_CUDA_CHECK") == "1"
_TOTALS = {}   # user property -> summed value, filled from the reports (xdist workers' too)
_LABELS = {"nvrtc_sources": "kernel sources compiled by NVRTC per arch",
           "nvrtc_programs": "NVRTC compilations (sources x archs)",
           "nvrtc_not_emitted": "fusion chains with no generated kernel (float16 runs as CuPy array maths)",
           "cupy_names": "CuPy names checked (recorded calls and minigrad's source)",
           "cupy_calls": "distinct recorded calls bound to the real signatures"}


def toolchain_or_skip():
    """The real cupy module, with NVRTC and NCCL loadable; skip (or fail under make test-cuda) without."""
    try:
        import cupy
        from cupy.cuda import nccl
        from cupy_backends.cuda.libs import nvrtc
        nvrtc.getVersion()
        if not getattr(nccl, "available", False) or not hasattr(cupy, "ElementwiseKernel"):
            raise ImportError("cupy.cuda.nccl is not available (pip install nvidia-nccl-cu12)")
    except Exception as e:   # ImportError, or CuPy's error when libnvrtc is missing
        message = f"needs cupy-cuda12x with NVRTC and NCCL (make test-cuda builds .venv-cuda): {e}"
        if REQUIRED:
            pytest.fail(message)
        pytest.skip(message)
    return cupy


@pytest.fixture(scope="session")
def toolchain():
    return toolchain_or_skip()


def pytest_runtest_logreport(report):
    if report.when == "call":
        for name, value in report.user_properties:
            if name in _LABELS:
                _TOTALS[name] = _TOTALS.get(name, 0) + value


def pytest_terminal_summary(terminalreporter):
    if _TOTALS:
        terminalreporter.section("CUDA toolchain check (no GPU)")
        for name, label in _LABELS.items():
            if name in _TOTALS:
                terminalreporter.write_line(f"{_TOTALS[name]:6d}  {label}")
