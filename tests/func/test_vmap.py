"""vmap against a Python loop over the batch, op family by op family; levels, in/out dims, errors."""
import threading

import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad.func import VmapError, grad, vmap
from minigrad.ops.nn.activation import Erf   # GELU's derivative, an op of its own

D = mg.float64


def rnd(*shape, seed=0):
    return mg.tensor(np.random.default_rng(seed + sum(shape)).standard_normal(shape), dtype=D)


def loop(f, args, in_dims, n):
    """The reference: f on each example, stacked."""
    outs = []
    for i in range(n):
        ex = [a if d is None else mg.tensor(np.take(a.numpy(), i, axis=d), dtype=a.dtype) for a, d in
              zip(args, in_dims)]
        outs.append(f(*ex).numpy())
    return np.stack(outs)


def check(f, *args, in_dims=None, n=None):
    in_dims = in_dims or (0,) * len(args)
    n = n or next(a.shape[d] for a, d in zip(args, in_dims) if d is not None)
    got = vmap(f, in_dims=in_dims)(*args)
    want = loop(f, args, in_dims, n)
    assert tuple(got.shape) == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)


ELEMENTWISE = [
    lambda a, b: a + b, lambda a, b: a - b * 2, lambda a, b: a * b, lambda a, b: a / (b.abs() + 1),
    lambda a, b: mg.maximum(a, b), lambda a, b: mg.minimum(a, b) ** 2, lambda a, b: mg.where(a > b, a, b),
    lambda a, b: (a.exp() + b.abs().sqrt() + (a.abs() + 1).log() + a.sin() * b.cos()),
    lambda a, b: a.clamp(-0.5, 0.5) + F.relu(b) + F.gelu(a) + F.silu(b) + a.sigmoid() + b.tanh() + Erf.apply(a),
    lambda a, b: F.leaky_relu(a, 0.1) - (-b) + a.clone() + a.to(mg.float32).to(D),
    lambda a, b: a.masked_fill(b > 0, 3.0) + (a >= b).to(D) + (a == a).to(D),
]


@pytest.mark.parametrize("i", range(len(ELEMENTWISE)))
def test_elementwise_both_batched_and_one_batched(i):
    f = ELEMENTWISE[i]
    a, b = rnd(4, 3, 5), rnd(4, 3, 5, seed=1)
    check(f, a, b)
    check(f, a, b[0], in_dims=(0, None))            # a plain operand broadcasts against each example
    check(f, a[:, 0], rnd(3, 5), in_dims=(0, None))  # the example is 1-D, the other operand 2-D


REDUCTIONS = [
    lambda a: a.sum(), lambda a: a.sum(-1), lambda a: a.mean((0, 1), keepdim=True), lambda a: a.var(0),
    lambda a: a.amax(1), lambda a: a.logsumexp(-1), lambda a: a.prod(0), lambda a: a.cumsum(1),
    lambda a: F.softmax(a, -1), lambda a: F.log_softmax(a, 0), lambda a: a.max(), lambda a: a.max(1).values,
    lambda a: a.min(0)[0], lambda a: a.argmax(-1).to(D), lambda a: a.argmin().to(D), lambda a: a.norm(),
    lambda a: (a > 0).all(1).to(D) + (a > 0).any().to(D), lambda a: a.std(1),
]


@pytest.mark.parametrize("i", range(len(REDUCTIONS)))
def test_reductions(i):
    check(REDUCTIONS[i], rnd(3, 4, 5))


SHAPES = [
    lambda a: a.reshape(20), lambda a: a.reshape(-1, 2), lambda a: a.view(5, 4), lambda a: a.T,
    lambda a: a.transpose(0, 1), lambda a: a.permute(1, 0), lambda a: a.unsqueeze(0).expand(3, 4, 5),
    lambda a: a.flatten(), lambda a: a[1:3, ::2], lambda a: a[..., 0], lambda a: a[None, 2],
    lambda a: mg.cat([a, a * 2], 1), lambda a: mg.stack([a, a], 0), lambda a: a.flip(0),
    lambda a: F.pad(a, (1, 2)), lambda a: a.repeat(2, 1), lambda a: a.tril(), lambda a: a.triu(1),
    lambda a: a.split(2, 1)[1], lambda a: a.chunk(2, 0)[0], lambda a: a.squeeze(), lambda a: a.narrow(1, 1, 2),
    lambda a: a.gather(1, mg.tensor([[0, 1], [2, 2], [4, 0], [1, 1]])), lambda a: mg.roll(a, 1, 0),
    lambda a: mg.roll(a, (2, -1), (1, 0)), lambda a: mg.roll(a, 3),
]


