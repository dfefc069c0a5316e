"""Every op of the library beyond first order, in float64 on tiny shapes:

* ``gradgradcheck``: second derivatives (create_graph=True) against central differences;
* forward mode: each op's JVP against central differences along a random tangent, and against
  reverse-over-reverse (the tangent of u -> vjp(u) taken by a second backward: J t = d<J^T u, t>/du).

``OPS`` names each case after the Function it exercises; ``test_every_function_is_covered`` fails when an op
of the library has no case here (or no vjp/jvp rule).
"""
import numpy as np
import pytest

import minigrad as mg
import minigrad.autograd.forward_ad as fwAD
import minigrad.nn.functional as F
from minigrad.autograd import gradgradcheck
from minigrad.autograd.function import Function
from minigrad.compiler import FusedElementwise

R = np.random.default_rng(7)


def rand(*shape, low=None):
    a = R.standard_normal(shape) if low is None else R.uniform(low, low + 1.5, shape)
    return a


TGT = np.array([0, 2, 1])
BOOL = R.random((3, 4)) > 0.3
BOOL[1] = False                     # a fully masked row (attention gives zeros there)
PROBS = R.dirichlet(np.ones(4), 3)
RM, RV = R.standard_normal(2), R.uniform(0.5, 1.5, 2)
_compiled = mg.compile(lambda x, b: (F.gelu((x * 0.5 + b).sigmoid(), approximate="tanh") - x.clamp(-0.5, 0.7)) ** 2.0)

