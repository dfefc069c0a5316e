"""a7_fusion: the student writes the elementwise-fusion pass and tiled (flash) attention.

  part1  find_chains(graph)                    maximal chains of fusible ops over minigrad's IR
  part2  generate_kernel, run_blocked,         the blocked NumPy kernel, a differentiable fused op and
         FusedChain, fuse(graph)               the graph rewrite
  part3  FlashAttention (forward + backward)   online softmax over key blocks; backward from the lse

How each part is judged (in the parent; the child runs the student's code and returns arrays):
- chains: the child traces a program with ``mg.compile(fn, fuse=False)`` and returns the student's chains
  as node positions; the parent traces the same program itself and compares with minigrad's pass, naming
  the first rule a wrong chain breaks (a non-elementwise node in it, a value read outside it...).
- fused graphs: values against the program run by NumPy in the parent, gradients (through the student's
  fused op) against float64 central differences of that NumPy program, and the peak of temporary bytes
  (the grader's checked meter in the child, credited only beside a whole right output) against the output
  plus a few blocks, which eager evaluation cannot meet.
- attention: values against NumPy softmax attention, gradients against central differences, and the peak
  bytes of forward + backward at L = S = 2048 against a quarter of the (L, S) score matrix, credited only
  beside the right output and gradients (minigrad's own attention, in the parent).

No solution code lives here: expected values come from NumPy formulas, central differences, or minigrad's
own fusion pass run in the parent.
"""
import numpy as np

from autograder import verdicts as V
from autograder.spec import Assignment, Case, Part, Test, Verdict

K = 0.7978845608028654


# ---- programs, written once for NumPy (parent) and minigrad (child) ------------------------------------
class _NP:
    tanh, exp, sin, cos, maximum = np.tanh, np.exp, np.sin, np.cos, np.maximum

    @staticmethod
    def mean(x):
        return x.mean(axis=-1, keepdims=True)

    @staticmethod
    def matmul(a, b):
        return a @ b


class _Minigrad:
    """The same names over minigrad tensors: unary ones are Tensor methods (``x.tanh()``)."""

    def __getattr__(self, name):
        if name == "mean":
            return lambda x: x.mean(dim=-1, keepdim=True)
        if name == "maximum":
            import minigrad as mg
            return mg.maximum
        if name == "matmul":
            return lambda a, b: a @ b
        return lambda x: getattr(x, name)()


_MG = _Minigrad()


def _gelu_norm(F, x, mu, g):
    y = 0.5 * x * (1.0 + F.tanh(K * (x + 0.044715 * (x * x * x))))
    return (y - mu) * g


def _reduction(F, x, b):
    h = F.tanh(x * 2.0 + b)
    return F.exp((h - F.mean(h)) * 3.0)


def _escaping(F, x):
    a = x * 2.0
    return F.exp(a) + 1.0, a


def _diamond(F, x):
    h = F.sin(x)
    return h * h + F.cos(h) - x * 0.5


def _matmul(F, x, w):
    return F.maximum(F.tanh(F.matmul(x, w)) * 2.0 + 1.0, 0.5)


PROGRAMS = {"gelu_norm": (("x", "mu", "g"), _gelu_norm), "reduction": (("x", "b"), _reduction),
            "escaping": (("x",), _escaping), "diamond": (("x",), _diamond), "matmul": (("x", "w"), _matmul)}


def _shapes(p):
    r, c = p["rows"], p["cols"]
    return {"x": [r, c], "mu": [r, 1], "g": [c], "b": [c], "w": [c, c]}


def inputs_program(p):
    rng = np.random.default_rng(p["seed"])
    names, fn = PROGRAMS[p["program"]]
    shapes = _shapes(p)
    arrays = {n: rng.standard_normal(shapes[n]) for n in names}
    out = fn(_NP, *[arrays[n] for n in names])
    if not isinstance(out, tuple):
        arrays["up"] = rng.standard_normal(np.shape(out))
    return arrays


def _trace(case):
    """The program's graph, traced with minigrad (parent and child trace alike: same node order)."""
    import minigrad as mg
    names, fn = PROGRAMS[case.params["program"]]
    tensors = [mg.tensor(case[n], dtype=mg.float64, requires_grad=case.params.get("grad", False)) for n in names]
    compiled = mg.compile(lambda *a: fn(_MG, *a), fuse=False)
    compiled(*tensors)
    return compiled.graphs()[0], tensors


