# part1 (cause 2): the column-parallel layer gathers the full weight with messages of its own, sent through the
# world behind the recorder it was handed, so the log of collectives looks like tensor parallelism: the
# world's messages disagree with the recorded collectives, and the part is rejected.
# part2 (cause 4): the FSDP unit all-gathers its shard as it should, then computes nothing (zeros forward and
# backward): it keeps no memory after forward, which is credited only to a unit whose gradients are right.
# part3 (cause 3): the stages are threads of one process: they pass activations and gradients through a dict
# they all share instead of send/recv, in the 1F1B order. The gradients are right, but no stage took its
# input from a message: every test of the part is credited only to stages that communicate.
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
# %% [a9-1f1b] patch
# <<<
def forward_step(stage, i, saved):
# ===
import time

_BOARD = {}


def _take(stage, key):
    board = _BOARD.setdefault(stage._comm.world, {})
    while key not in board:
        time.sleep(0.0005)
    return board.pop(key)


def _put(stage, key, value):
    _BOARD.setdefault(stage._comm.world, {})[key] = value


def forward_step(stage, i, saved):
    if stage.rank > 0:
        x = mg.tensor(_take(stage, ("a", stage.rank - 1, i)), requires_grad=True)
        y = stage.module(x)
        if stage.rank == stage.size - 1:
            y = stage.loss(y, i)
        else:
            _put(stage, ("a", stage.rank, i), y.detach().numpy())
        saved[i] = (x, y)
        return
# >>>
# <<<
        stage.send(y.detach().numpy(), stage.rank + 1)
# ===
        _put(stage, ("a", stage.rank, i), y.detach().numpy())
# >>>
# <<<
        y.backward(mg.tensor(stage.recv(stage.rank + 1)))
    if stage.rank > 0:
        stage.send(x.grad.numpy(), stage.rank - 1)
# ===
        y.backward(mg.tensor(_take(stage, ("g", stage.rank + 1, i))))
    if stage.rank > 0:
        _put(stage, ("g", stage.rank, i), x.grad.numpy())
# >>>