# (case id, the Functions it covers, fn, input arrays): inputs become float64 tensors that require grad
OPS = [
    ("add_sub_neg", "Add Sub Neg", lambda a, b: a + b - (-a) * 2.0 - (3.0 - b), [rand(2, 3), rand(3)]),
    ("mul_div", "Mul Div", lambda a, b: a * b / (b * b + 1.0) + 2.0 / (a * a + 1.0), [rand(2, 3), rand(2, 3)]),
    ("pow", "Pow", lambda a, b: a ** b + a ** 2 + 1.5 ** b, [rand(2, 3, low=0.5), rand(2, 3)]),
    ("exp_log_sqrt", "Exp Log Sqrt", lambda a: a.exp() + a.log() * a.sqrt(), [rand(2, 3, low=0.5)]),
    ("abs_sin_cos", "Abs Sin Cos", lambda a: a.abs() * a.sin() + a.cos(), [rand(2, 3, low=0.3)]),
    ("clamp", "Clamp", lambda a, lo: a.clamp(-0.5, 0.7) * a + a.clamp(min=lo) ** 2, [rand(2, 3), rand(3)]),
    ("maximum_minimum", "Maximum Minimum", lambda a, b: mg.maximum(a, b) ** 2 + mg.minimum(a, b) * a,
     [rand(2, 3), rand(2, 3)]),
    ("where_cast_clone", "Where Cast Clone", lambda a, b: mg.where(a > 0, a * b, _cast(b.clone()) ** 2) ** 2,
     [rand(2, 3), rand(2, 3)]),
    ("sum_mean", "Sum Mean", lambda a: (a.sum(1) ** 2).sum() + a.mean(0, keepdim=True) ** 3, [rand(2, 3)]),
    ("var_std", "Var", lambda a: a.var(1) + a.std(), [rand(2, 3)]),
    ("max_min", "MaxDim Amax", lambda a: a.max(1).values ** 2 + a.amax() * a.min(0, keepdim=True).values.sum(),
     [rand(2, 3)]),
    ("logsumexp_prod", "LogSumExp Prod", lambda a: a.logsumexp(1) * a.prod(1) + a.prod(), [rand(2, 3)]),
    ("cumsum", "Cumsum", lambda a: a.cumsum(1) ** 2, [rand(2, 3)]),
    ("reshape_transpose_permute", "Reshape Transpose Permute Expand",
     lambda a: (a.reshape(3, 2).t() * a).permute(1, 0).expand(2, 3, 2) ** 2, [rand(2, 3)]),
    ("cat_stack", "Cat Stack", lambda a, b: mg.cat([a, b], 0) ** 2 + mg.stack([a, b], 1).sum(1).repeat(2, 1) ** 3,
     [rand(2, 3), rand(2, 3)]),
    ("pad_repeat_tril_flip", "Pad Repeat Tril Flip",
     lambda a: F.pad(a, (1, 2)).tril() ** 2 + a.repeat(1, 2).triu(1).flip(0).sum(), [rand(2, 3)]),
    ("getitem", "GetItem IndexScatter", lambda a: a[0, ::-1] ** 2 + a[[1, 1, 0], [2, 2, 0]].sum() * a[1],
     [rand(2, 3)]),
    ("setitem_gather_masked_fill", "SetItem Gather MaskedFill",
     lambda a, v: _setitem(a, v) + a.gather(1, mg.tensor([[2, 0, 0], [1, 1, 2]])) ** 2
     + a.masked_fill(mg.tensor(BOOL[:2, :3]), 0.5) * a, [rand(2, 3), rand(3)]),
    ("matmul", "MatMul", lambda a, b, v: (a @ b) ** 2 + (b.t() @ v).sum() * (v @ v), [rand(2, 3), rand(3, 2), rand(3)]),
    ("to_device", "ToDevice", lambda a: _to_cpu(a).exp() ** 2, [rand(2, 3)]),
    ("relu_leaky", "ReLU LeakyReLU", lambda a: F.relu(a) ** 2 + F.leaky_relu(a, 0.1) ** 3, [rand(2, 3)]),
    ("gelu", "GELU Erf", lambda a: F.gelu(a) + F.gelu(a, approximate="tanh") ** 2, [rand(2, 3)]),
    ("sigmoid_tanh_silu", "Sigmoid Tanh SiLU", lambda a: F.sigmoid(a) * F.tanh(a) + F.silu(a), [rand(2, 3)]),
    ("softmax", "Softmax LogSoftmax", lambda a: F.softmax(a, -1) * F.log_softmax(a, 0), [rand(2, 3)]),
    ("dropout", "Dropout", lambda a: (mg.manual_seed(3), F.dropout(a, 0.4) ** 2)[1], [rand(2, 3)]),
    ("linear", "Linear", lambda x, w, b: F.linear(x, w, b) ** 2, [rand(2, 3), rand(2, 3), rand(2)]),
    ("embedding", "Embedding", lambda w: F.embedding(mg.tensor([[1, 0], [1, 2]]), w) ** 2,
     [rand(3, 2)]),
    ("conv2d", "Conv2d ConvInputGrad ConvWeightGrad",
     lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=1, groups=2) ** 2,
     [rand(1, 2, 3, 3), rand(2, 1, 2, 2), rand(2)]),
    ("conv1d", "Conv1d", lambda x, w: F.conv1d(x, w, padding=1, dilation=2) ** 2, [rand(2, 4), rand(2, 2, 2)]),
    ("max_pool", "MaxPool2d MaxPool1d", lambda x: F.max_pool2d(x, 2, 1, padding=1) ** 2 + F.max_pool1d(x[0], 2).sum(),
     [rand(1, 2, 3, 3)]),
    ("avg_pool", "AvgPool2d AvgPool1d AdaptiveAvgPool2d",
     lambda x: F.avg_pool2d(x, 2, 1, padding=1, count_include_pad=False) ** 2 + F.avg_pool1d(x[0], 2).sum()
     + F.adaptive_avg_pool2d(x, (2, 1)).sum() ** 2, [rand(1, 2, 3, 3)]),
    ("layer_norm", "LayerNorm", lambda x, w, b: F.layer_norm(x, (3,), w, b) ** 2, [rand(2, 3), rand(3), rand(3)]),
    ("batch_norm", "BatchNorm",
     lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True) ** 2
     + F.batch_norm(x, mg.tensor(RM), mg.tensor(RV), w, b, training=False) ** 3, [rand(3, 2), rand(2), rand(2)]),
    ("attention", "ScaledDotProductAttention",
     lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m) ** 2
     + F.scaled_dot_product_attention(q, k, v, attn_mask=mg.tensor(BOOL)) ** 3, [rand(3, 2), rand(4, 2), rand(4, 2), rand(3, 4)]),
    ("flash_attention", "FlashAttention",
     lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, use_flash=True) ** 2,
     [rand(3, 2), rand(3, 2), rand(3, 2)]),
    ("cross_entropy", "CrossEntropy",
     lambda x, p: F.cross_entropy(x, mg.tensor(TGT), label_smoothing=0.1) + F.cross_entropy(x, p, reduction="sum"),
     [rand(3, 4), PROBS]),
    ("nll_mse_bce", "NllLoss MseLoss BinaryCrossEntropyWithLogits",
     lambda x, y: F.nll_loss(x, mg.tensor(TGT), reduction="none") ** 2 + F.mse_loss(x, y)
     + F.binary_cross_entropy_with_logits(x, y.sigmoid(), pos_weight=mg.tensor(np.full(4, 2.0))),
     [rand(3, 4), rand(3, 4)]),
    ("smooth_l1_bce", "SmoothL1Loss BinaryCrossEntropy",
     lambda x, y, p: F.smooth_l1_loss(x, y, beta=0.8) + F.huber_loss(x, y, reduction="none", delta=0.5) ** 2
     + F.binary_cross_entropy(p, y.sigmoid(), weight=mg.tensor(np.full(4, 0.7))),
     [rand(3, 4), rand(3, 4), rand(3, 4, low=0.1) / 2]),
    ("roll", "Roll", lambda a: mg.roll(a, 1, 1) ** 2 + mg.roll(a, (1, -1), (0, 1)) * a + mg.roll(a, 2) ** 3, [rand(2, 3)]),
    ("einsum", "Einsum", lambda a, b, c: mg.einsum("ij,jk->ik", a, b) ** 2 + mg.einsum("ii->i", c).sum()
     * mg.einsum("...j,j", a, c[0]) ** 3, [rand(2, 3), rand(3, 2), rand(3, 3)]),
    ("atan2_erf", "Atan2 Erf", lambda a, b: mg.atan2(a, b) ** 2 + mg.erf(a) * mg.atan2(b, 0.5), [rand(2, 3), rand(2, 3)]),
    ("fused_elementwise", "FusedElementwise", lambda x, b: _compiled(x, b), [rand(2, 3), rand(3)]),
]


