"""One fused elementwise chain: its generated sources and the Function that runs them.

``FusedKernel`` holds the chain's steps (op rule, operands, attrs, dtype) and generates from the table:

* ``numpy_source``: the forward body ``blocked.forward_blocks`` runs per block: one NumPy ufunc call with
  ``out=`` per op into block buffers, each reused as soon as the value in it is dead (the output's own block
  first), the last op writing the output. Literals are 0-d arrays of their op's dtype, bound once next to
  the function (``c0 = np.array(0.5, 'float32')``): NumPy would convert a Python float on every call;
* ``backward_source``: per block, recompute the chain's values, then sweep it in reverse (the chain rule)
  into the gradient of every input that needs one;
* ``cupy_forward_source`` / ``cupy_backward_source``: the same values and sweep as ``cupy.ElementwiseKernel``
  bodies (C++). They compute in float for float16 and float32 and in double for float64 (PyTorch's *opmath*
  type: float16 inputs are read as float, and each output is rounded once, when it is stored).

Gradients: ``FusedElementwise`` saves only the chain's inputs; backward recomputes the intermediates block by
block (as checkpointing does), so a fused chain holds no intermediate value in forward or backward.
"""
import numpy as np

from ...autograd.function import Function
from . import blocked
from .table import C_PREAMBLE, expr, namespace

