"""The elementwise ops the fusion pass knows: for each op, its value and its gradients as expressions.

Expressions are written in a small language that is at once Python over NumPy/CuPy arrays and C++ for a
CuPy ``ElementwiseKernel``: ``+ - * /``, comparisons, parentheses, float literals and the functions of
``NAMESPACE`` / ``C_PREAMBLE`` (``exp log sqrt fabs sin cos tanh mg_pow sign where maximum minimum sigmoid``).
One table therefore drives three code generators: the blocked NumPy forward, the NumPy backward, and the
CuPy kernels.

A rule's operands are the op's positional tensor-or-number inputs; ``attrs`` are its other positional
arguments (a clamp's bounds, a leaky ReLU's slope), which must be Python numbers to be baked into the code.
``grads(ops, out, g, attrs)`` gives one expression per operand: the gradient flowing there when ``g`` flows
into the op's output ``out`` (None where no gradient flows).
"""
import functools
import inspect
import math
from dataclasses import dataclass
from typing import Callable, Optional

from ...ops import elementwise as E
from ...ops.nn import activation as A

_K = math.sqrt(2.0 / math.pi)   # GELU's tanh approximation: 0.5 x (1 + tanh(K (x + C x^3)))
_C = 0.044715


@dataclass(frozen=True)
class Rule:
    n_operands: int
    expr: Callable                  # (ops, attrs) -> expression
    grads: Callable                 # (ops, out, g, attrs) -> [expression or None per operand]
    ufunc: Optional[Callable] = None   # (ops, attrs) -> (numpy ufunc name, operands): the out= fast path
    attrs_ok: Callable = lambda attrs: True
    lines: Optional[Callable] = None   # (ops, attrs, dest, const) -> ufunc calls using only ``dest`` as
    #                                    scratch; const(literal) -> the name the code reads it by


def _bin(name, symbol, grads):
    return Rule(2, lambda o, _: f"({o[0]} {symbol} {o[1]})", grads, lambda o, _: (name, o))


def _un(name, fn, grads):
    return Rule(1, lambda o, _: f"{fn}({o[0]})", grads, lambda o, _: (name, o))


def _pow_expr(o, _):
    return f"({o[0]} * {o[0]})" if o[1] == "2.0" else f"mg_pow({o[0]}, {o[1]})"


def _pow_ufunc(o, _):
    return ("multiply", (o[0], o[0])) if o[1] == "2.0" else ("power", o)


def _pow_grads(o, out, g, _):
    a, b = o
    ga = f"({g} * 2.0 * {a})" if b == "2.0" else f"({g} * {b} * mg_pow({a}, {b} - 1.0))"
    gb = f"where({a} > 0, {g} * {out} * log(where({a} > 0, {a}, 1.0)), 0.0)"   # 0 where a <= 0, as eager
    return [ga, gb]


def _share(first, a, b):   # maximum/minimum: the gradient goes to the input picked; ties split it
    return f"(({a} {first} {b}) + ({a} == {b}) * 0.5)"


def _clamp_expr(o, attrs):
    lo, hi = attrs
    e = o[0] if lo is None else f"maximum({o[0]}, {_lit(lo)})"
    return e if hi is None else f"minimum({e}, {_lit(hi)})"


def _clamp_grads(o, out, g, attrs):
    lo, hi = attrs
    keep = [f"({o[0]} >= {_lit(lo)})" if lo is not None else None,
            f"({o[0]} <= {_lit(hi)})" if hi is not None else None]
    keep = [k for k in keep if k]
    return [f"({g} * ({' * '.join(keep)}))" if keep else g]


def _gelu_expr(o, attrs):
    x = o[0]
    return f"(0.5 * {x} * (1.0 + tanh({_K!r} * ({x} + {_C!r} * {x} * {x} * {x}))))"


