"""GradScaler: dynamic loss scaling, PyTorch's rules and names.

Small gradients underflow float16 (below 2**-24 they are zero). Multiplying the loss by a large ``scale``
multiplies every gradient by it, lifting them into float16's range; ``step`` divides it out again
("unscale") before the optimizer sees the gradients. Too large a scale overflows (inf/NaN gradients):
then the step is skipped and the scale shrinks. The rule ``update`` applies after every step::

    if any gradient had inf/NaN:  scale *= backoff_factor (0.5), growth_tracker = 0   (and the step was skipped)
    else:                          growth_tracker += 1
                                   if growth_tracker == growth_interval: scale *= growth_factor (2), tracker = 0

Usage, as in PyTorch::

    scaler = mg.amp.GradScaler()
    with mg.autocast(device_type="cpu"):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)                    # optional: clip_grad_norm_ then sees the true gradients
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)                        # skipped (returns None) if a gradient is inf/NaN
    scaler.update()

Differences from PyTorch: the scale is a Python float on the host, not a one-element device tensor (the
inf check already syncs once per device per step). ``device`` defaults to None: one scaler serves the
gradients of every device (PyTorch's default is 'cuda', which disables the scaler on a machine without a
GPU, while the course uses loss scaling on the CPU). As in PyTorch, ``GradScaler('cuda')`` (and
``mg.cuda.amp.GradScaler()``) on a machine without a usable GPU warns and disables itself. The inf flags stay on
each device until all its gradients are checked (one fused pass per gradient on GPU: unscale and check in
one read, ``cuda_kernels.amp_unscale_``), then each device is read once.
"""
import enum
import warnings

import numpy as np

from ..backend import cuda as _backend_cuda
from ..backend.device import get_backend
from ..errors import ArgumentError, DTypeError, MinigradError


class OptState(enum.Enum):
    """Where one optimizer is in the iteration (PyTorch's ``OptState``): unscale_ and step move it on,
    update() starts the next iteration at READY."""
    READY = 0
    UNSCALED = 1
    STEPPED = 2


READY, UNSCALED, STEPPED = OptState.READY, OptState.UNSCALED, OptState.STEPPED


class GradScalerError(MinigradError, RuntimeError):
    """Calls out of order (unscale_ twice, step twice without update)."""