def _label(p):
    return ", ".join(f"{k}={v}" for k, v in p.items() if k not in ("seed", "grad"))


def _cases(*dicts):
    return [Case(dict(d), label=_label(d)) for d in dicts]


# ---- part 1: chains -------------------------------------------------------------------------------------
def observe_chains(ns, case):
    graph, _ = _trace(case)
    index = {n: i for i, n in enumerate(graph.nodes)}
    flat = []
    for chain in ns.find_chains(graph):
        flat += [index[n] for n in chain] + [-1]
    return {"chains": np.array(flat, dtype=np.int64)}


def _split(flat):
    chains, cur = [], []
    for i in np.asarray(flat).tolist():
        if i == -1:
            chains.append(tuple(cur))
            cur = []
        else:
            cur.append(i)
    return chains


def _why_wrong(graph, chain, users):
    """The first rule a chain breaks, in words naming the node."""
    from minigrad.compiler.fusion import fusible
    nodes = graph.nodes
    if any(not 0 <= i < len(nodes) for i in chain):
        return f"chain {list(chain)} names nodes that are not in the graph"
    inside = {nodes[i] for i in chain}
    for i in chain:
        n = nodes[i]
        if not fusible(n):
            kind = "a reduction: its result has fewer elements than its input, so it cannot be computed " \
                   "block by block inside the chain" if n.op_name in ("mean", "sum", "amax") else \
                   "not an elementwise op"
            return f"chain {[nodes[j].op_name for j in chain]} contains `{n.op_name}` (node {i}), {kind}"
    if list(chain) != sorted(chain):
        return f"chain {list(chain)} is not in graph order"
    for i in chain[:-1]:
        outside = [u for u in users[nodes[i]] if u == "output" or u not in inside]
        if outside:
            who = "returned by the graph" if "output" in outside else f"read by `{outside[0].op_name}` outside it"
            return (f"in chain {[nodes[j].op_name for j in chain]}, `{nodes[i].op_name}` (node {i}) is {who}: "
                    f"its value must exist in memory, so a chain must end there (or start after it)")
    return None


def verdict_chains(case, obs, ctx):
    from minigrad.compiler.fusion import find_chains
    graph, _ = _trace(case)
    index = {n: i for i, n in enumerate(graph.nodes)}
    expected = {tuple(index[n] for n in c) for c in find_chains(graph)}
    got = _split(obs.get("chains", []))
    users = graph.users()
    for chain in got:
        why = _why_wrong(graph, chain, users)
        if why:
            return Verdict.fail(f"find_chains ({case.params['program']}): {why}")
    names = lambda c: [graph.nodes[i].op_name for i in c]   # noqa: E731
    missing = expected - set(got)
    if missing:
        c = sorted(missing)[0]
        return Verdict.fail(f"find_chains ({case.params['program']}): chain {names(c)} (nodes {list(c)}) "
                            f"is missing or not maximal; your chains: {[names(x) for x in got]}")
    extra = set(got) - expected
    if extra:
        return Verdict.fail(f"find_chains ({case.params['program']}): unexpected chain {names(sorted(extra)[0])}")
    return Verdict.ok()


# ---- part 2: fused graphs -------------------------------------------------------------------------------
def observe_fused(ns, case):
    graph, tensors = _trace(case)
    fused = ns.fuse(graph, block=case.params["block"])
    out = fused.compile()(tensors)
    obs = {"y": out.array, "n_ops": np.array(len(fused.calls()))}
    if out.requires_grad:
        import minigrad as mg
        out.backward(mg.tensor(case["up"]))
        names, _ = PROGRAMS[case.params["program"]]
        obs.update({"d" + n: t.grad.array for n, t in zip(names, tensors) if t.grad is not None})
    return obs


def _fused_ops(case):
    from minigrad.compiler.fusion import fuse
    graph, _ = _trace(case)
    return len(fuse(graph).calls())


