"""The a1 spec: parts, tests, points, cases, and what a graded cell may not use."""
from autograder.spec import Assignment, Case, Part, Test

from .conv import (inputs_conv, observe_col2im, observe_conv_backward, observe_conv_forward, observe_im2col,
                   verdict_col2im, verdict_conv_backward, verdict_conv_forward, verdict_im2col)
from .engine import (inputs_accumulation, inputs_graph, inputs_x, observe_accumulation, observe_engine,
                     observe_numerical_grad, verdict_accumulation, verdict_engine, verdict_numerical_grad)
from .ops import (inputs_op, inputs_unbroadcast, observe_op, observe_unbroadcast, verdict_op,
                  verdict_unbroadcast)


def _label(params, skip=("op", "seed", "graph", "upstream")):
    """A case label from its params in Python notation, without the ones the test name already says:
    ``x=(3, 3), dim=1, keepdim=False``."""
    def show(v):
        if isinstance(v, list) and all(isinstance(i, int) for i in v):
            return str(tuple(v))
        return str(v)
    return ", ".join(f"{k}={show(v)}" for k, v in params.items() if k not in skip)


def _cases(*param_dicts):
    return [Case(dict(p), label=_label(p)) for p in param_dicts]


def _op_cases(op, *shapes):
    return _cases(*({"op": op, "seed": i, **s} for i, s in enumerate(shapes)))


def _op_test(op, points, *shapes):
    return Test(op, points, observe_op, verdict_op, inputs_op, cases=_op_cases(op, *shapes), partial=True)


def _graph_test(name, graph, points, *shapes):
    cases = _cases(*({"graph": graph, "seed": 10 + i, **s} for i, s in enumerate(shapes)))
    return Test(name, points, observe_engine, verdict_engine, inputs_graph, cases=cases, partial=True)


CONV_CASES = [
    {"x": [2, 3, 5, 5], "k": [3, 3], "stride": 1, "padding": 0},
    {"x": [2, 3, 5, 5], "k": [3, 3], "stride": 1, "padding": 1},
    {"x": [1, 2, 7, 6], "k": [3, 2], "stride": 2, "padding": 1},
]


def _conv_cases(extra=None):
    return _cases(*({"seed": 30 + i, **c, **(extra or {})} for i, c in enumerate(CONV_CASES)))


# minigrad's own implementations of what this assignment asks for (dotted names: see autograder/forbidden.py)
FORBIDDEN = [
    "minigrad.ops", "minigrad.nn", "minigrad.optim", "minigrad.functional",
    *(f"minigrad.autograd.{n}" for n in ("engine", "gradcheck", "function", "backward", "grad",
                                          "topological_order", "AccumulateGrad")),
    *(f"minigrad.{n}" for n in ("exp", "log", "sum", "mul", "div", "matmul", "mm", "bmm", "softmax", "log_softmax",
                                "logsumexp", "relu", "reshape", "transpose", "permute", "conv2d", "broadcast_to",
                                "expand")),
    *(f"F.{n}" for n in ("conv2d", "cross_entropy", "nll_loss", "softmax", "log_softmax", "relu", "unfold", "fold")),
    "*.log_softmax", "*.softmax", "*.cross_entropy",
    "torch",
]

