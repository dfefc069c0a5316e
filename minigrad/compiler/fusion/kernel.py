"""One fused elementwise chain: its generated sources and the Function that runs them.

``FusedKernel`` is built from a list of steps (op rule, operands, attrs, dtype) and generates, lazily:

* ``numpy_source``: the forward body run per block by ``blocked.run_forward``, one NumPy ufunc call with
  ``out=`` per op into reused block buffers (linear-scan buffer allocation: a buffer is reused as soon as
  the value in it is dead; the output's own block is the first buffer), the last op writing the output.
  Literals are 0-d arrays of their op's dtype, bound once next to the function (``c0 = np.array(0.5,
  'float32')``): NumPy converts a Python float on every call, and a kernel makes one call per op per block;
* ``backward_source``: per block, recompute the chain's values, then sweep it in reverse (the chain rule,
  from the table's gradient expressions) into the gradient of every input that needs one;
* ``cupy_source``: the same two as ``cupy.ElementwiseKernel`` bodies (C++), used on a CUDA device.

Gradients: ``FusedElementwise`` saves only the chain's *inputs*; backward recomputes the intermediate
values block by block (as checkpointing does). So a fused chain needs no memory for its intermediates in
forward or backward, and graphs with fused chains differentiate like eager ones.
"""
import numpy as np

from ...autograd.function import Function
from . import blocked
from .table import C_PREAMBLE, _lit, namespace

_C_TYPES = {"float32": "float", "float64": "double", "bool": "bool", "int64": "long long", "int32": "int",
            "float16": None}
_NP_GLOBALS = {"np": np, **namespace(np)}


class Step:
    """One op of the chain: ``operands`` are ('in', i) | ('v', k) | ('lit', text)."""
    __slots__ = ("rule", "operands", "attrs", "dtype", "op_name")

    def __init__(self, rule, operands, attrs, dtype, op_name):
        self.rule, self.operands, self.attrs, self.dtype, self.op_name = rule, operands, attrs, dtype, op_name