def _gelu_lines(o, attrs, dest, const=str):   # as the eager GELU: one buffer, every step in place
    x, c, k, one, half = o[0], const(repr(_C)), const(repr(_K)), const("1.0"), const("0.5")
    return [f"np.multiply({x}, {x}, out={dest})", f"np.multiply({dest}, {c}, out={dest})",
            f"np.add({dest}, {one}, out={dest})", f"np.multiply({dest}, {x}, out={dest})",
            f"np.multiply({dest}, {k}, out={dest})", f"np.tanh({dest}, out={dest})",
            f"np.add({dest}, {one}, out={dest})", f"np.multiply({dest}, {half}, out={dest})",
            f"np.multiply({dest}, {x}, out={dest})"]


def _clamp_lines(o, attrs, dest, const=str):
    lo, hi = (None if a is None else const(_lit(a)) for a in attrs)
    return [f"np.clip({o[0]}, {lo}, {hi}, out={dest})"]


def _gelu_grads(o, out, g, attrs):
    x = o[0]
    t = f"tanh({_K!r} * ({x} + {_C!r} * {x} * {x} * {x}))"
    return [f"({g} * (0.5 * (1.0 + {t}) + 0.5 * {x} * (1.0 - {t} * {t}) * {_K!r} * "
            f"(1.0 + {3 * _C!r} * {x} * {x})))", None]


RULES = {
    E.Add: _bin("add", "+", lambda o, out, g, _: [g, g]),
    E.Sub: _bin("subtract", "-", lambda o, out, g, _: [g, f"(-{g})"]),
    E.Mul: _bin("multiply", "*", lambda o, out, g, _: [f"({g} * {o[1]})", f"({g} * {o[0]})"]),
    E.Div: _bin("true_divide", "/", lambda o, out, g, _: [f"({g} / {o[1]})",
                                                          f"(-{g} * {o[0]} / ({o[1]} * {o[1]}))"]),
    E.Neg: Rule(1, lambda o, _: f"(-{o[0]})", lambda o, out, g, _: [f"(-{g})"], lambda o, _: ("negative", o)),
    E.Pow: Rule(2, _pow_expr, _pow_grads, _pow_ufunc),
    E.Exp: _un("exp", "exp", lambda o, out, g, _: [f"({g} * {out})"]),
    E.Log: _un("log", "log", lambda o, out, g, _: [f"({g} / {o[0]})"]),
    E.Sqrt: _un("sqrt", "sqrt", lambda o, out, g, _: [f"({g} / (2.0 * {out}))"]),
    E.Abs: _un("absolute", "fabs", lambda o, out, g, _: [f"({g} * sign({o[0]}))"]),
    E.Sin: _un("sin", "sin", lambda o, out, g, _: [f"({g} * cos({o[0]}))"]),
    E.Cos: _un("cos", "cos", lambda o, out, g, _: [f"(-{g} * sin({o[0]}))"]),
    E.Maximum: Rule(2, lambda o, _: f"maximum({o[0]}, {o[1]})",
                    lambda o, out, g, _: [f"({g} * {_share('>', *o)})", f"({g} * {_share('<', *o)})"],
                    lambda o, _: ("maximum", o)),
    E.Minimum: Rule(2, lambda o, _: f"minimum({o[0]}, {o[1]})",
                    lambda o, out, g, _: [f"({g} * {_share('<', *o)})", f"({g} * {_share('>', *o)})"],
                    lambda o, _: ("minimum", o)),
    E.Where: Rule(3, lambda o, _: f"where({o[0]}, {o[1]}, {o[2]})",
                  lambda o, out, g, _: [None, f"where({o[0]}, {g}, 0.0)", f"where({o[0]}, 0.0, {g})"]),
    E.Clamp: Rule(1, _clamp_expr, _clamp_grads,
                  attrs_ok=lambda attrs: all(a is None or _is_number(a) for a in attrs), lines=_clamp_lines),
    A.ReLU: Rule(1, lambda o, _: f"maximum({o[0]}, 0.0)", lambda o, out, g, _: [f"({g} * ({out} > 0))"],
                 lambda o, _: ("maximum", (o[0], "0.0"))),
    A.LeakyReLU: Rule(1, lambda o, at: f"where({o[0]} > 0, {o[0]}, {o[0]} * {_lit(at[0])})",
                      lambda o, out, g, at: [f"where({o[0]} > 0, {g}, {g} * {_lit(at[0])})", None],
                      attrs_ok=lambda attrs: _is_number(attrs[0])),
    A.Sigmoid: Rule(1, lambda o, _: f"sigmoid({o[0]})", lambda o, out, g, _: [f"({g} * {out} * (1.0 - {out}))"]),
    A.Tanh: _un("tanh", "tanh", lambda o, out, g, _: [f"({g} * (1.0 - {out} * {out}))"]),
    A.SiLU: Rule(1, lambda o, _: f"({o[0]} * sigmoid({o[0]}))",
                 lambda o, out, g, _: [f"({g} * (sigmoid({o[0]}) * (1.0 + {o[0]} * (1.0 - sigmoid({o[0]})))))"]),
    A.GELU: Rule(1, _gelu_expr, _gelu_grads, attrs_ok=lambda attrs: attrs[0] == "tanh", lines=_gelu_lines),
}


