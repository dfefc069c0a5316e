"""Models, data and plans shared by the parallelism workers (in each rank) and their tests (the one-process
references): a tiny GPT and an MLP in float64, a global batch per step, the tensor-parallel plan."""
import numpy as np

import minigrad as mg
from minigrad import nn
from minigrad.distributed.tensor_parallel import (ColwiseParallel, HeadwiseParallel, Replicate,
                                                  RowwiseParallel)
from minigrad.examples.tiny_gpt import TinyGPT, lm_loss

VOCAB, BLOCK, STEPS, LR = 16, 8, 3, 0.01


def gpt(seed=0):
    mg.manual_seed(seed)
    return TinyGPT(VOCAB, BLOCK, d_model=16, n_layer=2, n_head=4).double()


def tokens(step, rows=4):
    rng = np.random.default_rng(100 + step)
    return rng.integers(0, VOCAB, (rows, BLOCK)), rng.integers(0, VOCAB, (rows, BLOCK))


def mlp(seed=0):
    mg.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 3)).double()


def mlp_data(step, rows=8):
    rng = np.random.default_rng(200 + step)
    return rng.standard_normal((rows, 8)), rng.standard_normal((rows, 3))


def mse(out, y):
    return ((out - y) ** 2).mean()


def rows_of(arrays, part, parts):
    """Rank ``part``'s rows of each array (data parallelism's shard of the global batch)."""
    k = arrays[0].shape[0] // parts
    return [mg.tensor(a[part * k:(part + 1) * k]) for a in arrays]


def gpt_plan(loss_parallel=True):
    """The tiny GPT's tensor-parallel plan; with ``loss_parallel`` the logits stay split by vocabulary."""
    return {"tok_emb": RowwiseParallel(input_layouts=Replicate()), "blocks.*.attn": HeadwiseParallel(),
            "blocks.*.mlp.fc": ColwiseParallel(), "blocks.*.mlp.proj": RowwiseParallel(),
            "head": ColwiseParallel() if loss_parallel else ColwiseParallel(output_layouts=Replicate())}


class GPTStage(nn.Module):
    """Stage 0: embeddings + the first block; stage 1: the second block, the final norm and the head."""

    def __init__(self, model, stage):
        super().__init__()
        self.stage = stage
        if stage == 0:
            self.tok_emb, self.pos_emb, self.block = model.tok_emb, model.pos_emb, model.blocks[0]
        else:
            self.block, self.ln_f, self.head = model.blocks[1], model.ln_f, model.head

    def forward(self, x):
        if self.stage == 0:
            x = self.tok_emb(x) + self.pos_emb(mg.arange(x.shape[1]))
            return self.block(x)
        return self.head(self.ln_f(self.block(x)))


def gpt_stage_names(stage):
    """The full model's parameter names that stage ``stage`` holds, in its order."""
    return [n for n, _ in gpt().named_parameters()
            if (n.startswith(("tok_emb", "pos_emb", "blocks.0")) if stage == 0 else
                n.startswith(("blocks.1", "ln_f", "head")))]


def train(model, steps, batch, loss_fn, opt):
    for step in range(steps):
        opt.zero_grad()
        x, y = batch(step)
        loss_fn(model(mg.tensor(x)), mg.tensor(y)).backward()
        opt.step()
    return model


def gpt_loss(logits, y):
    return lm_loss(logits, y)
