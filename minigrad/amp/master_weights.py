"""Float32 master weights for a model converted to float16 with ``.half()`` (the design before autocast).

A float16 parameter cannot take small updates: near 1.0 float16's spacing is 2**-10 ~ 1e-3, so
``p - lr * g`` with ``lr * g`` below half of that rounds back to ``p`` and training stalls. The remedy
(Micikevicius et al., 2018): the optimizer updates float32 *master* copies, and the float16 model gets the
rounded masters after each step. Forward and backward run in float16 (half the memory of every tensor,
parameters included); the optimizer state is float32, sized like the masters.

    model = build().half()
    mw = mg.amp.master_weights(model)               # float32 copies of every float16 parameter
    opt = optim.SGD(mw.parameters(), lr=0.1)        # the optimizer only ever sees the masters
    scaler = mg.amp.GradScaler()
    loss = loss_fn(model(x.half()).float(), y)
    scaler.scale(loss).backward()                   # float16 gradients on the model
    mw.step(opt, scaler)                            # widen grads into the masters, unscale + inf check,
    scaler.update()                                 #   step the masters, round them into the model

PyTorch's autocast keeps float32 parameters and casts on the fly instead (``mg.autocast``); the lecture
compares both. Param groups: ``mw.masters(params)`` maps model parameters to their masters.
"""
from ..backend.device import get_backend
from ..errors import ArgumentError
from ..nn.parameter import Parameter
from ..tensor import Tensor


def _cast_copy(dst, src, device):
    """dst[...] = src in dst's dtype, in place (one fused kernel on GPU)."""
    be = get_backend(device)
    fused = getattr(be.fused, "amp_cast_copy_", None)
    if fused is not None:
        fused(dst, src)
    else:
        be.xp.copyto(dst, src, casting="unsafe")


class master_weights:
    """Float32 master copies of a module's (or an iterable's) floating parameters, kept in step."""

    def __init__(self, params):
        params = list(params.parameters() if hasattr(params, "parameters") else params)
        if not params:
            raise ArgumentError("master_weights: got no parameters")
        self.model_params, self._masters = [], []
        for p in params:
            if not isinstance(p, Tensor) or not p.is_floating_point():
                raise ArgumentError(f"master_weights: expected floating tensors, got "
                                    f"{getattr(p, 'dtype', type(p).__name__)}")
            master = Parameter(p.detach().to("float32", copy=True))
            self.model_params.append(p)
            self._masters.append(master)
        self._index = {id(p): i for i, p in enumerate(self.model_params)}

    def parameters(self):
        """The float32 masters, in the model's parameter order: give these to the optimizer."""
        return list(self._masters)

    def masters(self, model_params):
        """The masters of ``model_params`` (for param groups)."""
        try:
            return [self._masters[self._index[id(p)]] for p in model_params]
        except KeyError:
            raise ArgumentError("master_weights.masters: a parameter is not one of this helper's") from None

    def zero_grad(self, set_to_none=True):
        for p in self.model_params + self._masters:
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                p.grad.array[...] = 0

    def grads_to_master(self):
        """Widen each model gradient into its master's ``.grad`` (allocated once, reused); the model's
        float16 gradients are released."""
        for p, m in zip(self.model_params, self._masters):
            if p.grad is None:
                m.grad = None
                continue
            if m.grad is None:
                m.grad = Tensor._make(get_backend(m.device).empty(m.array.shape, m.array.dtype), m.device)
            _cast_copy(m.grad.array, p.grad.array, m.device)
            p.grad = None

    def master_to_model(self):
        """Round the masters into the model's parameters, in place."""
        for p, m in zip(self.model_params, self._masters):
            _cast_copy(p.array, m.array, p.device)
            p._version_counter.bump()

    def step(self, optimizer, scaler=None):
        """``grads_to_master``, ``scaler.step(optimizer)`` (or ``optimizer.step()``), ``master_to_model``;
        returns the step's result (None when the scaler skipped it: then the model is left untouched)."""
        self.grads_to_master()
        if scaler is None:
            out = optimizer.step()
        else:
            out = scaler.step(optimizer)
            if scaler.is_enabled() and scaler._state(optimizer)["found_inf"]:
                return None
        self.master_to_model()
        return out
