# Buckets in registration order: the first bucket's gradients are the last to be ready.
# %% [a6-ddp] patch
# <<<
        for k in reversed(range(len(self.params))):
# ===
        for k in range(len(self.params)):
# >>>