def verdict_values(case, obs, ctx):
    names, fn = PROGRAMS[case.params["program"]]
    v = V.compare(f"fused {case.params['program']}: output", obs.get("y"), fn(_NP, *[case[n] for n in names]),
                  rtol=1e-10, atol=1e-12)
    want = _fused_ops(case)
    if v.passed and int(obs.get("n_ops", -1)) != want:
        return Verdict.fail(f"fuse ({case.params['program']}): the fused graph has {int(obs.get('n_ops', -1))} "
                            f"ops, expected {want} (each chain replaced by one op)")
    return v


def verdict_gradients(case, obs, ctx):
    names, fn = PROGRAMS[case.params["program"]]
    numeric = V.numeric_vjp(lambda *a: fn(_NP, *a), [case[n] for n in names], case["up"])
    return V.check_gradients(f"fused {case.params['program']}", names, obs, numeric)


def observe_memory(ns, case):
    import minigrad as mg
    from autograder._guard import meter
    graph, tensors = _trace(case)
    run = ns.fuse(graph, block=case.params["block"]).compile()
    with mg.no_grad():
        run(tensors)
        with meter() as m:
            out = run(tensors)
    return {"peak": np.array(m.peak), "y": out.array}


def verdict_memory(case, obs, ctx):
    names, fn = PROGRAMS[case.params["program"]]
    want = fn(_NP, *[case[n] for n in names])
    v = V.compare("fused chain", obs.get("y"), want, rtol=1e-10, atol=1e-12)
    if not v.passed:                 # little memory is credited only to a kernel that computes the whole output
        return Verdict.fail(f"the memory is credited only to a fused chain whose output is right: {v.message}")
    block_bytes = case.params["block"] * 8
    budget = want.nbytes + 8 * block_bytes + 64 * 1024
    peak = float(obs.get("peak", np.inf))
    if peak > budget:
        return Verdict.fail(f"fused chain: peak temporaries {V.mib(peak)} > budget {V.mib(budget)} (the output "
                            f"is {V.mib(want.nbytes)}, a block {block_bytes // 1024} KiB): something allocates "
                            f"full-size arrays; does every ufunc write into a block buffer with out=?")
    return Verdict.ok(f"peak {V.mib(peak)} of {V.mib(budget)}")


# ---- part 3: attention ----------------------------------------------------------------------------------
def _attention(q, k, v, causal):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.triu(np.ones(s.shape[-2:], bool), 1), -np.inf, s)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def inputs_attention(p):
    rng = np.random.default_rng(p["seed"])
    B, L, S, E, Ev = p["B"], p["L"], p["S"], p["E"], p["Ev"]
    arrays = {"q": rng.standard_normal((B, L, E)) * p.get("scale", 1.0), "k": rng.standard_normal((B, S, E)),
              "v": rng.standard_normal((B, S, Ev))}
    arrays["up"] = rng.standard_normal((B, L, Ev))
    return arrays


def observe_attention(ns, case):
    import minigrad as mg
    p = case.params
    ts = [mg.tensor(case[n], dtype=mg.float64, requires_grad=True) for n in "qkv"]
    y = ns.FlashAttention.apply(*ts, is_causal=p["causal"], block_size=p["block"])
    y.backward(mg.tensor(case["up"]))
    one = ns.FlashAttention.apply(*[mg.tensor(case[n], dtype=mg.float64) for n in "qkv"], is_causal=p["causal"],
                                  block_size=max(p["L"], p["S"]))
    return {"y": y.array, "y_one_block": one.array, **{"d" + n: t.grad.array for n, t in zip("qkv", ts)
                                                    if t.grad is not None}}


def verdict_forward(case, obs, ctx):
    p = case.params
    want = _attention(case["q"], case["k"], case["v"], p["causal"])
    v = V.compare("FlashAttention: forward", obs.get("y"), want, rtol=1e-9, atol=1e-10)
    if not v.passed and V.compare("", obs.get("y_one_block"), want, rtol=1e-9, atol=1e-10).passed:
        return Verdict.fail(v.message + ". Right with one key block, wrong with several: when a later block "
                            "raises a row's running max, are l and acc rescaled by exp(m_old - m_new)?")
    return v


def verdict_backward(case, obs, ctx):
    causal = case.params["causal"]
    numeric = V.numeric_vjp(lambda q, k, v: _attention(q, k, v, causal), [case[n] for n in "qkv"], case["up"])
    return V.check_gradients("FlashAttention", "qkv", obs, numeric)


