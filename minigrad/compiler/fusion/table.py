"""The elementwise ops the fusion pass knows: each op's value and gradients as expression templates.

An expression is at once Python over NumPy/CuPy arrays and C++ for a CuPy ``ElementwiseKernel``: ``+ - * /``,
comparisons, parentheses, float literals and the functions of ``namespace`` / ``C_PREAMBLE``. So one table
drives every generator (``kernel.py``): the NumPy forward (where ``ufunc`` names the same op as one NumPy call
with ``out=``), the NumPy backward and the CUDA kernels. In a template ``{0}``, ``{1}`` are the operands (the
op's positional tensor-or-number inputs), ``{out}`` its value, ``{g}`` the gradient flowing into it, and
``{a0}`` its first attr (the other positional arguments: a clamp's bounds, a leaky ReLU's slope; Python
numbers, baked into the code). ``grads`` has one template per operand (None: no gradient flows there).
"""
import functools
import inspect
import math
from dataclasses import dataclass
from typing import Callable, Optional, Union

from ...ops import elementwise as E
from ...ops.nn import activation as A

_K, _C = math.sqrt(2.0 / math.pi), 0.044715   # GELU's tanh approximation: 0.5 x (1 + tanh(K (x + C x^3)))


@dataclass(frozen=True)
class Rule:
    value: Union[str, Callable]              # template, or (ops, attrs) -> expression
    grads: tuple                             # per operand: template, (ops, attrs) -> template, or None
    ufunc: Union[str, Callable, None] = None  # NumPy ufunc taking the operands, or (ops, attrs) -> (name, args)
    attrs_ok: Callable = lambda attrs: True
    lines: Optional[Callable] = None         # (ops, attrs, dest, const) -> in-place ufunc calls into dest

    @property
    def n_operands(self):
        return len(self.grads)


def expr(template, ops, attrs=(), **names):
    """``template`` (or what a callable template returns) filled in, in parentheses unless a plain name."""
    if callable(template):
        template = template(ops, attrs)
    text = template.format(*ops, **names, **{f"a{i}": _lit(a) for i, a in enumerate(attrs) if _is_number(a)})
    return text if _atomic(text) else f"({text})"


def _atomic(text):
    """A name, or a call whose first parenthesis closes at the end (``exp(x0)``): needs no parentheses."""
    head, paren, _ = text.partition("(")
    if not paren:
        return text.isidentifier()
    depth = 0
    for i, ch in enumerate(text[len(head):]):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0:
            return head.isidentifier() and i == len(text) - len(head) - 1
    return False


def _pow(o, _):   # x ** 2 as x * x: what NumPy computes for it, bit for bit
    return "{0} * {0}" if o[1] == "2.0" else "mg_pow({0}, {1})"


def _clamp(o, attrs):
    e = "{0}" if attrs[0] is None else "maximum({0}, {a0})"
    return e if attrs[1] is None else f"minimum({e}, {{a1}})"


def _clamp_grad(o, attrs):   # (PyTorch's convention: the gradient flows at the bounds)
    keep = [k for k, a in zip(("({0} >= {a0})", "({0} <= {a1})"), attrs) if a is not None]
    return "{g} * (" + " * ".join(keep) + ")" if keep else "{g}"


def _clamp_lines(o, attrs, dest, const=str):
    lo, hi = (None if a is None else const(_lit(a)) for a in attrs)
    return [f"np.clip({o[0]}, {lo}, {hi}, out={dest})"]


def _gelu_lines(o, attrs, dest, const=str):   # as the eager GELU: one buffer, every step in place
    x, c, k, one, half = o[0], const(repr(_C)), const(repr(_K)), const("1.0"), const("0.5")
    steps = [("multiply", x, x), ("multiply", dest, c), ("add", dest, one), ("multiply", dest, x),
             ("multiply", dest, k), ("tanh", dest), ("add", dest, one), ("multiply", dest, half), ("multiply", dest, x)]
    return [f"np.{f}({', '.join(args)}, out={dest})" for f, *args in steps]


_TANH = f"tanh({_K!r} * ({{0}} + {_C!r} * {{0}} * {{0}} * {{0}}))"
_SHARE = "{g} * (({0} %s {1}) + ({0} == {1}) * 0.5)"   # maximum/minimum: to the input picked; ties split it

