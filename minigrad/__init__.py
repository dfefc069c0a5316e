"""minigrad: a teaching-grade deep-learning framework on NumPy (and CuPy), with PyTorch's names.

    import minigrad as mg
    x = mg.randn(3, 4, requires_grad=True)
    (x @ x.T).relu().sum().backward()
    x.grad
"""
from . import errors
from ._version import __version__  # noqa: F401
from .backend.device import Device, device
from .backend.dtypes import get_default_dtype, set_default_dtype
from .backend.dtypes import (DType, bfloat16, bool_ as bool, double, float, float16, float32, float64, half, int,
                             int8, int16, int32, int64, long, uint8)
from .errors import OutOfMemoryError
from .tensor import Tensor, tensor
from .tensor_base import Size
from . import autograd, cuda
from . import memory  # noqa: E402  (a feature layer: the core never imports it)
from .autograd import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
                       set_grad_enabled)
from .creation import (arange, as_tensor, empty, empty_like, eye, from_numpy, full, full_like, linspace, ones,
                       ones_like, rand, rand_like, randint, randn, randn_like, randperm, zeros, zeros_like)
from .creation import multinomial
from .ops import (abs, add, all, allclose, amax, amin, any, argmax, argmin, bmm, broadcast_to, cat, chunk,
                  clamp, clip, clone, concat, concatenate, cos, cumsum, div, divide, eq, equal, exp, expand,
                  flatten, flip, gather, ge, gt, isfinite, isinf, isnan, le, log, logical_and, logical_not,
                  logical_or, logsumexp, lt, masked_fill, matmul, max, maximum, mean, min, minimum, mm, mul,
                  narrow, ne, neg, norm, one_hot, pad, permute, pow, prod, repeat, reshape, rsqrt, sign, sin, split,
                  sqrt, square, squeeze, stack, std, sub, sum, t, transpose, tril, triu, unflatten,
                  unsqueeze, var, where)
from .ops import argsort, roll, sort, topk
from .ops import (addmm, arctan2, atan2, baddbmm, bincount, diag, diagonal, einsum, erf, erfc, ger, index_select,
                  isclose, lerp, nonzero, outer, repeat_interleave, scatter, std_mean, trace, unique, var_mean)
from .ops.nn.activation import log_softmax, relu, sigmoid, softmax, tanh  # torch.* has them too
from . import nn, optim, utils, datasets  # noqa: E402  (features on top of the core)
from . import distributed  # noqa: E402  (mpi4py / CuPy are imported only when a process group starts)
from . import profiler  # noqa: E402  (a feature: times ops through the extension points)
from .compiler import compile  # noqa: E402,A004  (a function, as torch.compile; shadows the builtin only here)
from .serialization import CheckpointError, load, save  # noqa: E402
from .safetensors_io import load_safetensors, save_safetensors  # noqa: E402  (the library is imported on use)
from . import inference  # noqa: E402  (KV cache, paged pool, continuous batching, int8 weights)
from . import amp  # noqa: E402  (a feature layer)
from .amp import autocast  # noqa: E402
from .cuda import amp as _cuda_amp  # noqa: E402,F401  (mg.cuda.amp: PyTorch's deprecated aliases)
from .nn import parallel as _nn_parallel  # noqa: E402,F401  (mg.nn.parallel.DistributedDataParallel)
from . import accelerator, backends  # noqa: E402  (PyTorch's device questions and library switches)
from .legacy import (BoolTensor, ByteTensor, CharTensor, DoubleTensor, FloatTensor, HalfTensor,  # noqa: E402
                     IntTensor, LongTensor, ShortTensor)
from . import func  # noqa: E402  (function transforms: grad, vjp, jvp, jacrev, jacfwd, hessian, vmap)
from . import hub, jit, special  # noqa: E402  (torch.hub on local folders, torch.jit's decorators, torch.special)
from ._tensor_str import get_printoptions, set_printoptions  # noqa: E402
from .random import Generator, default_generator, initial_seed, manual_seed, seed, get_rng_state, set_rng_state


def is_tensor(obj):
    return isinstance(obj, Tensor)


def numel(t):
    return t.numel()
