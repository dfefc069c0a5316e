"""a1_autograd: the student rebuilds minigrad's autograd, graded against float64 central differences.

  part1  Mul, Div, Exp, Log, ReLU                 Functions: forward + backward (a VJP per input)
  part2  unbroadcast, Sum, MatMul, Reshape,       shapes: broadcasting, reductions, batched matmul,
         Transpose, Softmax, LogSoftmax,          numerically stable softmax, and a loss composed of
         cross_entropy                            the student's ops
  part3  backward(output, grad), numerical_grad   the engine (topological order, sums over paths,
                                                  un-broadcasting, accumulation) and a gradient checker
  part4  im2col, col2im, Conv2d                   conv2d as one GEMM; col2im is im2col's adjoint

How each part is judged (in the parent; the child only runs the student's code and returns arrays):
- ops (parts 1, 2 and Conv2d): the child builds float64 leaf Tensors, calls ``Op.apply`` and runs
  minigrad's own engine with a random upstream gradient, so only the student's forward/backward are
  under test. The parent compares the output with NumPy (or minigrad, for convolutions) and each
  input's gradient with ``numeric_vjp`` of that reference.
- the engine (part 3): the child builds graphs from *minigrad's* ops (so part 3 never depends on the
  student's parts 1 and 2) and runs the student's ``backward`` on them, in a child whose minigrad has no
  engine (``STUBS``: each part's child leaves out minigrad's versions of what the part asks for); the same
  graph functions, run on NumPy arrays in the parent, give the numeric gradient.
- im2col/col2im: the reference im2col is a minigrad convolution with one-hot kernels; col2im is checked
  as its vector-Jacobian product.

No solution code lives here (students can read this file: `check()` imports it): every expected value
comes from a NumPy formula, a minigrad op in the parent, or central differences.

Modules: ``ops`` (parts 1 and 2), ``engine`` (part 3), ``conv`` (part 4) and ``assignment`` (the spec).
This package's namespace is what the autograder and the child look up by name.
"""
from .assignment import ASSIGNMENT, FORBIDDEN
from .conv import observe_col2im, observe_conv_backward, observe_conv_forward, observe_im2col
from .engine import GRAPHS, observe_accumulation, observe_engine, observe_numerical_grad
from .ops import OP_INPUTS, observe_op, observe_unbroadcast

__all__ = ["ASSIGNMENT", "FORBIDDEN", "GRAPHS", "OP_INPUTS", "observe_accumulation", "observe_col2im",
           "observe_conv_backward", "observe_conv_forward", "observe_engine", "observe_im2col",
           "observe_numerical_grad", "observe_op", "observe_unbroadcast"]