RULES = {
    E.Add: Rule("{0} + {1}", ("{g}", "{g}"), "add"),
    E.Sub: Rule("{0} - {1}", ("{g}", "-{g}"), "subtract"),
    E.Mul: Rule("{0} * {1}", ("{g} * {1}", "{g} * {0}"), "multiply"),
    E.Div: Rule("{0} / {1}", ("{g} / {1}", "-{g} * {0} / ({1} * {1})"), "true_divide"),
    E.Neg: Rule("-{0}", ("-{g}",), "negative"),
    E.Pow: Rule(_pow, (lambda o, _: "{g} * 2.0 * {0}" if o[1] == "2.0" else "{g} * {1} * mg_pow({0}, {1} - 1.0)",
                       "where({0} > 0, {g} * {out} * log(where({0} > 0, {0}, 1.0)), 0.0)"),   # 0 where a <= 0
                lambda o, _: ("multiply", o[0], o[0]) if o[1] == "2.0" else ("power", *o)),
    E.Exp: Rule("exp({0})", ("{g} * {out}",), "exp"),
    E.Log: Rule("log({0})", ("{g} / {0}",), "log"),
    E.Sqrt: Rule("sqrt({0})", ("{g} / (2.0 * {out})",), "sqrt"),
    E.Abs: Rule("fabs({0})", ("{g} * sign({0})",), "absolute"),
    E.Sin: Rule("sin({0})", ("{g} * cos({0})",), "sin"),
    E.Cos: Rule("cos({0})", ("-{g} * sin({0})",), "cos"),
    E.Maximum: Rule("maximum({0}, {1})", (_SHARE % ">", _SHARE % "<"), "maximum"),
    E.Minimum: Rule("minimum({0}, {1})", (_SHARE % "<", _SHARE % ">"), "minimum"),
    E.Where: Rule("where({0}, {1}, {2})", (None, "where({0}, {g}, 0.0)", "where({0}, 0.0, {g})")),
    E.Clamp: Rule(_clamp, (_clamp_grad,), attrs_ok=lambda attrs: all(a is None or _is_number(a) for a in attrs),
                  lines=_clamp_lines),
    A.ReLU: Rule("maximum({0}, 0.0)", ("{g} * ({out} > 0)",), lambda o, _: ("maximum", o[0], "0.0")),
    A.LeakyReLU: Rule("where({0} > 0, {0}, {0} * {a0})", ("where({0} > 0, {g}, {g} * {a0})",),
                      attrs_ok=lambda attrs: _is_number(attrs[0])),
    A.Sigmoid: Rule("sigmoid({0})", ("{g} * {out} * (1.0 - {out})",)),
    A.Tanh: Rule("tanh({0})", ("{g} * (1.0 - {out} * {out})",), "tanh"),
    A.SiLU: Rule("{0} * sigmoid({0})", ("{g} * (sigmoid({0}) * (1.0 + {0} * (1.0 - sigmoid({0}))))",)),
    A.GELU: Rule(f"0.5 * {{0}} * (1.0 + {_TANH})",
                 (f"{{g}} * (0.5 * (1.0 + {_TANH}) + 0.5 * {{0}} * (1.0 - {_TANH} * {_TANH}) * {_K!r} * "
                  f"(1.0 + {3 * _C!r} * {{0}} * {{0}}))",),
                 attrs_ok=lambda attrs: attrs[0] == "tanh", lines=_gelu_lines),
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


# the same functions for C++ (NVRTC, or g++ in the CPU test harness); macros, so mixed float/double operands
# need no overloads (CUDA's pow(float, double) would be ambiguous: mg_pow casts). maximum/minimum propagate
# NaN as NumPy does. Kernels compute in float or double only (float16 inputs are read as float: kernel.py).
C_PREAMBLE = r"""
#define where(c, a, b) ((c) ? (a) : (b))
#define maximum(a, b) ((((a) != (a)) || ((a) > (b))) ? (a) : (b))
#define minimum(a, b) ((((a) != (a)) || ((a) < (b))) ? (a) : (b))
#define sign(x) ((double)(((x) > 0) - ((x) < 0)))
#define sigmoid(x) (1.0 / (1.0 + exp(-(x))))
#define mg_pow(a, b) pow((double)(a), (double)(b))
"""
