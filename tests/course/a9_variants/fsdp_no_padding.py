# shard_flat splits the flat vector with np.array_split: no padding, so the ranks' chunks differ in length.
# %% [a9-shard] patch
# <<<
    k = -(-flat.size // comm.size)
    padded = np.zeros(k * comm.size)
    padded[:flat.size] = flat
    return padded[comm.rank * k:(comm.rank + 1) * k].copy()
# ===
    return np.array_split(flat, comm.size)[comm.rank].copy()
# >>>
