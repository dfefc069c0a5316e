# part1 (cause 2): the column-parallel layer gathers the full weight with messages of its own, sent through the
# world behind the recorder it was handed, so the log of collectives looks like tensor parallelism: the
# world's messages disagree with the recorded collectives, and the part is rejected.
# part2 (cause 4): the FSDP unit all-gathers its shard as it should, then computes nothing (zeros forward and
# backward): it keeps no memory after forward, which is credited only to a unit whose gradients are right.
# %% [a9-tp] patch
# <<<
        return F.linear(copy_to_parallel(x, self.comm), self.weight, self.bias)
# ===
        c, r, n = self.comm._comm, self.comm.rank, self.comm.size
        mine = self.weight.detach().numpy()
        for q in range(n):
            if q != r:
                c.send(mine, q)
        rows = [mine if q == r else c.recv(q) for q in range(n)]
        k = mine.shape[0]
        W = mg.cat([mg.tensor(np.concatenate(rows[:r] or [np.zeros((0, mine.shape[1]))])), self.weight,
                    mg.tensor(np.concatenate(rows[r + 1:] or [np.zeros((0, mine.shape[1]))]))])
        return F.linear(copy_to_parallel(x, self.comm), W)[:, r * k:(r + 1) * k] + self.bias
# >>>
# %% [a9-fsdp]
class FSDPLinear(Function):
    @staticmethod
    def forward(ctx, x, shard, comm, out_features, in_features):
        comm.all_gather(shard)
        ctx.shape = x.shape
        return np.zeros((x.shape[0], out_features))

    @staticmethod
    def backward(ctx, grad):
        return np.zeros(ctx.shape), None
