# Divides by the world size twice.
# %% [a6-ddp] patch
# <<<
            total = handle.wait() / self.comm.size
# ===
            total = handle.wait() / self.comm.size / self.comm.size
# >>>
