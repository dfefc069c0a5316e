# The reduce-scatter adds the incoming chunk into the chunk it just sent, one index off.
# %% [a6-ring] patch
# <<<
        chunks[(r - s - 1) % n] = chunks[(r - s - 1) % n] + comm.recv(left)
# ===
        chunks[(r - s) % n] = chunks[(r - s) % n] + comm.recv(left)
# >>>
