# The row-parallel layer adds its bias before the all-reduce: every rank adds it, so the sum holds it N times.
# %% [a9-tp] patch
# <<<
        return reduce_from_parallel(F.linear(x, self.weight), self.comm) + self.bias
# ===
        return reduce_from_parallel(F.linear(x, self.weight, self.bias), self.comm)
# >>>