# what each part's child leaves out of minigrad (autograder/stubs.py): minigrad's own versions of what the part
# asks for, so no route to them exists while the part is graded. Parts 1, 2 and 4 keep minigrad's engine (it
# runs the student's ops); part 3 keeps minigrad's ops (its graphs are made of them) and loses the engine.
STUBS = {
    "part1": [f"minigrad.ops.elementwise.{n}" for n in ("Mul", "Div", "Exp", "Log")]
             + ["minigrad.ops.nn.activation.ReLU"],
    "part2": ["minigrad.ops.reduce.Sum", "minigrad.ops.reduce.LogSumExp", "minigrad.ops.reduce._expand_back",
              "minigrad.ops.linalg.MatMul", "minigrad.ops.shape.Reshape", "minigrad.ops.shape.Transpose",
              "minigrad.ops.shape.Permute", "minigrad.ops.nn.activation.Softmax",
              "minigrad.ops.nn.activation.LogSoftmax",
              "minigrad.ops.nn.loss", "minigrad.ops.nn.pointwise_loss"],
    "part3": ["minigrad.autograd.engine", "minigrad.autograd.function.AccumulateGrad.accumulate",
              "minigrad.autograd.gradcheck"],
    "part4": ["minigrad.ops.nn.conv", "minigrad.ops.nn.pool._col2im", "minigrad.ops.nn._util.windows"],
}

