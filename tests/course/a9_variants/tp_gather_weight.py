# The column-parallel layer all-gathers the whole weight (its own rows kept differentiable) and slices its
# output columns out of the full product: right numbers, N x the weight memory, weights moved every step.
# %% [a9-tp] patch
# <<<
        return F.linear(copy_to_parallel(x, self.comm), self.weight, self.bias)
# ===
        k, r = self.weight.shape[0], self.comm.rank
        full = self.comm.all_gather(self.weight.detach().numpy())
        W = mg.cat([mg.tensor(full[:r * k]), self.weight, mg.tensor(full[(r + 1) * k:])])
        return F.linear(copy_to_parallel(x, self.comm), W)[:, r * k:(r + 1) * k] + self.bias
# >>>
