"""Planted bug (part 1): round_size rounds down, so blocks are smaller than what was asked for. Parts 2-4
are graded with the reference round_size: the bug must not cascade."""
# %% [a2-sizes]
def round_size(nbytes):
    """Request -> block size: a multiple of 512 bytes, at least 512."""
    if nbytes < 512:
        return 512
    return nbytes // 512 * 512                # BUG: rounds down


def pool_of(size):
    """The pool that serves a (rounded) size: "small_pool" up to 1 MiB, else "large_pool"."""
    return "small_pool" if size <= 1 * MiB else "large_pool"


def segment_size(size):
    """How many bytes to ask the device for when no cached block can serve a (rounded) size."""
    if size <= 1 * MiB:
        return 2 * MiB
    if size < 10 * MiB:
        return 20 * MiB
    return -(-size // (2 * MiB)) * (2 * MiB)
