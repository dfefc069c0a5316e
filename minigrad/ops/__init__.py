"""The op library as functions (``mg.add``, ``mg.sum``...), one module per family.

Each public function sits right under its Function in its family's module (``elementwise``, ``compare``,
``reduce``, ``linalg``, ``shape``, ``indexing``, ``transfer``, ``inplace``; the ``nn.functional`` ops in
``ops/nn/``): it validates and normalises the arguments, then calls ``Function.apply``. This package only
gathers them, for ``minigrad``'s namespace, Tensor's methods and ``tensor.py``.
"""
from ._args import as_tensor_like, norm_dim as _norm_dim  # noqa: F401  (Tensor.__rmatmul__, Tensor.stride)
from .compare import (all, allclose, any, isclose, eq, equal, equal_elementwise, floor_divide, ge, greater, greater_equal,
                      gt, isfinite, isinf, isnan, le, less, less_equal, logical_and, logical_not, logical_or,
                      logical_xor, lt, ne, not_equal, remainder, sign)
from .elementwise import (abs, add, cast, clamp, clip, clone, cos, div, divide, exp, log, maximum, minimum, mul,
                          neg, negative, pow, rdiv, rpow, rsqrt, rsub, sin, sqrt, square, sub, true_divide, where)
from .indexing import gather, getitem, index_select, masked_fill, nonzero, one_hot, repeat_interleave, scatter
from .inplace import copy_, fill_, fill_diagonal_, inplace, random_fill_, scatter_, setitem_
from .linalg import addmm, baddbmm, bmm, diag, diagonal, einsum, ger, matmul, mm, outer, trace
from .reduce import (MaxResult, MinResult, amax, amin, argmax, argmin, cumsum, logsumexp, max, mean, min, norm,
                     prod, std, std_mean, sum, var, var_mean)
from .shape import (broadcast_to, cat, chunk, concat, concatenate, expand, expand_as, flatten, flip, narrow, pad,
                    permute, repeat, reshape, split, squeeze, stack, swapaxes, t, transpose, tril, triu, unflatten,
                    unsqueeze, view)
from .shape import roll
from .sort import SortResult, TopkResult, argsort, bincount, sort, topk, unique
from .pointwise import arctan2, atan2, erf, erfc, lerp
from .transfer import to_device
