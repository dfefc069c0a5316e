"""Planted bug (part 1): pack keeps the array itself, so nothing is recomputed and every activation stays
alive: the gradients are right, the memory is that of no checkpointing at all."""
# %% [a5-checkpoint] patch
# <<<
        return count[0] - 1                       # a handle (an index), not the activation
# ===
        return array                              # BUG: the activation is kept
# >>>
# <<<
    def unpack(index):
        if index not in recomputed:
            recompute()
        return recomputed.pop(index)              # dropped once read: it dies with its node's backward
# ===
    def unpack(array):
        return array
# >>>