@pytest.mark.parametrize("i", range(len(SHAPES)))
def test_shape_and_indexing(i):
    check(SHAPES[i], rnd(3, 4, 5))


def test_cat_of_batched_and_plain_tensors():
    b = rnd(4, 5)
    check(lambda a: mg.cat([a, b], 0), rnd(3, 2, 5))


@pytest.mark.parametrize("shapes", [((3, 4), (4,)), ((4,), (4, 2)), ((4,), (4,)), ((2, 3, 4), (4, 5)),
                                    ((3, 4), (2, 4, 5))])
def test_matmul_every_rank_batched_left_right_and_both(shapes):
    sa, sb = shapes
    a, b = rnd(6, *sa), rnd(6, *sb, seed=3)
    check(lambda x, y: x @ y, a, b)
    check(lambda x, y: x @ y, a, b[0], in_dims=(0, None))
    check(lambda x, y: x @ y, a[0], b, in_dims=(None, 0))


def test_nn_ops_linear_conv_pool_norm_embedding_attention():
    w, bias = rnd(6, 5), rnd(6)
    check(lambda x: F.linear(x, w, bias), rnd(3, 4, 5))
    check(lambda x, w: F.linear(x, w, bias), rnd(3, 4, 5), rnd(3, 6, 5))      # per-example weights
    check(lambda x, w: F.linear(x, w), rnd(3, 5), rnd(3, 6, 5))
    cw, cb = rnd(4, 2, 3, 3), rnd(4)
    check(lambda x: F.conv2d(x, cw, cb, padding=1), rnd(3, 2, 2, 6, 6))      # each example a batch of 2
    check(lambda x: F.conv2d(x, cw, cb, stride=2), rnd(3, 2, 7, 7))          # unbatched examples
    check(lambda x: F.max_pool2d(x, 2) + F.avg_pool2d(x, 2), rnd(3, 2, 4, 6, 6))
    check(lambda x: F.adaptive_avg_pool2d(x, 2), rnd(3, 4, 6, 6))
    lw, lb = rnd(5), rnd(5)
    check(lambda x: F.layer_norm(x, (5,), lw, lb), rnd(3, 4, 5))
    emb = rnd(10, 3)
    check(lambda i: F.embedding(i, emb).to(D), mg.tensor([[1, 2], [3, 9], [0, 0]]))
    q, k, v = rnd(3, 2, 4, 8), rnd(3, 2, 6, 8, seed=1), rnd(3, 2, 6, 8, seed=2)
    check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), q, k, v)
    check(lambda q: F.scaled_dot_product_attention(q, q, q, is_causal=True), rnd(3, 2, 5, 8))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_losses_reduce_over_each_example(reduction):
    x, t = rnd(3, 4, 5), mg.tensor([[0, 1, 4, 2], [3, 3, 0, 1], [4, 2, 2, 0]])
    check(lambda x, t: F.cross_entropy(x, t, reduction=reduction), x, t)
    wt = rnd(5).abs() + 0.1
    check(lambda x, t: F.cross_entropy(x, t, weight=wt, reduction=reduction), x, t)
    check(lambda x, t: F.nll_loss(F.log_softmax(x, -1), t, reduction=reduction), x, t)
    y = rnd(3, 4, 5, seed=9)
    check(lambda x, y: F.mse_loss(x, y, reduction=reduction), x, y)
    check(lambda x, y: F.binary_cross_entropy_with_logits(x, y.sigmoid(), reduction=reduction), x, y)
    check(lambda x, y: F.binary_cross_entropy(x.sigmoid(), y.sigmoid(), reduction=reduction), x, y)
    check(lambda x, y: F.smooth_l1_loss(x, y, reduction=reduction) + F.huber_loss(x, y, reduction=reduction), x, y)
    check(lambda x: F.cross_entropy(x, mg.tensor(2), reduction=reduction), rnd(3, 5))   # unbatched example