def observe_attention_memory(ns, case):
    import minigrad as mg
    from autograder._guard import meter
    p = case.params
    ts = [mg.tensor(case[n], dtype=mg.float64, requires_grad=True) for n in "qkv"]
    with meter() as m:
        y = ns.FlashAttention.apply(*ts, is_causal=False, block_size=p["block"])
        y.sum().backward()
    return {"peak": np.array(m.peak), "y": y.array, **{"d" + n: t.grad.array for n, t in zip("qkv", ts)
                                                     if t.grad is not None}}


def _attention_grads(q, k, v):
    """Parent: the gradients of sum(attention(q, k, v)) by minigrad's own attention, in float64."""
    import minigrad as mg
    import minigrad.nn.functional as F
    ts = [mg.tensor(a, dtype=mg.float64, requires_grad=True) for a in (q, k, v)]
    F.scaled_dot_product_attention(*ts).sum().backward()
    return [t.grad.numpy() for t in ts]


def verdict_attention_memory(case, obs, ctx):
    p = case.params
    v = V.compare("FlashAttention at long L: output", obs.get("y"), _attention(case["q"], case["k"], case["v"], False),
                  rtol=1e-9, atol=1e-10)
    if v.passed:                      # little memory is credited only to a forward and backward that are right
        v = V.check_gradients("FlashAttention at long L", "qkv", obs,
                              _attention_grads(case["q"], case["k"], case["v"]))
    if not v.passed:
        return Verdict.fail(f"the memory is credited only to an attention whose output and gradients are right: "
                            f"{v.message}")
    scores = p["B"] * p["L"] * p["S"] * 8
    budget = scores / 4
    peak = float(obs.get("peak", np.inf))
    if peak > budget:
        return Verdict.fail(f"FlashAttention at L=S={p['L']}: peak {V.mib(peak)} > budget {V.mib(budget)}; the "
                            f"(L, S) score matrix alone is {V.mib(scores)}: keep only one tile of scores at a time")
    return Verdict.ok(f"peak {V.mib(peak)} of {V.mib(budget)}")


def _prog(program, seed, rows=3, cols=4, **extra):
    return {"program": program, "seed": seed, "rows": rows, "cols": cols, **extra}


def _att(seed, B, L, S, E, Ev, causal, block, **extra):
    return {"seed": seed, "B": B, "L": L, "S": S, "E": E, "Ev": Ev, "causal": causal, "block": block, **extra}


# minigrad's compiler, fusion pass, kernels and attention, and PyTorch (dotted names: autograder/forbidden.py).
# The IR (Graph, Node) and the table of fusible ops stay allowed: the preamble imports them for the student.
# `mg.compile` itself (the function: it fuses) is forbidden by the exact-name rule "=minigrad.compile";
# the package minigrad.compiler is forbidden name by name: its IR (minigrad.compiler.ir, .Graph) is what
# the student builds on.
_COMPILE = ["api", "capture", "explain", "passes", "piecewise", "replay", "loops", "CompiledFunction", "compile",
            "optimize", "fuse", "find_chains", "fused_kernels", "FusedElementwise", "FusedKernel", "fusion.fuse",
            "fusion.find_chains", "fusion.fused_kernels", "fusion.kernel", "fusion.blocked",
            "fusion.FusedElementwise", "fusion.FusedKernel"]
FORBIDDEN = ["=minigrad.compile"] + [f"minigrad.compiler.{name}" for name in _COMPILE] + [
    "minigrad.ops", "minigrad.nn", "torch", "FusedElementwise", "FusedKernel", "*.make_kernel", "*.flash_attention",
    "*.scaled_dot_product_attention"]

# minigrad's fusion pass, its kernels and its attention, left out of every part's child (autograder/stubs.py);
# the tracer (mg.compile(fn, fuse=False)), the IR and the table of fusible ops stay: the grader traces with them
STUBS = [f"minigrad.compiler.fusion.{n}" for n in ("find_chains", "make_kernel", "fuse", "fused_kernels", "kernel",
                                                   "blocked")] + ["minigrad.ops.nn.flash_attention", "minigrad.ops.nn.attention"]

