"""Activation checkpointing: trade compute for memory (PyTorch's ``torch.utils.checkpoint``).

``checkpoint(fn, *args)`` runs ``fn`` keeping only its inputs; the activations its ops would save for
backward are recomputed during backward, by running ``fn`` again. Memory for the region drops from all
its activations to its inputs, for the price of one more forward of the region. ``checkpoint_sequential``
cuts a chain of modules into segments (Chen et al., 2016: ``sqrt(n)`` segments of ``sqrt(n)`` layers keep
``O(sqrt(n))`` activations for one extra forward). Selective recomputation keeps the outputs of chosen
ops (say, the GEMMs) and recomputes only the rest (cheap elementwise ops)::

    from minigrad.utils.checkpoint import checkpoint, checkpoint_sequential
    y = checkpoint(block, x)                       # block's activations recomputed in backward
    y = checkpoint_sequential(model, 6, x)         # a Sequential in 6 segments
    keep = create_selective_checkpoint_contexts(["linear"])
    y = checkpoint(block, x, context_fn=lambda: keep)

How it works (the *non-reentrant* variant, the only one here): saved-tensor hooks
(``minigrad/autograd/extensions.py``) replace each saved array by a handle; see ``_checkpoint/frame.py``.
Random ops replay their numbers: the state of the default generator (which serves every device: minigrad
draws random numbers on the host) and of every explicit ``Generator`` the region uses is restored for the
recomputation, so dropout gives identical results with and without checkpointing. An input modified in
place between the forward and the backward raises ``InplaceModificationError`` instead of giving a
silently wrong gradient.

Differences from PyTorch, on purpose: ``use_reentrant=True`` is refused (the reentrant variant breaks
``autograd.grad`` and inputs without grad; PyTorch itself recommends ``False``); ``fn`` must return at
least one Tensor (a region with nothing to backpropagate through is a mistake); there is no
``determinism_check`` switch: shapes and dtypes of recomputed tensors are always checked.
"""
import contextlib

from ..autograd import grad_mode
from ..errors import ArgumentError
from ..tensor import Tensor
from ._checkpoint.frame import Frame, RecomputationError
from ._checkpoint.selective import (CheckpointPolicy, SelectiveCheckpointContext,
                                    create_selective_checkpoint_contexts)


def checkpoint(function, *args, use_reentrant=None, context_fn=None, preserve_rng_state=True, **kwargs):
    """``function(*args, **kwargs)``, its activations recomputed during backward instead of kept.

    ``preserve_rng_state``: replay the random numbers of the forward in the recomputation (dropout
    masks); ``False`` is faster when ``function`` draws nothing. ``context_fn``: returns two context
    managers entered around the forward and around the recomputation; pass the pair from
    ``create_selective_checkpoint_contexts`` for selective recomputation. Under ``no_grad`` this is a
    plain call.
    """
    if use_reentrant:
        raise ArgumentError("checkpoint: use_reentrant=True is not supported; minigrad implements the "
                            "non-reentrant variant (use_reentrant=False), which PyTorch recommends")
    if not callable(function):
        raise TypeError(f"checkpoint: function must be callable, got {type(function).__name__}")
    if not grad_mode.is_grad_enabled():
        return function(*args, **kwargs)
    forward_ctx, recompute_ctx = _contexts(context_fn)
    policy = getattr(forward_ctx, "policy", None)
    frame = Frame(function, args, kwargs, preserve_rng_state, policy,
                  getattr(forward_ctx, "allow_mutation", False), recompute_ctx)
    with forward_ctx:
        out = frame.run_forward(args)
    if not _has_tensor(out):
        raise TypeError(f"checkpoint: {_name(function)} returned {type(out).__name__}, which holds no "
                        f"Tensor; a checkpointed function must return a Tensor (or a tuple/list/dict "
                        f"holding some) for backward to recompute it")
    return out


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Run ``functions`` (a ``Sequential`` or a list of modules/callables) on ``input`` in ``segments``
    pieces, checkpointing all but the last (PyTorch's semantics).

    Each checkpointed segment has ``len(functions) // segments`` functions; the last segment takes the
    rest and runs normally, since its activations are needed right away by backward. ``kwargs`` go to
    ``checkpoint`` (``preserve_rng_state``, ``context_fn``).
    """
    functions = _as_list(functions)
    if isinstance(segments, bool) or not isinstance(segments, int) or not 1 <= segments <= len(functions):
        raise ArgumentError(f"checkpoint_sequential: segments must be an int between 1 and the number of "
                            f"functions ({len(functions)}), got {segments!r}")
    size = len(functions) // segments
    end = 0
    for start in range(0, size * (segments - 1), size):
        end = start + size
        input = checkpoint(_run_segment(functions, start, end), input, use_reentrant=use_reentrant, **kwargs)
    return _run_segment(functions, end, len(functions))(input)


def _run_segment(functions, start, end):
    def segment(x):
        for f in functions[start:end]:
            x = f(x)
        return x
    segment.__qualname__ = f"segment[{start}:{end}]"
    return segment


def _as_list(functions):
    children = getattr(functions, "children", None)
    functions = list(children()) if callable(children) else list(functions)
    if not functions:
        raise ArgumentError("checkpoint_sequential: no functions to run")
    for f in functions:
        if not callable(f):
            raise TypeError(f"checkpoint_sequential: {type(f).__name__} is not callable")
    return functions


def _contexts(context_fn):
    if context_fn is None:
        return contextlib.nullcontext(), None
    pair = context_fn()
    if not (isinstance(pair, tuple) and len(pair) == 2
            and all(hasattr(c, "__enter__") and hasattr(c, "__exit__") for c in pair)):
        raise TypeError("checkpoint: context_fn must return a pair of context managers (forward, "
                        "recompute), e.g. create_selective_checkpoint_contexts(...)")
    return pair


def _has_tensor(out):
    if isinstance(out, Tensor):
        return True
    if isinstance(out, (tuple, list)):
        return any(_has_tensor(o) for o in out)
    if isinstance(out, dict):
        return any(_has_tensor(o) for o in out.values())
    return False


def _name(fn):
    return getattr(fn, "__qualname__", None) or type(fn).__name__


__all__ = ["CheckpointPolicy", "RecomputationError", "SelectiveCheckpointContext", "checkpoint",
           "checkpoint_sequential", "create_selective_checkpoint_contexts"]