class FusedKernel:

    def __init__(self, name, steps, input_dtypes, block=None):
        self.name, self.steps = name, steps
        self.input_dtypes = [np.dtype(d) for d in input_dtypes]
        self.dtype = np.dtype(steps[-1].dtype)
        self.block = block or blocked.BLOCK
        self._forward = None
        self._cupy = {}
        self.numpy_source, self.buffer_dtypes = self._numpy_forward()

    @property
    def label(self):   # how print_readable shows it
        return self.name

    def __repr__(self):
        return f"<FusedKernel {self.name}: {len(self.steps)} ops, {len(self.input_dtypes)} inputs>"

    # --- NumPy forward: ufunc calls with out= into reused buffers ----------------------------------
    def _numpy_forward(self):
        last = {}
        for k, s in enumerate(self.steps):
            for kind, ref in s.operands:
                if kind == "v":
                    last[ref] = k
        free, slot_of, dtypes, consts = {}, {}, [], {}
        if self.steps[-1].rule.lines is None:   # the output block is scratch space until the last op writes it
            free[np.dtype(self.steps[-1].dtype)] = ["out"]
        lines = [f"def {self.name}({''.join(f'x{i}, ' for i in range(len(self.input_dtypes)))}out, t):"]
        for k, s in enumerate(self.steps):
            dying = list(dict.fromkeys(ref for kind, ref in s.operands        # (x * x: free x once)
                                       if kind == "v" and last.get(ref) == k and ref in slot_of))
            if s.rule.lines is None:   # one ufunc reads its operands before writing: reuse a dying buffer
                for ref in dying:
                    free.setdefault(np.dtype(self.steps[ref].dtype), []).append(slot_of[ref])
            if k == len(self.steps) - 1:
                dest = "out"
            else:
                pool = free.get(np.dtype(s.dtype))
                slot = pool.pop() if pool else None
                if slot is None:
                    slot = len(dtypes)
                    dtypes.append(np.dtype(s.dtype))
                slot_of[k] = slot
                dest = "out" if slot == "out" else f"t[{slot}]"
            ops = [self._np_operand(o, slot_of) for o in s.operands]
            const = self._constant_maker(s, consts)
            fast = s.rule.ufunc(ops, s.attrs) if s.rule.ufunc else None
            if s.rule.lines is not None:   # several in-place steps: dest must not alias an operand
                lines += [f"    {line}      # {s.op_name}" for line in s.rule.lines(ops, s.attrs, dest, const)]
                for ref in dying:
                    free.setdefault(np.dtype(self.steps[ref].dtype), []).append(slot_of[ref])
            elif fast is not None:
                args = ", ".join(const(a) for a in fast[1])
                lines.append(f"    np.{fast[0]}({args}, out={dest})      # {s.op_name}: {self._value(k)}")
            else:
                lines.append(f"    np.copyto({dest}, {s.rule.expr(ops, s.attrs)})      # {s.op_name}")
        header = [f"{name} = np.array({text}, '{dt}')" for (text, dt), name in consts.items()]
        if header:
            header.insert(0, "# literals as 0-d arrays of their op's dtype: NumPy would convert a Python float "
                             "on every call")
        return "\n".join(header + lines) + "\n", dtypes

    def _value(self, k):
        """'v3 = v2 * 0.5': what step ``k`` computes, in the backward's names (a comment in the source)."""
        s = self.steps[k]
        expr = s.rule.expr([_ref(o) for o in s.operands], s.attrs)
        return f"v{k} = {expr[1:-1] if expr.startswith('(') and expr.endswith(')') else expr}"

    def _constant_maker(self, step, consts):
        """``const(operand)``: a literal operand as the name of a 0-d array constant (c0, c1, ...) of the
        step's dtype, anything else unchanged. NumPy casts a Python float to the other operand's dtype
        (NEP 50), so this computes the same values; only when every array operand has the step's dtype."""
        dtypes = [self.input_dtypes[ref] if kind == "in" else np.dtype(self.steps[ref].dtype)
                  for kind, ref in step.operands if kind != "lit"]
        dt = np.dtype(step.dtype)
        if any(d != dt for d in dtypes):
            return lambda a: a

        def const(a):
            if not _is_literal(a):
                return a
            return consts.setdefault((a, dt.name), f"c{len(consts)}")
        return const

    @staticmethod
    def _np_operand(operand, slot_of):
        kind, ref = operand
        if kind != "v":
            return f"x{ref}" if kind == "in" else ref
        return "out" if slot_of[ref] == "out" else f"t[{slot_of[ref]}]"

    def forward_numpy(self, inputs, out):
        if self._forward is None:
            self._forward = _exec(self.numpy_source, self.name)
        return blocked.run_forward(self._forward, inputs, out, self.buffer_dtypes, self.block)

    # --- backward: recompute, then the chain rule in reverse --------------------------------------
    def backward_body(self, wanted, c=False):
        """Statements computing each wanted input's gradient from ``x{i}`` and ``g`` (Python or C++)."""
        n = len(self.steps)
        depends = [set() for _ in range(n)]   # which inputs each value depends on
        for k, s in enumerate(self.steps):
            for kind, ref in s.operands:
                depends[k] |= {ref} if kind == "in" else depends[ref] if kind == "v" else set()
        need = {i for i, w in enumerate(wanted) if w}
        lines = []

        def assign(name, expr, dtype):
            lines.append(f"{_ctype(dtype)} {name} = {expr};" if c else f"{name} = {expr}")

        for k, s in enumerate(self.steps):
            assign(f"v{k}", s.rule.expr([_ref(o) for o in s.operands], s.attrs), s.dtype)
        contrib = {("v", n - 1): ["g"]}
        for k in range(n - 1, -1, -1):
            parts = contrib.get(("v", k))
            if not parts or not (depends[k] & need):
                continue
            s = self.steps[k]
            assign(f"g{k}", " + ".join(parts), s.dtype)
            grads = s.rule.grads([_ref(o) for o in s.operands], f"v{k}", f"g{k}", s.attrs)
            for (kind, ref), expr in zip(s.operands, grads):
                if expr is None or kind == "lit" or (kind == "in" and ref not in need) or \
                        (kind == "v" and not (depends[ref] & need)):
                    continue
                contrib.setdefault((kind, ref), []).append(expr)
        outs = []
        for i, w in enumerate(wanted):
            if w:
                total = " + ".join(contrib.get(("in", i), ["0.0"]))
                if c:
                    lines.append(f"gx{i} = {total};")
                else:
                    outs.append(total)
            elif not c:
                outs.append("None")
        if not c:
            lines.append(f"return ({', '.join(outs)},)")
        return lines

    def backward_source(self, wanted):
        args = "".join(f"x{i}, " for i in range(len(self.input_dtypes)))
        return f"def {self.name}_backward({args}g):\n" + "".join(
            f"    {line}\n" for line in self.backward_body(wanted))

    def backward_numpy(self, inputs, grad, wanted, alloc):
        key = tuple(wanted)
        fn = self._cupy.get(("np", key))
        if fn is None:
            fn = self._cupy[("np", key)] = _exec(self.backward_source(wanted), self.name + "_backward")
        dtypes = [d if d.kind == "f" else grad.dtype for d in self.input_dtypes]
        return blocked.run_backward(fn, inputs, grad, wanted, dtypes, self.block, alloc)

    # --- CuPy: the same chain as ElementwiseKernel bodies -----------------------------------------
    def cupy_supported(self):
        return all(_C_TYPES.get(d.name) for d in self.input_dtypes + [np.dtype(s.dtype) for s in self.steps])

    def cupy_forward_source(self):
        """(in_params, out_params, operation) of the forward ElementwiseKernel."""
        ins = ", ".join(f"{d.name} x{i}" for i, d in enumerate(self.input_dtypes))
        body = [f"{_ctype(s.dtype)} v{k} = {s.rule.expr([_ref(o) for o in s.operands], s.attrs)};"
                for k, s in enumerate(self.steps)]
        body.append(f"y = v{len(self.steps) - 1}")
        return ins, f"{self.dtype.name} y", "\n".join(body)

    def cupy_backward_source(self, wanted):
        ins = ", ".join([f"{d.name} x{i}" for i, d in enumerate(self.input_dtypes)] + [f"{self.dtype.name} g"])
        outs = ", ".join(f"{self.input_dtypes[i].name} gx{i}" for i, w in enumerate(wanted) if w)
        body = self.backward_body(wanted, c=True)
        body[-1] = body[-1].rstrip(";")   # CuPy adds the last ';'
        return ins, outs, "\n".join(body)

    def cupy_kernel(self, cupy, wanted=None):
        key = ("fwd",) if wanted is None else ("bwd", tuple(wanted))
        k = self._cupy.get(key)
        if k is None:
            ins, outs, op = self.cupy_forward_source() if wanted is None else self.cupy_backward_source(wanted)
            k = self._cupy[key] = cupy.ElementwiseKernel(ins, outs, op, f"minigrad_{self.name}" +
                                                         ("" if wanted is None else "_bwd"), preamble=C_PREAMBLE)
        return k

    def sources(self):
        """All generated code, for ``explain`` and the lecture."""
        wanted = [d.kind == "f" for d in self.input_dtypes]
        ins, outs, op = self.cupy_forward_source()
        return (f"# --- {self.name}: NumPy forward, run per block of {self.block} elements on up to "
                f"{blocked.THREADS} thread(s) ---\n"
                f"{self.numpy_source}\n# --- NumPy backward (recomputes the chain per block) ---\n"
                f"{self.backward_source(wanted)}\n# --- cupy.ElementwiseKernel('{ins}', '{outs}') ---\n{op};\n")


