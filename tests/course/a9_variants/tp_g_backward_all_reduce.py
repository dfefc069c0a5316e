# g's backward all-reduces too (as if it were f): the upstream gradient is summed over the ranks.
# %% [a9-fg] patch
# <<<
        return comm.all_reduce(x)
# ===
        ctx.comm = comm
        return comm.all_reduce(x)
# >>>
# <<<
        return grad
# ===
        return ctx.comm.all_reduce(grad)
# >>>
