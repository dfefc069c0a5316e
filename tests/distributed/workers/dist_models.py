"""Models and data shared by the DDP worker (in each rank) and the test (the single-process reference)."""
import numpy as np

import minigrad as mg
from minigrad import nn

WORLD, BATCH, STEPS, LR = 2, 4, 3, 0.1


class WithUnused(nn.Module):
    """An MLP plus a layer that is registered but never called by forward."""

    def __init__(self, net):
        super().__init__()
        self.net, self.unused = net, nn.Linear(3, 3)

    def forward(self, x):
        return self.net(x)


def mlp(seed, hidden=8, extra=False):
    mg.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, hidden), nn.Tanh(), nn.Linear(hidden, 16), nn.Tanh(), nn.Linear(16, 3))
    return (WithUnused(model) if extra else model).double()


def data(step, micro=0):
    """The global batch of one step: WORLD * BATCH rows; rank r's rows are r*BATCH:(r+1)*BATCH."""
    rng = np.random.default_rng(1000 * step + micro)
    return rng.standard_normal((WORLD * BATCH, 4)), rng.standard_normal((WORLD * BATCH, 3))


def shard(arrays, rank):
    return [mg.tensor(a[rank * BATCH:(rank + 1) * BATCH]) for a in arrays]


def loss_fn(model, x, y):
    return ((model(x) - y) ** 2).mean()