def _is_literal(text):
    try:
        float(text)
    except (TypeError, ValueError):
        return False
    return True


def _ref(operand):
    kind, ref = operand
    return f"x{ref}" if kind == "in" else ref if kind == "lit" else f"v{ref}"


def _ctype(dtype):
    return _C_TYPES[np.dtype(dtype).name]


def _exec(source, name):
    env = dict(_NP_GLOBALS)
    exec(compile(source, f"<minigrad fused kernel {name}>", "exec"), env)
    return env[name]


class FusedElementwise(Function):
    """A fused elementwise chain as one op: inputs in, the chain's last value out (see module docstring)."""
    name = "fused_elementwise"

    @staticmethod
    def forward(ctx, *inputs, kernel):
        ctx.kernel = kernel
        ctx.save_for_backward(*inputs)
        shapes = {np.shape(x) for x in inputs}
        shape = shapes.pop() if len(shapes) == 1 else np.broadcast_shapes(*shapes)
        if ctx.xp is np:
            return kernel.forward_numpy(inputs, ctx.empty(shape, kernel.dtype))
        if kernel.cupy_supported():
            return kernel.cupy_kernel(ctx.xp)(*inputs, ctx.empty(shape, kernel.dtype))
        return _unblocked(ctx.xp, kernel, inputs, shape)

    @staticmethod
    def backward(ctx, grad):
        kernel, inputs = ctx.kernel, ctx.saved_tensors
        wanted = [bool(w) and d.kind == "f" for w, d in zip(ctx.needs_input_grad, kernel.input_dtypes)]
        if not any(wanted):
            return (None,) * len(inputs)
        if ctx.xp is np:
            return tuple(kernel.backward_numpy(inputs, grad, wanted, ctx.empty))
        if kernel.cupy_supported():
            res = kernel.cupy_kernel(ctx.xp, wanted)(*inputs, grad)
            res = iter(res if isinstance(res, tuple) else (res,))
            return tuple(next(res) if w else None for w in wanted)
        env = {**namespace(ctx.xp)}
        exec(kernel.backward_source(wanted), env)
        return env[kernel.name + "_backward"](*inputs, grad)


def _unblocked(xp, kernel, inputs, shape):
    """Fallback for dtypes the C kernel does not take (float16 on CUDA): the chain as array expressions."""
    env = {**namespace(xp), **{f"x{i}": x for i, x in enumerate(inputs)}}
    for k, s in enumerate(kernel.steps):
        env[f"v{k}"] = eval(s.rule.expr([_ref(o) for o in s.operands], s.attrs), env)
    out = xp.empty(shape, kernel.dtype)
    out[...] = env[f"v{len(kernel.steps) - 1}"]
    return out


__all__ = ["FusedKernel", "FusedElementwise", "Step", "_lit"]