ASSIGNMENT = Assignment(
    id="a7", name="a7_fusion", title="Fusion and FlashAttention", notebook="a7_fusion.ipynb",
    solution="solutions/a7_fusion.ipynb",
    preamble=("import numpy as np\nimport minigrad as mg\nfrom minigrad.autograd import Function\n"
              "from minigrad.compiler import Graph, Node\nfrom minigrad.compiler.fusion import fusible\n"
              "UFUNCS = {'add': 'np.add', 'sub': 'np.subtract', 'mul': 'np.multiply', 'div': 'np.divide', "
              "'neg': 'np.negative', 'exp': 'np.exp', 'log': 'np.log', 'sqrt': 'np.sqrt', 'abs': 'np.absolute', "
              "'sin': 'np.sin', 'cos': 'np.cos', 'tanh': 'np.tanh', 'maximum': 'np.maximum', "
              "'minimum': 'np.minimum'}\n"),
    timeout=30, memory_mb=2048, forbidden=FORBIDDEN,
    summary="the student's chains vs minigrad's fusion pass (named rule broken: a reduction inside, a value read "
            "outside); fused graphs' values vs NumPy and gradients vs float64 central differences; peak temporaries "
            "<= output + 8 blocks; attention values and gradients vs NumPy/central differences; peak bytes at "
            "L=2048 <= 1/4 of the LxS score matrix",
    parts=[
        Part("part1", "Maximal chains", cells=["a7-chains"], names=["find_chains"], stubs=STUBS,
             objective="chains of elementwise ops with one exit, never across a reduction", tests=[
                 Test("find_chains", 20, observe_chains, verdict_chains, inputs_program, partial=True,
                      cases=_cases(_prog("gelu_norm", 0), _prog("reduction", 1), _prog("escaping", 2),
                                   _prog("diamond", 3), _prog("matmul", 4))),
             ]),
        Part("part2", "The blocked kernel and the rewrite", cells=["a7-fuse"], stubs=STUBS,
             names=["generate_kernel", "run_blocked", "FusedChain", "fuse"],
             objective="one kernel per chain, block by block with out= buffers, differentiable", tests=[
                 Test("fused values", 10, observe_fused, verdict_values, inputs_program, partial=True,
                      cases=_cases(_prog("gelu_norm", 10, rows=6, cols=5, block=7),
                                   _prog("reduction", 11, rows=4, cols=6, block=6),
                                   _prog("diamond", 12, rows=5, cols=3, block=1000))),
                 Test("fused gradients", 10, observe_fused, verdict_gradients, inputs_program, partial=True,
                      cases=_cases(_prog("gelu_norm", 13, rows=3, cols=4, block=4, grad=True),
                                   _prog("reduction", 14, rows=3, cols=5, block=5, grad=True),
                                   _prog("diamond", 15, rows=4, cols=2, block=3, grad=True))),
                 Test("fused memory", 10, observe_memory, verdict_memory, inputs_program,
                      cases=_cases(_prog("gelu_norm", 16, rows=512, cols=512, block=4096))),
             ]),
        Part("part3", "FlashAttention", cells=["a7-flash"], names=["FlashAttention"], stubs=STUBS,
             objective="online softmax with the running-max rescale; backward recomputed from the lse", tests=[
                 Test("attention forward", 15, observe_attention, verdict_forward, inputs_attention, partial=True,
                      cases=_cases(_att(20, 2, 7, 9, 3, 2, False, 3), _att(21, 1, 8, 8, 4, 4, True, 3),
                                   _att(22, 2, 5, 12, 3, 3, False, 4, scale=4.0), _att(23, 1, 6, 6, 2, 2, True, 6))),
                 Test("attention backward", 20, observe_attention, verdict_backward, inputs_attention, partial=True,
                      cases=_cases(_att(24, 2, 5, 6, 3, 2, False, 2), _att(25, 1, 7, 7, 3, 3, True, 3),
                                   _att(26, 1, 4, 9, 2, 2, False, 4, scale=3.0))),
                 Test("attention memory", 15, observe_attention_memory, verdict_attention_memory, inputs_attention,
                      cases=_cases(_att(27, 2, 2048, 2048, 16, 16, False, 128))),
             ]),
    ],
)