def _setitem(a, v):
    out = a * 1.0
    out[1] = v * v
    return out ** 2


def _cast(a):   # a Cast node that keeps float64 (central differences need it; the public cast skips it)
    from minigrad.ops.elementwise import Cast
    return Cast.apply(a, dtype=np.dtype("float64"))


def _to_cpu(a):
    from minigrad.ops.transfer import ToDevice
    return ToDevice.apply(a, dst=mg.device("cpu"))


def _inputs(arrays):
    return [mg.tensor(a, dtype=mg.float64, requires_grad=True) for a in arrays]


@pytest.mark.parametrize("name, covers, fn, arrays", OPS, ids=[o[0] for o in OPS])
def test_gradgradcheck(name, covers, fn, arrays):
    assert gradgradcheck(fn, _inputs(arrays), atol=1e-5, rtol=1e-3)


def _jvp(fn, inputs, tangents):
    with fwAD.dual_level():
        out = fn(*[fwAD.make_dual(x, t) for x, t in zip(inputs, tangents)])
        primal, tangent = fwAD.unpack_dual(out)
    assert tangent is not None
    return primal.detach().numpy(), tangent.detach().numpy()


@pytest.mark.parametrize("name, covers, fn, arrays", OPS, ids=[o[0] for o in OPS])
def test_jvp_against_finite_differences_and_double_vjp(name, covers, fn, arrays):
    inputs = _inputs(arrays)
    tangents = [mg.tensor(R.standard_normal(x.shape), dtype=mg.float64) for x in inputs]
    primal, jt = _jvp(fn, inputs, tangents)
    with mg.no_grad():
        np.testing.assert_allclose(primal, fn(*inputs).numpy(), rtol=1e-12, atol=1e-12)
        eps = 1e-6
        plus = fn(*[x + t * eps for x, t in zip(inputs, tangents)]).numpy()
        minus = fn(*[x - t * eps for x, t in zip(inputs, tangents)]).numpy()
    np.testing.assert_allclose(jt, (plus - minus) / (2 * eps), rtol=1e-4, atol=1e-6)
    # reverse over reverse: u -> J^T u is linear; its gradient along the tangents is J t
    out = fn(*inputs)
    u = mg.zeros(out.shape, dtype=mg.float64, requires_grad=True)
    vjps = mg.autograd.grad(out, inputs, u, create_graph=True, allow_unused=True)
    dot = sum((g * t).sum() for g, t in zip(vjps, tangents) if g is not None)
    ju, = mg.autograd.grad(dot, u)
    np.testing.assert_allclose(ju.numpy(), jt, rtol=1e-9, atol=1e-10)


def test_the_fused_case_runs_a_fused_chain():
    _compiled(*_inputs(OPS[-1][3]))  # the last case
    assert any(n.target is FusedElementwise for n in _compiled.graphs()[0].nodes)


def _functions():
    import importlib
    import pkgutil
    for m in pkgutil.walk_packages(mg.__path__, "minigrad."):
        if "cupy" not in m.name and ".cuda" not in m.name:
            try:
                importlib.import_module(m.name)
            except ImportError:
                continue
    todo, seen = [Function], set()
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in seen and sub.__module__.startswith("minigrad."):
                seen.add(sub)
                todo.append(sub)
    return {c for c in seen if not c.__name__.startswith("_")}


# inference-only (its first-order backward raises too), the identity used by the rules, and the four
# tensor-parallel ops (they need a process group: tests/distributed/test_tp_higher_order.py)
NOT_HERE = {"PagedAttention", "Alias", "CopyToParallel", "ReduceFromParallel", "GatherFromParallel",
            "ScatterToParallel"}


def test_every_function_is_covered():
    covered = {name for _, covers, _, _ in OPS for name in covers.split()}
    functions = _functions()
    missing = sorted(c.__name__ for c in functions if c.__name__ not in covered | NOT_HERE)
    assert not missing, f"ops with no higher-order/forward-mode case in OPS: {missing}"
    no_rule = sorted(c.__name__ for c in functions if (c.vjp is None or c.jvp is None) and c.__name__ != "PagedAttention")
    assert not no_rule, f"ops without vjp or jvp: {no_rule}"