ASSIGNMENT = Assignment(
    id="a1",
    name="a1_autograd",
    title="Autograd: ops, the backward engine, gradient checking, conv2d via im2col",
    notebook="a1_autograd.ipynb",
    solution="solutions/a1_autograd.ipynb",
    preamble=("import numpy as np\nimport minigrad as mg\nfrom minigrad import Tensor\n"
              "from minigrad.autograd import Function\n"),
    timeout=20,
    memory_mb=2048,
    forbidden=FORBIDDEN,
    summary="forward values vs NumPy; gradients vs float64 central differences; the student's engine on diamonds, "
            "reuse, broadcasting, a deep chain, accumulation (in a child whose minigrad has no engine); conv2d via "
            "im2col",
    parts=[
        Part("part1", "Elementwise ops", cells=["a1-mul", "a1-div", "a1-exp", "a1-log", "a1-relu"],
             names=["Mul", "Div", "Exp", "Log", "ReLU"], stubs=STUBS["part1"],
             objective="forward and backward of elementwise ops: a backward is a vector-Jacobian product",
             tests=[
                 _op_test("Mul", 4, {"a": [3, 4], "b": [3, 4]}, {"a": [3, 4], "b": [4]}, {"a": [2, 3], "b": []}),
                 _op_test("Div", 4, {"a": [3, 4], "b": [3, 4]}, {"a": [2, 1, 3], "b": [4, 1]}),
                 _op_test("Exp", 4, {"x": [5]}, {"x": [2, 3, 2]}),
                 _op_test("Log", 4, {"x": [5]}, {"x": [3, 4]}),
                 _op_test("ReLU", 4, {"x": [6]}, {"x": [3, 5]}),
             ]),
        Part("part2", "Broadcasting, reductions, matrices, softmax",
             cells=["a1-unbroadcast", "a1-sum", "a1-matmul", "a1-shape", "a1-softmax", "a1-cross-entropy"],
             names=["unbroadcast", "Sum", "MatMul", "Reshape", "Transpose", "Softmax", "LogSoftmax",
                    "cross_entropy"], stubs=STUBS["part2"],
             objective="gradients have their input's shape: un-broadcasting, reductions, batched matmul",
             tests=[
                 Test("unbroadcast", 4, observe_unbroadcast, verdict_unbroadcast, inputs_unbroadcast,
                      partial=True, stubs=["minigrad.autograd.engine.unbroadcast"], cases=_cases(
                          {"seed": 0, "grad": [2, 3, 4], "shape": [3, 1]},
                          {"seed": 1, "grad": [3, 4], "shape": [4]},
                          {"seed": 2, "grad": [2, 5], "shape": [1, 5]},
                          {"seed": 3, "grad": [3, 2], "shape": []}) + [
                          Case({"seed": 4, "grad": [2, 3], "shape": [2, 3]}, label="grad=(2, 3), shape=(2, 3)",
                               trivial=True)]),        # returning grad as it is passes this one
                 _op_test("Sum", 5, {"x": [3, 4], "dim": None, "keepdim": False},
                          {"x": [3, 3], "dim": 1, "keepdim": False},
                          {"x": [2, 3, 4], "dim": 0, "keepdim": True},
                          {"x": [2, 3, 4], "dim": [0, 2], "keepdim": False},
                          {"x": [3, 4], "dim": -1, "keepdim": True}),
                 _op_test("MatMul", 5, {"a": [3, 4], "b": [4, 2]}, {"a": [2, 3, 4], "b": [2, 4, 5]},
                          {"a": [2, 3, 4], "b": [4, 2]}),
                 _op_test("Reshape", 2, {"x": [2, 3, 4], "shape": [6, 4]}, {"x": [3, 4], "shape": [2, -1, 3]}),
                 _op_test("Transpose", 2, {"x": [3, 4], "dim0": 0, "dim1": 1},
                          {"x": [2, 3, 4], "dim0": 0, "dim1": 2}),
                 _op_test("Softmax", 4, {"x": [3, 5], "dim": 1}, {"x": [4, 3], "dim": 0},
                          {"x": [2, 4], "dim": -1, "scale": 1000.0}),
                 _op_test("LogSoftmax", 4, {"x": [3, 5], "dim": 1}, {"x": [2, 3, 4], "dim": 1},
                          {"x": [2, 4], "dim": -1, "scale": 1000.0}),
                 _op_test("cross_entropy", 4, {"logits": [5, 4]}, {"logits": [8, 3], "scale": 3.0}),
             ]),
        Part("part3", "The backward engine and a gradient checker", cells=["a1-engine", "a1-numgrad"],
             names=["backward", "numerical_grad"], stubs=STUBS["part3"],
             objective="topological order, summing over paths, un-broadcasting, accumulation; central "
                       "differences",
             tests=[
                 _graph_test("engine: diamond", "diamond", 5, {"x": [4], "w": [4], "scale": 0.5},
                             {"x": [2, 3], "w": [3], "scale": 0.5}),
                 _graph_test("engine: reuse", "reuse", 4, {"x": [5]}),
                 _graph_test("engine: broadcasting", "broadcast", 5,
                             {"x": [4, 3], "b": [3], "c": [4, 1], "s": []}),
                 _graph_test("engine: deep chain", "chain", 4, {"x": [3], "n": 1200}),
                 _graph_test("engine: non-scalar output", "nonscalar", 3, {"x": [2, 3], "w": [3], "upstream": True}),
                 Test("engine: accumulation", 4, observe_accumulation, verdict_accumulation, inputs_accumulation,
                      cases=_cases({"seed": 20, "x": [4]}, {"seed": 21, "x": [2, 3]}), partial=True),
                 Test("numerical_grad", 5, observe_numerical_grad, verdict_numerical_grad, inputs_x, partial=True,
                      cases=_cases({"seed": 21, "x": [5], "f": "sin(x)*x^2"},
                                   {"seed": 22, "x": [3, 4], "f": "logsumexp"},
                                   {"seed": 23, "x": [4], "f": "sin(x)*x^2", "dtype": "float32"})),
             ]),
        Part("part4", "conv2d via im2col", cells=["a1-im2col", "a1-conv2d"], names=["im2col", "col2im", "Conv2d"],
             stubs=STUBS["part4"],
             objective="a convolution as one GEMM; its backward as a GEMM plus col2im, the adjoint of im2col",
             tests=[
                 Test("im2col", 5, observe_im2col, verdict_im2col, inputs_conv, cases=_conv_cases(), partial=True),
                 Test("col2im", 5, observe_col2im, verdict_col2im, inputs_conv, cases=_conv_cases(), partial=True),
                 Test("Conv2d forward", 4, observe_conv_forward, verdict_conv_forward, inputs_conv,
                      cases=_conv_cases({"O": 4}), partial=True),
                 Test("Conv2d backward", 6, observe_conv_backward, verdict_conv_backward, inputs_conv,
                      cases=_conv_cases({"O": 3}), partial=True),
             ]),
    ],
)
