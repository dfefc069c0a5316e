# The right sum, but by sending the whole vector to every other rank: N-1 times the bytes, not a ring.
# %% [a6-ring]
def ring_all_reduce(comm, x):
    for dst in range(comm.size):
        if dst != comm.rank:
            comm.send(x, dst)
    total = np.array(x, dtype=np.float64)
    for src in range(comm.size):
        if src != comm.rank:
            total = total + comm.recv(src)
    return total