_OPMATH = {"float16": "float", "float32": "float", "float64": "double"}   # the C type a step computes in
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
        self._compiled = {}   # the exec'd NumPy functions and the CuPy kernels, made on first use
        self.numpy_source, self.buffer_dtypes = self._numpy_forward()

    @property
    def label(self):   # how print_readable shows it
        return self.name

    def __repr__(self):
        return f"<FusedKernel {self.name}: {len(self.steps)} ops, {len(self.input_dtypes)} inputs>"

    def _ref(self, operand, c=False):
        """An operand in the generated code: ``x3`` (an input; read as float in C when it is float16), ``v2``
        (a value of the chain) or a literal."""
        kind, ref = operand
        if kind == "in":
            return f"((float)x{ref})" if c and self.input_dtypes[ref] == np.float16 else f"x{ref}"
        return f"v{ref}" if kind == "v" else ref

    def _value(self, k, c=False):
        s = self.steps[k]
        return expr(s.rule.value, [self._ref(o, c) for o in s.operands], s.attrs)

    # --- NumPy forward: ufunc calls with out= into reused buffers ----------------------------------
    def _numpy_forward(self):
        steps = self.steps
        last = {ref: k for k, s in enumerate(steps) for kind, ref in s.operands if kind == "v"}
        free, buffer_of, dtypes, consts = {}, {}, [], {}   # free: dtype -> names of buffers holding dead values
        if steps[-1].rule.lines is None:   # the output block is scratch space until the last op writes it
            free[np.dtype(steps[-1].dtype)] = ["out"]
        lines = [f"def {self.name}({''.join(f'x{i}, ' for i in range(len(self.input_dtypes)))}out, t):"]
        for k, s in enumerate(steps):
            dying = list(dict.fromkeys(ref for kind, ref in s.operands if kind == "v" and last[ref] == k))

            def release():
                for ref in dying:
                    free.setdefault(np.dtype(steps[ref].dtype), []).append(buffer_of[ref])
            if s.rule.lines is None:   # one ufunc reads its operands before writing: reuse a dying buffer
                release()
            if k == len(steps) - 1:
                dest = "out"
            else:
                pool = free.get(np.dtype(s.dtype))
                if not pool:   # a new buffer
                    pool = [f"t[{len(dtypes)}]"]
                    dtypes.append(np.dtype(s.dtype))
                dest = buffer_of[k] = pool.pop()
            ops = [buffer_of[ref] if kind == "v" else f"x{ref}" if kind == "in" else ref for kind, ref in s.operands]
            const = self._constant_maker(s, consts)
            if s.rule.lines is not None:   # several in-place steps: dest must not alias an operand
                lines += [f"    {line}      # {s.op_name}" for line in s.rule.lines(ops, s.attrs, dest, const)]
                release()
            elif s.rule.ufunc is not None:
                ufunc, *args = s.rule.ufunc(ops, s.attrs) if callable(s.rule.ufunc) else (s.rule.ufunc, *ops)
                value = self._value(k)
                lines.append(f"    np.{ufunc}({', '.join(map(const, args))}, out={dest})      # {s.op_name}: "
                             f"v{k} = {value[1:-1] if value.startswith('(') else value}")
            else:
                lines.append(f"    np.copyto({dest}, {expr(s.rule.value, ops, s.attrs)})      # {s.op_name}")
        header = [f"{name} = np.array({text}, '{dt}')" for (text, dt), name in consts.items()]
        if header:
            header.insert(0, "# literals as 0-d arrays of their op's dtype: NumPy would convert a Python float "
                             "on every call")
        return "\n".join(header + lines) + "\n", dtypes

    def _constant_maker(self, step, consts):
        """``const(operand)``: a literal operand as the name of a 0-d array constant (c0, c1, ...) of the
        step's dtype, anything else unchanged. NumPy casts a Python float to the other operand's dtype
        (NEP 50), so this computes the same values; only when every array operand has the step's dtype."""
        dt = np.dtype(step.dtype)
        if any((self.input_dtypes[ref] if kind == "in" else np.dtype(self.steps[ref].dtype)) != dt
               for kind, ref in step.operands if kind != "lit"):
            return lambda a: a
        return lambda a: consts.setdefault((a, dt.name), f"c{len(consts)}") if _is_literal(a) else a

    def forward_numpy(self, inputs, out):
        fn = self._compiled.get("np") or self._compiled.setdefault("np", _exec(self.numpy_source, self.name))
        return blocked.forward_blocks(fn, inputs, out, self.buffer_dtypes, self.block)

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

        def assign(name, value, dtype):
            lines.append(f"{_OPMATH[np.dtype(dtype).name]} {name} = {value};" if c else f"{name} = {value}")

        for k, s in enumerate(self.steps):
            assign(f"v{k}", self._value(k, c), s.dtype)
        contrib = {("v", n - 1): ["((float)g)" if c and self.dtype == np.float16 else "g"]}
        for k in range(n - 1, -1, -1):
            parts = contrib.get(("v", k))
            if not parts or not (depends[k] & need):
                continue
            s = self.steps[k]
            assign(f"g{k}", " + ".join(parts), s.dtype)
            ops = [self._ref(o, c) for o in s.operands]
            for (kind, ref), grad in zip(s.operands, s.rule.grads):
                if grad is None or kind == "lit" or (kind == "in" and ref not in need) or \
                        (kind == "v" and not (depends[ref] & need)):
                    continue
                template = grad(ops, s.attrs) if callable(grad) else grad
                contrib.setdefault((kind, ref), []).append(expr(template, ops, s.attrs, g=f"g{k}", out=f"v{k}"))
        totals = [" + ".join(contrib.get(("in", i), ["0.0"])) if w else "None" for i, w in enumerate(wanted)]
        if c:
            return lines + [f"gx{i} = {t};" for i, t in enumerate(totals) if wanted[i]]
        return lines + [f"return ({', '.join(totals)},)"]

    def backward_source(self, wanted):
        args = "".join(f"x{i}, " for i in range(len(self.input_dtypes)))
        return f"def {self.name}_backward({args}g):\n" + "".join(f"    {line}\n" for line in self.backward_body(wanted))

    def backward_numpy(self, inputs, grad, wanted, alloc):
        key = ("np", tuple(wanted))
        fn = self._compiled.get(key) or self._compiled.setdefault(
            key, _exec(self.backward_source(wanted), self.name + "_backward"))
        dtypes = [d if d.kind == "f" else grad.dtype for d in self.input_dtypes]
        return blocked.backward_blocks(fn, inputs, grad, wanted, dtypes, self.block, alloc)

    # --- CuPy: the same chain as ElementwiseKernel bodies -----------------------------------------
    def cupy_forward_source(self):
        """(in_params, out_params, operation) of the forward ElementwiseKernel."""
        ins = ", ".join(f"{d.name} x{i}" for i, d in enumerate(self.input_dtypes))
        return ins, f"{self.dtype.name} y", "\n".join(self.backward_body([], c=True) + [f"y = v{len(self.steps) - 1}"])

    def cupy_backward_source(self, wanted):
        ins = ", ".join([f"{d.name} x{i}" for i, d in enumerate(self.input_dtypes)] + [f"{self.dtype.name} g"])
        outs = ", ".join(f"{self.input_dtypes[i].name} gx{i}" for i, w in enumerate(wanted) if w)
        return ins, outs, "\n".join(self.backward_body(wanted, c=True))[:-1]   # CuPy adds the last ';'

    def cupy_kernel(self, cupy, wanted=None):
        key = ("cupy", None if wanted is None else tuple(wanted))
        if key not in self._compiled:
            ins, outs, op = self.cupy_forward_source() if wanted is None else self.cupy_backward_source(wanted)
            grads = "" if wanted is None else "_grad" + "".join(str(i) for i, w in enumerate(wanted) if w)
            self._compiled[key] = cupy.ElementwiseKernel(ins, outs, op, f"minigrad_{self.name}_{self.dtype.name}"
                                                         f"{grads}", preamble=C_PREAMBLE)
        return self._compiled[key]

    def sources(self):
        """All generated code, for ``explain`` and the lecture."""
        ins, outs, op = self.cupy_forward_source()
        return (f"# --- {self.name}: NumPy forward, run per block of {self.block} elements on up to "
                f"{blocked.THREADS} thread(s) ---\n{self.numpy_source}\n"
                f"# --- NumPy backward (recomputes the chain per block) ---\n"
                f"{self.backward_source([d.kind == 'f' for d in self.input_dtypes])}\n"
                f"# --- cupy.ElementwiseKernel('{ins}', '{outs}') ---\n{op};\n")


