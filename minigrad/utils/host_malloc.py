"""Host malloc tuning for the NumPy backend: explicit, never done by importing or using minigrad.

A training step makes many short-lived arrays of a few MB. With glibc's defaults each one is mmap-ed and
unmapped (or the heap top trimmed) every time, so every reuse page-faults fresh zeroed pages: on the tiny
GPT demo that was ~18k page faults per step and ~40 % of the run spent in the kernel. Raising the mmap
threshold (to glibc's maximum, 32 MB) and the trim threshold (to 1 GB) turns them into plain heap reuse --
the same idea as the caching allocator of lecture 02, applied by the C library.

What it changes: ``mallopt(M_MMAP_THRESHOLD)`` and ``mallopt(M_TRIM_THRESHOLD)`` of glibc's malloc, which
serves *every* library in the process (NumPy, BLAS, Python itself): freed memory then stays in the heap
instead of going back to the OS after every step. That is why minigrad never does it by itself: the
examples (``minigrad/examples/_common.py``) and the benchmarks call ``tune_host_malloc()``, and
``with tuned():`` scopes it to a block (a lecture can time a step with and without it)::

    from minigrad.utils import host_malloc
    with host_malloc.tuned():
        train_step()            # temporaries reuse heap pages: few page faults

glibc only (Linux); elsewhere these do nothing and return False.
"""
import contextlib
import ctypes
import sys

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3   # mallopt parameters (glibc malloc.h)
TUNED = {_M_MMAP_THRESHOLD: 32 * 2 ** 20, _M_TRIM_THRESHOLD: 2 ** 30}
# glibc's documented defaults; setting them back leaves the dynamic mmap threshold off (any mallopt call
# does), so after ``tuned()`` malloc behaves as with fixed 128 KiB thresholds
DEFAULTS = {_M_MMAP_THRESHOLD: 128 * 2 ** 10, _M_TRIM_THRESHOLD: 128 * 2 ** 10}
_state = {"tuned": False}


def _mallopt(values):
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        return all(bool(libc.mallopt(param, value)) for param, value in values.items())
    except (OSError, AttributeError):  # not glibc (musl, ...): leave malloc alone
        return False


def tune_host_malloc():
    """Raise glibc's mmap and trim thresholds for the rest of the process; True if applied."""
    _state["tuned"] = _mallopt(TUNED)
    return _state["tuned"]


def is_tuned():
    return _state["tuned"]


@contextlib.contextmanager
def tuned():
    """The tuning for the block only; glibc's default thresholds afterwards (see ``DEFAULTS``)."""
    was = _state["tuned"]
    applied = tune_host_malloc()
    try:
        yield applied
    finally:
        if applied and not was:
            _mallopt(DEFAULTS)
            _state["tuned"] = False
