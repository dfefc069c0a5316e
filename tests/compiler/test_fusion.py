"""The fusion pass: fused chains equal unfused ones (values and gradients) for every elementwise op and
broadcasting pattern; chains are maximal and never cross a reduction or an escaping value; blocked
kernels keep temporaries to a few blocks."""
import os
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import minigrad as mg
import minigrad.nn.functional as F
from minigrad.compiler import FusedElementwise, find_chains, fused_kernels
from minigrad.compiler.fusion import blocked

UNARY = {
    "neg": lambda a: -a, "exp": lambda a: a.tanh().exp(), "log": lambda a: (a * a + 1).log(),
    "sqrt": lambda a: (a * a + 0.1).sqrt(), "abs": lambda a: a.abs(), "sin": lambda a: a.sin(),
    "cos": lambda a: a.cos(), "relu": F.relu, "leaky_relu": lambda a: F.leaky_relu(a, 0.1),
    "sigmoid": F.sigmoid, "tanh": F.tanh, "silu": F.silu, "gelu_tanh": lambda a: F.gelu(a, approximate="tanh"),
    "clamp": lambda a: a.clamp(-0.5, 0.7), "clamp_min": lambda a: a.clamp(min=-0.2), "square": lambda a: a ** 2,
    "pow3": lambda a: a ** 3.0, "rpow": lambda a: 2.0 ** a, "scalar_ops": lambda a: 1.5 - a * 0.5 / 2.0,
}
BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (b * b + 0.5), "maximum": mg.maximum, "minimum": mg.minimum,
    "where": lambda a, b: mg.where(b > 0, a, b), "pow": lambda a, b: (a * a + 0.5) ** b,
}


def _build(ops):
    def chain(x, *others):
        it = iter(others)
        for name in ops:
            x = BINARY[name](x, next(it)) if name in BINARY else UNARY[name](x)
        return x
    return chain


def _grads(fn, inputs):
    for t in inputs:
        t.grad = None
    out = fn(*inputs)
    w = mg.tensor(np.cos(np.arange(out.numel()).reshape(out.shape)), dtype=mg.float64)
    (out * w).sum().backward()
    return out.detach().numpy(), [t.grad.numpy().copy() for t in inputs]


@settings(max_examples=60)
@given(data=st.data(), ops=st.lists(st.sampled_from(sorted(UNARY) + sorted(BINARY)), min_size=2, max_size=6),
       shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5), block=st.sampled_from([1, 3, 7, 4096]))
def test_fused_equals_unfused_values_and_gradients(data, ops, shape, block):
    rng = np.random.default_rng(len(ops))
    n_other = sum(op in BINARY for op in ops)
    other_shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=n_other, base_shape=shape,
                                                              max_dims=3, max_side=5)).input_shapes \
        if n_other else ()
    x = mg.tensor(rng.standard_normal(shape), dtype=mg.float64, requires_grad=True)
    others = [mg.tensor(rng.standard_normal(s), dtype=mg.float64, requires_grad=True) for s in other_shapes]
    fn = _build(ops)
    with np.errstate(over="ignore", invalid="ignore"):   # random chains may overflow: both sides alike
        want, want_grads = _grads(fn, [x, *others])
        compiled = mg.compile(fn, block_size=block)
        compiled(x, *others)
        assert any(n.target is FusedElementwise for n in compiled.graphs()[0].nodes)
        got, got_grads = _grads(compiled, [x, *others])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    for g, w in zip(got_grads, want_grads):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def _graph(fn, *args):
    c = mg.compile(fn, fuse=False)
    c(*args)
    return c.graphs()[0]


def test_chains_are_maximal_and_stop_at_reductions_and_escaping_values():
    def f(x, b):
        h = ((x + b) * 2.0).tanh()           # chain 1 (add, mul, tanh) ends: h is read by mean AND by sub
        m = h.mean(dim=-1, keepdim=True)     # a reduction is never fused
        y = ((h - m) * 3.0).exp()            # chain 2 consumes the reduction's result (an epilogue)
        return y, (x * 4.0).sin()            # chain 3 ends at a graph output
    g = _graph(f, mg.randn(4, 5), mg.randn(5))
    chains = [[n.op_name for n in c] for c in find_chains(g)]
    assert sorted(chains) == [["add", "mul", "tanh"], ["mul", "sin"], ["sub", "mul", "exp"]]


