"""Selective activation checkpointing: a policy names the ops whose outputs are kept, not recomputed.

PyTorch's names and shape (``torch.utils.checkpoint.create_selective_checkpoint_contexts``)::

    policy = create_selective_checkpoint_contexts(["linear", "matmul"])   # keep GEMM outputs
    y = checkpoint(block, x, context_fn=lambda: policy)

or a function ``policy_fn(ctx, op, *args, **kwargs) -> CheckpointPolicy`` where ``op`` is the op's
``Function`` class (``op.name`` is its name: ``"linear"``, ``"relu"``...). Differences from PyTorch, on
purpose: the policy is asked once per op during the forward (``ctx.is_recompute`` is always False) and
its answer is replayed during the recomputation, so the forward and the recomputation cannot disagree;
``PREFER_*`` behave as ``MUST_*`` (minigrad has no compiler to overrule them).
"""
import enum


class CheckpointPolicy(enum.Enum):
    """What to do with one op's output inside a checkpointed region."""
    MUST_SAVE = 0
    PREFER_SAVE = 1
    MUST_RECOMPUTE = 2
    PREFER_RECOMPUTE = 3

    @property
    def saves(self):
        return self in (CheckpointPolicy.MUST_SAVE, CheckpointPolicy.PREFER_SAVE)


class SelectiveCheckpointContext:
    """The ``ctx`` a policy function receives."""

    def __init__(self, is_recompute=False):
        self.is_recompute = is_recompute


class _PolicyContext:
    """One of the two context managers ``create_selective_checkpoint_contexts`` returns. Entering it does
    nothing by itself: ``checkpoint`` recognises it and hands its policy to the frame."""

    def __init__(self, policy, is_recompute, allow_mutation):
        self.policy = policy
        self.is_recompute = is_recompute
        self.allow_mutation = allow_mutation

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _list_policy(ops):
    names = set()
    for op in ops:
        name = op if isinstance(op, str) else getattr(op, "name", None)
        if not isinstance(name, str):
            raise TypeError(f"create_selective_checkpoint_contexts: expected op names or Function classes, "
                            f"got {op!r}")
        names.add(name)

    def policy(ctx, op, *args, **kwargs):
        return CheckpointPolicy.MUST_SAVE if op.name in names else CheckpointPolicy.PREFER_RECOMPUTE
    return policy


def create_selective_checkpoint_contexts(policy_fn_or_list, allow_cache_entry_mutation=False):
    """``(forward context, recompute context)`` carrying a policy, for ``checkpoint(context_fn=...)``.

    ``policy_fn_or_list``: a list of ops to keep (names such as ``"linear"`` or Function classes), or a
    function ``(ctx, op, *args, **kwargs) -> CheckpointPolicy``. A kept output modified in place after
    the forward makes the backward raise, unless ``allow_cache_entry_mutation``.
    """
    if isinstance(policy_fn_or_list, (list, tuple, set, frozenset)):
        policy = _list_policy(policy_fn_or_list)
    elif callable(policy_fn_or_list):
        policy = policy_fn_or_list
    else:
        raise TypeError(f"create_selective_checkpoint_contexts: policy_fn_or_list must be a list of ops or "
                        f"a callable, got {type(policy_fn_or_list).__name__}")
    allow = bool(allow_cache_entry_mutation)
    return _PolicyContext(policy, False, allow), _PolicyContext(policy, True, allow)


def decide(policy, op, args, kwargs):
    """Ask the policy about one op; a clear error when it answers something else than a policy."""
    answer = policy(SelectiveCheckpointContext(False), op, *args, **kwargs)
    if isinstance(answer, bool):            # PyTorch accepts True/False as MUST_SAVE/PREFER_RECOMPUTE
        answer = CheckpointPolicy.MUST_SAVE if answer else CheckpointPolicy.PREFER_RECOMPUTE
    if not isinstance(answer, CheckpointPolicy):
        raise TypeError(f"checkpoint: the selective policy returned {answer!r} for op {op.name!r}; "
                        f"expected a CheckpointPolicy")
    return answer.saves
