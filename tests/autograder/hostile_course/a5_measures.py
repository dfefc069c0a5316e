# part1 (cause 2): checkpoint keeps a copy of every activation outside minigrad's memory pool (NumPy arrays
# in a list): the pool's events show nothing kept, the grader's meter sees the bytes.
# %% [a5-checkpoint] patch
# <<<
    def pack(array):
        count[0] += 1
        return count[0] - 1                       # a handle (an index), not the activation
# ===
    def pack(array):
        count[0] += 1
        _aside.append(np.array(array, copy=True))   # kept outside the pool
        return count[0] - 1
# >>>
# <<<
def checkpoint(fn, *args, preserve_rng_state=True):
# ===
_aside = []


def checkpoint(fn, *args, preserve_rng_state=True):
# >>>