def _is_literal(text):
    try:
        float(text)
    except (TypeError, ValueError):
        return False
    return True


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
        out = ctx.empty(shapes.pop() if len(shapes) == 1 else np.broadcast_shapes(*shapes), kernel.dtype)
        if ctx.xp is np:
            return kernel.forward_numpy(inputs, out)
        return kernel.cupy_kernel(ctx.xp)(*inputs, out)

    @staticmethod
    def backward(ctx, grad):
        kernel, inputs = ctx.kernel, ctx.saved_tensors
        wanted = [bool(w) and d.kind == "f" for w, d in zip(ctx.needs_input_grad, kernel.input_dtypes)]
        if not any(wanted):
            return (None,) * len(inputs)
        if ctx.xp is np:
            return tuple(kernel.backward_numpy(inputs, grad, wanted, ctx.empty))
        grads = kernel.cupy_kernel(ctx.xp, wanted)(*inputs, grad)
        grads = iter(grads if isinstance(grads, tuple) else (grads,))
        return tuple(next(grads) if w else None for w in wanted)

    # Beyond first order: the chain replayed op by op (each one differentiable again), then differentiated
    @staticmethod
    def vjp(ctx, grad):
        return ctx.partials(lambda *xs: replay(ctx.kernel, xs), ctx.saved_tensors, grad, ctx.needs_input_grad)

    @staticmethod
    def jvp(primals, tangents, out, kernel):
        from ...ops._rules import composite_jvp
        return composite_jvp(lambda *xs: replay(kernel, xs), primals, tangents)


def replay(kernel, inputs):
    """The chain as the ops it fused, applied to ``inputs`` (Tensors): what higher order and forward mode
    differentiate (the generated kernels compute first-order gradients only)."""
    from .table import RULES, _signature
    op_of = {id(rule): op for op, rule in RULES.items()}
    values = []
    for step in kernel.steps:
        op = op_of[id(step.rule)]
        operands = [inputs[ref] if kind == "in" else values[ref] if kind == "v" else float(ref)
                    for kind, ref in step.operands]
        args, kwargs = [], {}
        for param, value in zip(list(_signature(op).parameters.values())[1:], operands + list(step.attrs)):
            if param.kind is param.KEYWORD_ONLY:
                kwargs[param.name] = value
            else:
                args.append(value)
        values.append(op.apply(*args, **kwargs))
    return values[-1]


__all__ = ["FusedKernel", "FusedElementwise", "Step"]