def test_in_dims_out_dims_and_nested_structures():
    a, b = rnd(4, 3), rnd(3, 4)
    got = vmap(lambda x, y: x * y, in_dims=(1, 0), out_dims=1)(a, b)
    np.testing.assert_allclose(got.numpy(), (a.numpy().T * b.numpy()).T)
    got = vmap(lambda d: {"s": d["x"] + d["y"], "p": (d["x"] * 2,)}, in_dims=({"x": 0, "y": None},))(
        {"x": a, "y": b[0, :3]})
    np.testing.assert_allclose(got["s"].numpy(), a.numpy() + b.numpy()[0, :3])
    np.testing.assert_allclose(got["p"][0].numpy(), 2 * a.numpy())
    out = vmap(lambda x: (x.sum(), mg.ones(2, dtype=D)))(a)   # an unbatched output is broadcast
    assert tuple(out[1].shape) == (4, 2)


def test_nested_vmap_and_closures_over_outer_levels():
    a, b = rnd(3, 4), rnd(5, 4)
    pair = vmap(vmap(lambda x, y: (x * y).sum(), in_dims=(None, 0)), in_dims=(0, None))(a, b)
    np.testing.assert_allclose(pair.numpy(), a.numpy() @ b.numpy().T)
    got = vmap(lambda x: vmap(lambda y: x @ y)(b))(a)        # x is batched by the outer level only
    np.testing.assert_allclose(got.numpy(), a.numpy() @ b.numpy().T)


def test_gradients_flow_through_vmap_to_the_inputs():
    a = rnd(3, 4).requires_grad_()
    w = rnd(4, 2).requires_grad_()
    vmap(lambda x: (x @ w).tanh().sum())(a).sum().backward()
    a2, w2 = a.detach().requires_grad_(), w.detach().requires_grad_()
    (a2 @ w2).tanh().sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), a2.grad.numpy())
    np.testing.assert_allclose(w.grad.numpy(), w2.grad.numpy())


def test_per_example_gradients_equal_a_loop():
    w, x, y = rnd(4), rnd(6, 4), rnd(6)

    def loss(w, x, y):
        return ((x * w).sum().tanh() - y) ** 2
    pe = vmap(grad(loss), in_dims=(None, 0, 0))(w, x, y)
    want = np.stack([grad(loss)(w, x[i], y[i]).numpy() for i in range(6)])
    np.testing.assert_allclose(pe.numpy(), want, rtol=1e-10)


def test_clear_errors():
    a = rnd(3, 4)
    with pytest.raises(VmapError, match="item"):
        vmap(lambda x: x * x.sum().item())(a)
    with pytest.raises(VmapError, match="bool"):
        vmap(lambda x: x if x.sum() > 0 else -x)(a)
    with pytest.raises(VmapError, match="batch_norm"):
        vmap(lambda x: F.batch_norm(x, None, None, training=True))(rnd(3, 4, 2))
    with pytest.raises(VmapError, match="dropout"):
        vmap(lambda x: F.dropout(x, 0.5))(a)
    assert tuple(vmap(lambda x: F.dropout(x, 0.5), randomness="different")(a).shape) == (3, 4)
    with pytest.raises(VmapError, match="same size"):
        vmap(lambda x, y: x + y)(a, rnd(4, 4))
    with pytest.raises(VmapError, match="out of range"):
        vmap(lambda x: x, in_dims=2)(a)
    with pytest.raises(VmapError, match="a per-example weight|differs per example"):
        vmap(lambda w: F.conv2d(rnd(1, 2, 4, 4), w))(rnd(3, 1, 2, 3, 3))


