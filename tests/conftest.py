"""Shared fixtures. ``device`` parametrizes a test over cpu and cuda; cuda cases skip without a GPU."""
import numpy as np
import pytest
from hypothesis import HealthCheck, settings

import minigrad as mg

# CI machines are small and shared: no per-example deadline, and no "too slow" health check failures.
settings.register_profile("minigrad", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("minigrad")


def _cuda_available():
    cuda = getattr(mg, "cuda", None)
    try:
        return bool(cuda is not None and cuda.is_available())
    except Exception:
        return False


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def device(request):
    if request.param == "cuda" and not _cuda_available():
        pytest.skip("no CUDA device (set MINIGRAD_EMULATE_CUDA=1 to run cuda cases on the NumPy emulator)")
    return mg.device(request.param)


@pytest.fixture(autouse=True)
def _seed():
    mg.manual_seed(0)
    np.random.seed(0)
    yield
