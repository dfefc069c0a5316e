"""Clearing accumulated gradients, shared by ``Module.zero_grad`` and ``Optimizer.zero_grad``."""


def zero_grad(params, set_to_none=True):
    """Reset each parameter's ``.grad``: to None (frees the memory, PyTorch's default) or to zeros in place."""
    for p in params:
        if p.grad is None:
            continue
        if set_to_none:
            p.grad = None
        else:
            p.grad.grad_fn = None
            p.grad.array[...] = 0
            p.grad._version_counter.bump()
