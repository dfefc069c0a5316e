"""glibc malloc tuning is explicit and scoped: minigrad's backend never applies it by itself; ``tuned()``
applies it for a block and sets glibc's defaults back after (``minigrad/utils/host_malloc.py``)."""
import minigrad as mg
from minigrad.backend import array
from minigrad.utils import host_malloc


def test_the_cpu_backend_does_not_tune_malloc_and_tuned_scopes_it(monkeypatch):
    calls = []
    monkeypatch.setattr(host_malloc, "_mallopt", lambda values: calls.append(dict(values)) or True)
    monkeypatch.setitem(host_malloc._state, "tuned", False)
    array._cpu_backend(mg.device("cpu"))          # a fresh cpu backend, as on first use
    mg.randn(4).exp()
    assert calls == []
    with host_malloc.tuned() as applied:
        assert applied and host_malloc.is_tuned()
    assert calls == [host_malloc.TUNED, host_malloc.DEFAULTS] and not host_malloc.is_tuned()