def test_a_value_returned_or_read_twice_outside_is_not_fused_away():
    def f(x):
        a = x * 2.0
        b = a.exp()
        return b + 1.0, a                    # `a` escapes: it must exist, so the chain starts after it
    g = _graph(f, mg.randn(3))
    assert [[n.op_name for n in c] for c in find_chains(g)] == [["exp", "add"]]


def test_block_plan_covers_the_output_once():
    for shape in [(), (5,), (4, 1000), (3, 7, 11), (2, 1, 9), (0, 4)]:
        seen = np.zeros(shape, int)
        for index in blocked.blocks(shape, 16):
            part = seen[index] if index else seen
            part += 1
            assert part.size <= max(16, shape[-1] if shape else 1) or len(shape) < 2
        assert (seen == 1).all()


def test_fused_chain_temporaries_stay_within_a_few_blocks():
    x = mg.randn(1 << 20)
    chain = _build(["gelu_tanh", "mul", "add", "tanh", "square"])
    w, b = mg.randn(1 << 20), mg.randn(1)
    compiled = mg.compile(lambda x, w, b: chain(x, w, b), block_size=blocked.BLOCK)
    with mg.no_grad():
        compiled(x, w, b), compiled(x, w, b)   # trace, then run the kernel once (its code, the threads)
        tracemalloc.start()
        tracemalloc.reset_peak()
        out = compiled(x, w, b)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        want = chain(x, w, b)
    np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=2e-6, atol=1e-6)
    kernel, = fused_kernels(compiled.graphs()[0])
    buffers = blocked.temporaries_bytes(out.shape, kernel.buffer_dtypes)   # one block per buffer and thread
    threads = blocked.threads_for(16)
    assert buffers == threads * len(kernel.buffer_dtypes) * blocked.BLOCK * 4
    numpy_scratch = threads * 65536   # NumPy's iterator buffers while a broadcasting ufunc runs (eager: the same)
    assert peak <= out.nbytes + buffers + numpy_scratch   # the goal: the output + one block (per thread)
    assert len(kernel.buffer_dtypes) <= 1   # buffers are reused once their value is dead; out is one


def test_generated_sources_are_shown_by_explain():
    e = mg.compile.explain(lambda x: (x * 2.0 + 1.0).relu(), mg.randn(3))
    text = str(e)
    assert "np.multiply(x0, c0, out=out)      # mul: v0 = x0 * 2.0" in text                     # in place
    assert "np.maximum(out, c2, out=out)      # relu: v2 = maximum(v1, 0.0)" in text
    assert "c0 = np.array(2.0, 'float32')" in text and "c2 = np.array(0.0, 'float32')" in text
    assert "cupy.ElementwiseKernel('float32 x0', 'float32 y')" in text
    assert len(e.kernels) == 1 and "backward" in e.kernels[0].sources()


@pytest.mark.parametrize("dtype", [mg.float32, mg.float64])
def test_fused_under_no_grad_and_on_the_device(device, dtype):
    x = mg.randn(7, 3, dtype=dtype, device=device)
    c = mg.compile(lambda x: (x * 0.5).sigmoid() - 1.0)
    with mg.no_grad():
        c(x)
        out = c(x)
    assert out.device == x.device and out.dtype == dtype
    np.testing.assert_allclose(out.cpu().numpy(), ((x * 0.5).sigmoid() - 1.0).cpu().numpy(), rtol=1e-6)


def test_options_passed_by_keyword_fuse_like_positional_ones():
    from minigrad.ops import elementwise as E
    from minigrad.ops.nn import activation as A

    def f(x):   # the ops-layout convention: non-tensor options by keyword
        return E.Clamp.apply(A.GELU.apply(x * 2.0, approximate="tanh"), lo=-0.5, hi=0.9) + 1.0
    x = mg.randn(4, 5)
    c = mg.compile(f)
    with mg.no_grad():
        c(x)
        out = c(x)
        want = f(x)
    kernel, = fused_kernels(c.graphs()[0])
    assert [s.op_name for s in kernel.steps] == ["mul", "gelu", "clamp", "add"]
    np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)