def test_an_op_without_a_rule_is_named():
    from minigrad.autograd import Function

    class Mystery(Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2
    with pytest.raises(VmapError, match="no batching rule for the op 'mystery'"):
        vmap(lambda x: Mystery.apply(x))(rnd(3, 2))


def test_state_is_per_thread():
    """A vmap running in one thread does not batch another thread's ops."""
    started, done, seen = threading.Event(), threading.Event(), {}

    def other():
        started.wait()
        seen["shape"] = tuple((mg.ones(2, 3) * 2).sum(0).shape)
        done.set()
    t = threading.Thread(target=other)
    t.start()

    def f(x):
        started.set()
        done.wait(5)
        return x * 2
    vmap(f)(rnd(4, 3))
    t.join()
    assert seen["shape"] == (3,)
    from minigrad.autograd import extensions
    assert not [n for n in extensions.forward_wrappers.names() if n.startswith("vmap")]


def test_detach_and_like_constructors_stay_batched():
    a = rnd(3, 4)
    check(lambda x: x.detach() * 2 + mg.zeros_like(x) + mg.ones_like(x), a)
    with pytest.raises(VmapError, match="randomness"):
        vmap(lambda x: mg.randn_like(x))(a)
    assert tuple(vmap(lambda x: mg.randn_like(x), randomness="different")(a).shape) == (3, 4)


def test_forward_mode_under_vmap_uses_two_reverse_passes_per_example():
    from minigrad.func import jacfwd, jacrev, jvp
    W = rnd(4, 3)
    f = lambda x: (W @ x).tanh() * x.sum()      # noqa: E731
    X, V = rnd(5, 3), rnd(5, 3, seed=2)
    Jf, Jr = vmap(jacfwd(f))(X), vmap(jacrev(f))(X)
    np.testing.assert_allclose(Jf.numpy(), Jr.numpy(), rtol=1e-10)
    tan = vmap(lambda x, v: jvp(f, (x,), (v,))[1])(X, V)
    np.testing.assert_allclose(tan.numpy(), np.einsum("bij,bj->bi", Jr.numpy(), V.numpy()), rtol=1e-10)


def test_data_of_a_batched_tensor_is_the_whole_batch_detached():
    check(lambda x: x.data * 2 + x, rnd(3, 4))
    with pytest.raises(VmapError, match="setting .data"):
        vmap(lambda x: setattr(x, "data", mg.zeros(4)) or x)(rnd(3, 4))


# ops that have no batching rule, on purpose (each raises VmapError naming it under vmap)
WITHOUT_RULE = {
    "SetItem": "in-place writes into a batched tensor are refused",
    "IndexScatter": "getitem's backward companion: runs on physical tensors only",
    "MaxDim": "max/min(dim) are batched as the public functions (their index is computed outside the op)",
    "ConvInputGrad": "conv's backward companions run on physical tensors only",
    "ConvWeightGrad": "conv's backward companions run on physical tensors only",
    "_Pick": "abstract base of maximum/minimum (they have the rule)",
}


def test_every_op_has_a_batching_rule_or_a_reason():
    from minigrad.autograd.function import Function
    from minigrad.func import rules

    def subclasses(c):
        for s in c.__subclasses__():
            yield s
            yield from subclasses(s)
    ops = {s for s in subclasses(Function) if s.__module__.startswith("minigrad.ops")}
    missing = sorted(s.__name__ for s in ops if not any(k in rules._rules for k in s.__mro__))
    assert missing == sorted(WITHOUT_RULE), f"ops without a batching rule (add one in minigrad/func/rules*.py, or " \
                                            f"a reason here): {sorted(set(missing) - set(WITHOUT_RULE))}"


def test_einsum_and_atan2_batched():
    a, b, c = rnd(3, 2, 4), rnd(4, 5), rnd(3, 4, 5)
    check(lambda x, y: mg.einsum("ij,jk->ik", x, y), a, b, in_dims=(0, None))       # one operand batched
    check(lambda x, y: mg.einsum("ij,jk", x, y), a, c)                               # both
    check(lambda x: mg.einsum("...j,j", x, b[:, 0]), a)                              # ellipsis
    check(lambda x, y: mg.atan2(x, y), rnd(3, 4), rnd(4), in_dims=(0, None))


def test_isclose_batched():
    a, b = rnd(3, 4), rnd(4)
    got = vmap(lambda x, y: mg.isclose(x, y, atol=1.0), in_dims=(0, None))(a, b)
    assert got.numpy().tolist() == np.isclose(a.numpy(), b.numpy(), atol=1.0).tolist()
