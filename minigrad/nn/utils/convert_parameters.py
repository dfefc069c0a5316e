"""parameters_to_vector / vector_to_parameters: all parameters as one flat vector, and back."""
from ... import ops
from ...autograd.grad_mode import no_grad
from ...errors import ShapeError
from ...tensor import Tensor


def parameters_to_vector(parameters):
    """One 1-D tensor concatenating every parameter (differentiable)."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return ops.cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of ``vec`` into ``parameters`` (in place, no graph)."""
    if not isinstance(vec, Tensor) or vec.ndim != 1:
        raise ShapeError(f"vector_to_parameters: expected a 1-D tensor, got "
                         f"{tuple(vec.shape) if isinstance(vec, Tensor) else type(vec).__name__}")
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    parameters = list(parameters)
    total = sum(p.numel() for p in parameters)
    if vec.numel() != total:
        raise ShapeError(f"vector_to_parameters: vector has {vec.numel()} elements, parameters need {total}")
    offset = 0
    with no_grad():
        for p in parameters:
            n = p.numel()
            p.array[...] = vec.array[offset:offset + n].reshape(p.shape)
            p._version_counter.bump()
            offset += n