def _gelu_norm(x, mu, g):
    y = 0.5 * x * (1.0 + (0.7978845608028654 * (x + 0.044715 * (x * x * x))).tanh())
    return (y - mu) * g + 1.0


@pytest.mark.parametrize("threads", [1, 3])
def test_threads_and_literal_constants_give_eagers_bits(monkeypatch, threads):
    monkeypatch.setattr(blocked, "THREADS", threads)
    rng = np.random.default_rng(0)
    x, mu, g = (mg.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True)
                for s in [(64, 96), (64, 1), (96,)])
    compiled = mg.compile(_gelu_norm, block_size=256)          # 24 blocks: 8 per thread
    compiled(x, mu, g)
    kernel, = fused_kernels(compiled.graphs()[0])
    assert blocked.threads_for(24) == threads and "c0 = np.array(0.5, 'float32')" in kernel.numpy_source
    got, got_grads = _grads(compiled, [x, mu, g])
    want, want_grads = _grads(_gelu_norm, [x, mu, g])
    assert np.array_equal(got, want)                            # float32, bit for bit: same ops, same order
    for a, b in zip(got_grads, want_grads):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)  # backward recomputes: another order of ops


def test_an_error_in_a_worker_thread_reaches_the_caller_with_the_callers_errstate(monkeypatch):
    monkeypatch.setattr(blocked, "THREADS", 2)
    x = mg.ones(8, 16)
    x.array[-1, -1] = -1.0                                       # only the last block (the worker's) is invalid
    compiled = mg.compile(lambda x: (x * 2.0).log() + 1.0, block_size=16)
    with mg.no_grad(), np.errstate(invalid="ignore"):
        compiled(x)
        assert np.isnan(compiled(x).numpy()[-1, -1])
        with np.errstate(invalid="raise"), pytest.raises(FloatingPointError):
            compiled(x)


def _fused_in_a_child(compiled, x, conn):
    with mg.no_grad():
        conn.send(compiled(x).numpy())


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_runs_threaded_kernels_on_its_own_workers(monkeypatch):
    import multiprocessing as mp
    monkeypatch.setattr(blocked, "THREADS", 2)
    x = mg.randn(8, 16)
    compiled = mg.compile(lambda x: (x * 2.0).tanh() + 1.0, block_size=16)   # 8 blocks: 2 threads
    with mg.no_grad():
        compiled(x)
        want = compiled(x).numpy()                                # the parent's workers exist now
    ctx = mp.get_context("fork")
    ours, theirs = ctx.Pipe()
    child = ctx.Process(target=_fused_in_a_child, args=(compiled, x, theirs))
    child.start()
    try:
        assert ours.poll(30), "the child hung: it waited on its parent's worker threads, which fork did not copy"
        assert np.array_equal(ours.recv(), want)
    finally:
        child.join(5)
        if child.is_alive():
            child.kill()


def test_a_pool_that_may_not_start_threads_runs_every_part_on_the_caller(monkeypatch):
    capped = blocked._Workers()
    capped.capped = True                                         # no thread may be started (a process rlimit)
    monkeypatch.setattr(blocked, "_workers", capped)
    monkeypatch.setattr(capped, "pid", os.getpid())
    seen = []
    blocked.in_parallel(seen.append, [1, 2, 3])
    assert seen == [1, 2, 3] and capped.threads == []


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_every_op_fused_gives_eagers_bits_in_low_precision(dtype):
    rng = np.random.default_rng(1)
    x = mg.tensor(rng.standard_normal((33, 40)).astype(dtype))
    for name in sorted(UNARY):
        fn = _build([name, "scalar_ops"])                      # literals become 0-d constants of the op's dtype
        compiled = mg.compile(fn, block_size=128)
        with mg.no_grad(), np.errstate(all="ignore"):
            compiled(x)
            got, want = compiled(x).numpy(), fn(x).numpy()
        assert fused_kernels(compiled.graphs()[0]), name
        assert got.dtype == dtype and np.array_equal(got, want, equal_nan=True), name
