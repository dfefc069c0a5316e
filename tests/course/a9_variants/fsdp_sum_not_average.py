# The reduce-scattered gradient is returned as the sum over ranks, never divided by the world size.
# %% [a9-fsdp] patch
# <<<
        return grad @ W, comm.reduce_scatter(flat) / comm.size
# ===
        return grad @ W, comm.reduce_scatter(flat)
# >>>
