"""The claims lectures 03 and 04 make in prose hold on the code they describe (cheap checks; the notebooks
themselves are executed by test_notebooks.py)."""
import math

import numpy as np
import pytest

import minigrad as mg
import minigrad.memory as mem
from minigrad import nn
from minigrad.nn import functional as F

VIEWS = {"reshape": lambda x: x.reshape(-1), "view": lambda x: x.view(128, 512), "T": lambda x: x.T,
         "permute": lambda x: x.permute(1, 0), "slice": lambda x: x[10:20], "step": lambda x: x[:, ::2],
         "narrow": lambda x: x.narrow(0, 3, 5), "unsqueeze": lambda x: x.unsqueeze(0),
         "expand": lambda x: x[:1].expand(256, 256), "float": lambda x: x.float()}
COPIES = {"T.contiguous": (lambda x: x.T.contiguous(), 262144), "T.reshape": (lambda x: x.T.reshape(-1), 262144),
          "fancy": (lambda x: x[mg.tensor([1, 2, 3])], 3072), "clone": (lambda x: x.clone(), 262144),
          "double": (lambda x: x.double(), 524288), "add": (lambda x: x + 0, 262144)}


def test_lecture_03_views_cost_zero_bytes_and_share_the_version_counter():
    with mem.enabled("cpu"):
        x = mg.randn(256, 256)
        keep = []
        for name, op in VIEWS.items():
            before = mem.memory_allocated()
            keep.append(op(x))
            assert mem.memory_allocated() == before, name
            assert keep[-1]._version_counter is x._version_counter, name
        for name, (op, nbytes) in COPIES.items():
            before = mem.memory_allocated()
            keep.append(op(x))
            assert mem.memory_allocated() - before == nbytes, name
            assert keep[-1]._version_counter is not x._version_counter, name


def test_lecture_03_inplace_on_a_saved_output_names_the_op():
    w = mg.randn(4, requires_grad=True)
    y = w.exp()
    y.add_(1)
    with pytest.raises(mg.errors.InplaceModificationError, match=r"exp: .*\(its output\)"):
        y.sum().backward()


def _mlp():
    mg.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))


def _naive_ce(z, y):
    return -(F.one_hot(y, 10) * F.softmax(z, dim=1).log()).sum(1).mean()


def test_lecture_04_naive_loss_diverges_log_is_named_and_clipping_rescues():
    from minigrad.datasets import load_digits
    X, Y = load_digits("train", flatten=True).tensors

    def run(clip):
        model = _mlp()
        opt = mg.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
        rng = np.random.default_rng(0)
        for t in range(100):
            idx = mg.tensor(rng.integers(0, len(X), 64))
            with np.errstate(all="ignore"):
                if t == 43 and not clip:
                    with pytest.raises(mg.errors.AnomalyError, match="log produced Inf in its output"):
                        with mg.autograd.detect_anomaly():
                            _naive_ce(model(X[idx]), Y[idx])
                loss = _naive_ce(model(X[idx]), Y[idx])
                opt.zero_grad()
                loss.backward()
            if clip:
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            if not math.isfinite(loss.item()):
                return t
        return None
    assert run(clip=False) == 43
    assert run(clip=True) is None


def test_lecture_04_accumulated_micro_batches_equal_the_full_batch():
    model = _mlp()
    x, y = mg.randn(128, 64), mg.randint(0, 10, (128,))
    F.cross_entropy(model(x), y).backward()
    full = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    for cx, cy in zip(x.chunk(4), y.chunk(4)):
        (F.cross_entropy(model(cx), cy) / 4).backward()
    for p, f in zip(model.parameters(), full):
        np.testing.assert_allclose(p.grad.numpy(), f, rtol=1e-5, atol=1e-6)