def _is_number(x):
    return type(x) in (int, float) and math.isfinite(x)


def _lit(x):
    """A number as a literal both languages read as a double (never C's integer division)."""
    return repr(float(x))


def operands_and_attrs(node):
    """Split a node's arguments into (operands, attrs) by its rule; None if the node can't fuse.

    Arguments are bound to the op's ``forward`` signature, so an option passed by position or by keyword
    (``gelu(x, 'tanh')`` or ``gelu(x, approximate='tanh')``) reads the same."""
    rule = RULES.get(node.target) if node.kind == "call_op" else None
    if rule is None:
        return None
    try:
        bound = _signature(node.target).bind(None, *node.args, **node.kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    values = list(bound.arguments.values())[1:]   # without ctx
    ops, attrs = values[:rule.n_operands], tuple(values[rule.n_operands:])
    if len(ops) < rule.n_operands or any(not (_is_number(o) or hasattr(o, "kind")) for o in ops) \
            or not rule.attrs_ok(attrs):
        return None
    return ops, attrs


@functools.lru_cache(maxsize=None)
def _signature(op):
    return inspect.signature(op.forward)


def _stable_sigmoid(xp):
    def sigmoid(x):   # as activation.stable_sigmoid: exp only ever sees -|x|
        e = xp.exp(-xp.abs(x))
        return xp.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    return sigmoid


def namespace(xp):
    """The expression language's functions over the array module ``xp`` (numpy or cupy)."""
    return {"exp": xp.exp, "log": xp.log, "sqrt": xp.sqrt, "fabs": xp.abs, "sin": xp.sin, "cos": xp.cos,
            "tanh": xp.tanh, "mg_pow": xp.power, "sign": xp.sign, "where": xp.where, "maximum": xp.maximum,
            "minimum": xp.minimum, "sigmoid": _stable_sigmoid(xp)}


# the same functions for C++ (CuPy's nvcc, or g++ in the CPU test harness); macros, so mixed float/double
# operands need no overloads (CUDA's pow(float, double) would be ambiguous: mg_pow casts). maximum/minimum
# propagate NaN as NumPy does.
C_PREAMBLE = r"""
#define where(c, a, b) ((c) ? (a) : (b))
#define maximum(a, b) ((((a) != (a)) || ((a) > (b))) ? (a) : (b))
#define minimum(a, b) ((((a) != (a)) || ((a) < (b))) ? (a) : (b))
#define sign(x) ((double)(((x) > 0) - ((x) < 0)))
#define sigmoid(x) (1.0 / (1.0 + exp(-(x))))
#define mg_pow(a, b) pow((double)(a), (double)(b))
"""