class GradScaler:
    def __init__(self, device=None, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        if not growth_factor > 1.0:
            raise ArgumentError(f"GradScaler: growth_factor must be > 1, got {growth_factor}")
        if not 0.0 < backoff_factor < 1.0:
            raise ArgumentError(f"GradScaler: backoff_factor must be in (0, 1), got {backoff_factor}")
        if not (isinstance(growth_interval, int) and growth_interval > 0):
            raise ArgumentError(f"GradScaler: growth_interval must be a positive int, got {growth_interval!r}")
        if not init_scale > 0:
            raise ArgumentError(f"GradScaler: init_scale must be > 0, got {init_scale}")
        self._device = device
        self._enabled = bool(enabled) and _scaler_usable(device)
        self._scale = float(init_scale)
        self._growth_factor, self._backoff_factor = float(growth_factor), float(backoff_factor)
        self._growth_interval = growth_interval
        self._growth_tracker = 0
        self._per_optimizer = {}  # id(optimizer) -> {"stage": ..., "found_inf": bool}

    # --- the loss side ------------------------------------------------------------------------------
    def scale(self, outputs):
        """``outputs * scale`` (a tensor, or a list/tuple of tensors); unchanged when disabled."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        if not hasattr(outputs, "array"):
            raise ArgumentError(f"GradScaler.scale: expected a Tensor or a list/tuple of Tensors, got "
                                f"{type(outputs).__name__}")
        return outputs * self._scale

    def get_scale(self):
        return self._scale if self._enabled else 1.0

    def is_enabled(self):
        return self._enabled

    # --- the optimizer side -------------------------------------------------------------------------
    def _state(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer), {"stage": READY, "found_inf": False})

    def unscale_(self, optimizer):
        """Divide ``optimizer``'s gradients by the scale, in place, and record whether any is inf/NaN.

        At most once per optimizer between ``update()`` calls (``step`` calls it if you did not)."""
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state["stage"] is UNSCALED:
            raise GradScalerError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] is STEPPED:
            raise GradScalerError("unscale_() is being called after step().")
        state["found_inf"] = _unscale_grads(optimizer, 1.0 / self._scale)
        state["stage"] = UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """Unscale (if not done yet) and run ``optimizer.step(*args, **kwargs)`` unless a gradient is inf/NaN;
        returns the step's return value, or None when the step was skipped."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs or args:
            raise GradScalerError("Closure use is not currently supported if GradScaler is enabled "
                                  "(as in PyTorch: the closure's backward would need its own inf check).")
        state = self._state(optimizer)
        if state["stage"] is STEPPED:
            raise GradScalerError("step() has already been called since the last update().")
        if state["stage"] is READY:
            self.unscale_(optimizer)
        state["stage"] = STEPPED
        if state["found_inf"]:
            return None
        return optimizer.step()

    def update(self, new_scale=None):
        """Adjust the scale from this iteration's inf checks (all optimizers), or set it to ``new_scale``."""
        if not self._enabled:
            return
        if new_scale is not None:
            if hasattr(new_scale, "item"):
                new_scale = new_scale.item()
            self._scale = float(new_scale)
        else:
            if not self._per_optimizer:
                raise GradScalerError("update(): no inf checks were recorded prior to this call "
                                      "(call step() or unscale_() first).")
            if any(s["found_inf"] for s in self._per_optimizer.values()):
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    self._scale *= self._growth_factor
                    self._growth_tracker = 0
        self._per_optimizer = {}

    # --- checkpoints --------------------------------------------------------------------------------
    def state_dict(self):
        """PyTorch's keys; saved with ``mg.save`` like any dict of numbers."""
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise ArgumentError("GradScaler.load_state_dict: the state dict is empty (it was saved from a "
                                "disabled GradScaler)")
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])

    def __repr__(self):
        return (f"GradScaler(scale={self.get_scale()}, growth_tracker={self._growth_tracker}, "
                f"enabled={self._enabled})")


def _scaler_usable(device):
    """PyTorch's rule: a scaler meant for 'cuda' on a machine without a usable GPU warns and disables
    itself (the program then trains in float32, where no loss scaling is needed)."""
    if device is None or str(device).split(":")[0] != "cuda" or _backend_cuda.probe()[0] is not None:
        return True
    warnings.warn("GradScaler is enabled, but CUDA is not available.  Disabling.", UserWarning, stacklevel=3)
    return False


def _unscale_grads(optimizer, inv_scale):
    """Unscale every gradient of ``optimizer`` in place; True if any is inf/NaN. Gradients are grouped by
    device: a device with fused kernels (CuPy) gets one kernel per gradient and one flag read at the end."""
    by_device = {}
    for group in optimizer.param_groups:
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            if g.array.dtype.itemsize < 4:
                raise DTypeError("GradScaler: attempting to unscale float16 gradients. Keep parameters in "
                                 "float32 (autocast casts on the fly), or give the optimizer float32 master "
                                 "copies (mg.amp.master_weights).")
            by_device.setdefault(str(g.device), (g.device, []))[1].append(g.array)
    found = False
    for device, grads in by_device.values():
        found |= unscale_on_device(device, grads, inv_scale)
    return found


def unscale_on_device(device, grads, inv_scale):
    """``g *= inv_scale`` for arrays on one device; returns whether any result is inf/NaN."""
    be = get_backend(device)
    fused = getattr(be.fused, "amp_unscale_", None)
    xp = be.xp
    if fused is not None:
        flag = be.empty((1,), np.int32)        # on the gradients' device (the backend selects it)
        flag[...] = 0
        fused(grads, inv_scale, flag)
        return bool(int(be.to_host(flag)[0]))   # the one device-to-host read of this device
    found = False
    for g in grads:
        g *= g.dtype.type(inv_scale)
        if not found and not bool(xp.isfinite(g).all()):
            found = True
    return found
