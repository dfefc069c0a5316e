# Every rank receives before it sends: nobody ever sends.
# %% [a6-ring] patch
# <<<
        comm.send(chunks[(r - s) % n], right)
        chunks[(r - s - 1) % n] = chunks[(r - s - 1) % n] + comm.recv(left)
# ===
        incoming = comm.recv(left)
        comm.send(chunks[(r - s) % n], right)
        chunks[(r - s - 1) % n] = chunks[(r - s - 1) % n] + incoming
# >>>
