"""The fusion pass's generated CuPy kernels, compiled by g++ behind the fake cupy (cupy_on_cpu.py), against
the generated NumPy kernels and eager minigrad: every fusible op, broadcasting inputs, forward and backward,
and FusedElementwise's CUDA branch (argument order, outputs) driven with the fake module as ``xp``."""
import shutil

import numpy as np
import pytest

import cupy_on_cpu  # tests/backend/cupy_on_cpu.py (pytest puts this directory on sys.path)
import minigrad as mg
import minigrad.nn.functional as F
from minigrad.compiler import FusedElementwise, fused_kernels

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to compile the kernels on CPU")

CHAINS = {   # together they use every op of the fusion table
    "arith": lambda x, b: ((x + b) * 0.5 - b / (b * b + 1.0)) ** 2 + (-x) ** 3.0 + 2.0 ** x,
    "transcendental": lambda x, b: (x.tanh().exp() + (x * x + 1.0).log() + (x * x + 0.1).sqrt()).sin()
    + x.cos() * x.abs(),
    "activations": lambda x, b: F.gelu(F.silu(F.sigmoid(F.leaky_relu(F.relu(x) + b, 0.1))), approximate="tanh")
    * F.tanh(x),
    "select": lambda x, b: mg.where(b > 0, mg.maximum(x, b), mg.minimum(x, b)).clamp(-0.5, 0.8) * x,
}


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(tmp_path_factory):
    if cupy_on_cpu.cache_dir is None:
        cupy_on_cpu.cache_dir = str(tmp_path_factory.mktemp("cupy_on_cpu"))


def _kernel(fn, x, b):
    c = mg.compile(fn)
    c(x, b)
    kernels = fused_kernels(c.graphs()[0])
    assert len(kernels) == 1, [k.name for k in kernels]
    return kernels[0], [n for n in c.graphs()[0].nodes if n.target is FusedElementwise][0]


class _Ctx:
    """What FusedElementwise needs of a ctx, with the fake cupy as the array module."""
    def __init__(self, xp, needs):
        self.xp, self.needs_input_grad = xp, needs

    def save_for_backward(self, *arrays):
        self.saved_tensors = arrays

    def empty(self, shape, dtype):
        return np.empty(shape, dtype)


@pytest.mark.parametrize("name", sorted(CHAINS))
@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_generated_cupy_kernels_match_numpy_kernels_and_eager(name, dtype):
    """float16 kernels compute in float and round once, on store: within a float16 rounding of the exact
    (float64) values, where NumPy's float16 kernel rounds after every op (float32 C differs from float16 C
    only by the float16 loads, and NVRTC compiles it: make test-cuda)."""
    if dtype == np.float16 and name != "activations":
        pytest.skip("one float16 chain is enough to check the C types (each kernel costs a g++ run)")
    rng = np.random.default_rng(0)
    x = mg.tensor(rng.standard_normal((4, 6)).astype(dtype), requires_grad=True)
    b = mg.tensor(rng.standard_normal((6,)).astype(dtype), requires_grad=True)
    kernel, node = _kernel(CHAINS[name], x, b)
    values = {"x": x, "b": b}

    def value(n):   # an input, or a node made from inputs outside the chain (b > 0 for `where`)
        if n.name in values:
            return values[n.name]
        return n.target(*[value(a) if hasattr(a, "kind") else a for a in n.args])
    inputs = [value(n).array for n in node.args]
    half = dtype == np.float16   # within half a float16 ulp of the exact value (and float32's error)
    tol = dict(rtol=2 ** -11 + 1e-6, atol=6e-8) if half else dict(rtol=1e-11, atol=1e-12)

    ctx = _Ctx(cupy_on_cpu, (True,) * len(inputs))
    out = FusedElementwise.forward(ctx, *inputs, kernel=kernel)
    if half:   # the exact values, from float64 leaves holding the same numbers
        x, b = (mg.tensor(t.array.astype(np.float64), requires_grad=True) for t in (x, b))
        values = {"x": x, "b": b}
    want = CHAINS[name](x, b)
    assert out.dtype == dtype and out.shape == (4, 6)
    np.testing.assert_allclose(out, want.detach().numpy(), **tol)
    np.testing.assert_allclose(out, kernel.forward_numpy(inputs, np.empty_like(out)), rtol=4e-3, atol=1e-3)

    g = rng.standard_normal((4, 6)).astype(dtype)
    grads = FusedElementwise.backward(ctx, g)
    want.backward(mg.tensor(g.astype(want.array.dtype)))
    by_name = {k: t.grad.numpy() for k, t in values.items() if t.grad is not None}
    for n, full in zip(node.args, grads):
        if n.name not in by_name:
            assert full is None   # the bool condition gets no gradient
            continue
        reduced = full.astype(np.float64).sum(axis=tuple(range(full.ndim - by_name[n.name].ndim)))   # as the engine
        np.testing.assert_allclose(reduced, by_name[n.name], **(dict(rtol=2e-3, atol=1e-3) if half and
                                                                 reduced.shape != full.shape else tol))


def test_backward_kernel_computes_only_the_wanted_gradients():
    x = mg.randn(3, 5, dtype=mg.float64, requires_grad=True)
    b = mg.randn(5, dtype=mg.float64)
    kernel, node = _kernel(lambda x, b: (x * b).exp() + b, x, b)
    ins, outs, body = kernel.cupy_backward_source([True, False])
    assert outs == "float64 gx0" and "gx1" not in body
    ctx = _Ctx(cupy_on_cpu, (True, False))
    FusedElementwise.forward(ctx, x.array, b.array, kernel=kernel)
    gx, gb = FusedElementwise.backward(ctx, np.ones((3, 5)))
    assert gb is None
    np.testing.assert_allclose(gx, b.numpy() * np.exp(x.detach().numpy() * b.numpy()), rtol=1e-12)
