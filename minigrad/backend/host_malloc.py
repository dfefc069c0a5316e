"""Host malloc tuning for the NumPy backend (glibc only; opt out with MINIGRAD_MALLOC_TUNING=0).

A training step makes many short-lived arrays of a few MB. With glibc's defaults each one is mmap-ed and
unmapped (or the heap top trimmed) every time, so every reuse page-faults fresh zeroed pages: on the tiny
GPT demo that was ~18k page faults per step and ~40 % of the run spent in the kernel. Raising the mmap
threshold (to glibc's maximum, 32 MB) and the trim threshold turns them into plain heap reuse — the same idea
as the caching allocator of lecture 02, applied by the C library. Process-wide and idempotent; freed memory
goes back to the OS at exit rather than after every step.
"""
import ctypes
import os
import sys

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3   # mallopt parameters (glibc malloc.h)
_tuned = None


def tune_host_malloc():
    """Apply the tuning once; returns True if it was applied."""
    global _tuned
    if _tuned is not None:
        return _tuned
    _tuned = False
    if sys.platform.startswith("linux") and os.environ.get("MINIGRAD_MALLOC_TUNING", "1") != "0":
        try:
            libc = ctypes.CDLL("libc.so.6")
            _tuned = bool(libc.mallopt(_M_MMAP_THRESHOLD, 32 * 2 ** 20)
                          and libc.mallopt(_M_TRIM_THRESHOLD, 2 ** 30))
        except (OSError, AttributeError):  # not glibc (musl, ...): leave malloc alone
            pass
    return _tuned
