"""Recurrent layers: RNN, LSTM, GRU (multi-layer, bidirectional, ``batch_first``, dropout between layers)
and their one-step cells RNNCell, LSTMCell, GRUCell, with PyTorch's parameter names, shapes, gate order and
initialisation (every weight and bias ~ U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))), so state dicts map
one to one.

Each step is composed from ops (linear, sigmoid, tanh, mul, add), so autograd differentiates it through time
with no recurrent-specific code. The input projection ``x W_ih^T + b_ih`` of a whole layer is one GEMM over
all time steps; only ``h W_hh^T`` and the gates run step by step. The gates, for x_t's projection
``xproj = x_t W_ih^T + b_ih`` and ``hp = h W_hh^T + b_hh``::

    RNN   h = tanh(xproj + hp)  (or relu)
    LSTM  i, f, g, o = chunks of xproj + hp;  c = sigmoid(f) c + sigmoid(i) tanh(g);  h = sigmoid(o) tanh(c)
          (proj_size > 0: h = h W_hr^T)
    GRU   r, z = sigmoid(chunks of xproj + hp);  n = tanh(xproj_n + r * hp_n);  h = (1 - z) n + z h

Not supported: ``PackedSequence`` inputs (pad the batch and mask the loss instead).
"""
import math
import warnings

from ...creation import zeros
from ...errors import ArgumentError, ShapeError
from ...ops import cat, stack
from .. import functional as F
from .. import init
from ..module import Module
from ._factory import new_param

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


# --- one time step: ``xproj`` is the step's input projection x W_ih^T + b_ih ------------------------------
def rnn_step(xproj, h, w_hh, b_hh, relu=False):
    pre = xproj + F.linear(h, w_hh, b_hh)
    return F.relu(pre) if relu else F.tanh(pre)


def lstm_step(xproj, h, c, w_hh, b_hh, w_hr=None):
    i, f, g, o = (xproj + F.linear(h, w_hh, b_hh)).chunk(4, dim=-1)
    c = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(g)
    h = F.sigmoid(o) * F.tanh(c)
    return (h if w_hr is None else F.linear(h, w_hr)), c


def gru_step(xproj, h, w_hh, b_hh):
    x_r, x_z, x_n = xproj.chunk(3, dim=-1)
    h_r, h_z, h_n = F.linear(h, w_hh, b_hh).chunk(3, dim=-1)
    r = F.sigmoid(x_r + h_r)
    z = F.sigmoid(x_z + h_z)
    n = F.tanh(x_n + r * h_n)
    return n + z * (h - n)            # (1 - z) n + z h


class RNNBase(Module):
    """The shared machinery of RNN, LSTM and GRU: parameters per layer and direction, the time loop."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        for what, value in (("input_size", input_size), ("hidden_size", hidden_size), ("num_layers", num_layers)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ArgumentError(f"{name}: {what} must be a positive int, got {value!r}")
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout <= 1:
            raise ArgumentError(f"{name}: dropout should be a number in range [0, 1] representing the "
                                f"probability of an element being zeroed, got {dropout!r}")
        if not 0 <= proj_size < hidden_size or (proj_size and mode != "LSTM"):
            raise ArgumentError(f"{name}: proj_size must be 0, or (LSTM only) in [1, hidden_size), got {proj_size}")
        if dropout > 0 and num_layers == 1:
            warnings.warn(f"{name}: dropout option adds dropout after all but last recurrent layer, so non-zero "
                          f"dropout expects num_layers greater than 1, but got dropout={dropout} and "
                          f"num_layers={num_layers}", UserWarning, stacklevel=3)
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, proj_size
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size or hidden_size
        kw = dict(device=device, dtype=dtype)
        self._flat_weights_names = []
        for layer in range(num_layers):
            for suffix in ("", "_reverse")[:2 if bidirectional else 1]:
                layer_in = input_size if layer == 0 else real_hidden * self.num_directions
                params = [(f"weight_ih_l{layer}{suffix}", (gate_size, layer_in)),
                          (f"weight_hh_l{layer}{suffix}", (gate_size, real_hidden))]
                if bias:
                    params += [(f"bias_ih_l{layer}{suffix}", (gate_size,)), (f"bias_hh_l{layer}{suffix}", (gate_size,))]
                if proj_size:
                    params.append((f"weight_hr_l{layer}{suffix}", (proj_size, hidden_size)))
                for pname, shape in params:
                    setattr(self, pname, new_param(*shape, **kw))
                    self._flat_weights_names.append(pname)
        self.reset_parameters()

    @property
    def num_directions(self):
        return 2 if self.bidirectional else 1

    def reset_parameters(self, generator=None):
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -bound, bound, generator=generator)

    def flatten_parameters(self):
        """PyTorch packs the weights into one buffer for cuDNN; minigrad has no cuDNN: nothing to do."""

    @property
    def all_weights(self):
        """Per layer and direction, [w_ih, w_hh, b_ih, b_hh(, w_hr)] (PyTorch's order)."""
        per = len(self._flat_weights_names) // (self.num_layers * self.num_directions)
        flat = [getattr(self, n) for n in self._flat_weights_names]
        return [flat[i:i + per] for i in range(0, len(flat), per)]

    def _cell_weights(self, layer, direction):
        suffix = "_reverse" if direction else ""
        get = lambda n: getattr(self, f"{n}_l{layer}{suffix}", None)  # noqa: E731
        return get("weight_ih"), get("bias_ih"), get("weight_hh"), get("bias_hh"), get("weight_hr")

    # --- forward ------------------------------------------------------------------------------------
    def _check_input(self, input):
        name = type(self).__name__
        if getattr(input, "ndim", None) not in (2, 3):
            raise ShapeError(f"{name}: expected a 2-D (unbatched) or 3-D (batched) input, got "
                             f"{getattr(input, 'shape', type(input).__name__)}")
        if input.shape[-1] != self.input_size:
            raise ShapeError(f"{name}: input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                             f"got {input.shape[-1]}")

    def _check_hidden(self, hx, batch, size, what):
        expected = (self.num_layers * self.num_directions,) + ((batch,) if batch is not None else ()) + (size,)
        if tuple(hx.shape) != expected:
            raise ShapeError(f"{type(self).__name__}: expected {what} size {expected}, got {tuple(hx.shape)}")

    def forward(self, input, hx=None):
        if type(input).__name__ == "PackedSequence":
            raise ArgumentError(f"{type(self).__name__}: PackedSequence inputs are not supported in minigrad; "
                                f"pass the padded batch and mask the padded positions in the loss")
        self._check_input(input)
        batched = input.ndim == 3
        x = input if batched else input.unsqueeze(1)            # (L, N, H_in) from here on
        if batched and self.batch_first:
            x = x.transpose(0, 1)
        N = x.shape[1]
        states = self._initial_states(hx, N, batched, x)
        out, finals = x, []
        for layer in range(self.num_layers):
            if layer > 0 and self.dropout > 0 and self.training:
                out = F.dropout(out, self.dropout)
            outs = []
            for direction in range(self.num_directions):
                k = layer * self.num_directions + direction
                seq, final = self._run_direction(out, [s[k] for s in states], layer, direction)
                outs.append(seq)
                finals.append(final)
            out = outs[0] if len(outs) == 1 else cat(outs, dim=-1)
        h_n = [stack([f[i] for f in finals]) for i in range(len(states))]
        if not batched:
            out, h_n = out.squeeze(1), [h.squeeze(1) for h in h_n]
        elif self.batch_first:
            out = out.transpose(0, 1)
        return out, (tuple(h_n) if self.mode == "LSTM" else h_n[0])

    def _initial_states(self, hx, N, batched, x):
        """[h0] (or [h0, c0] for LSTM), each (layers * directions, N, size)."""
        real_hidden = self.proj_size or self.hidden_size
        sizes = [real_hidden, self.hidden_size] if self.mode == "LSTM" else [real_hidden]
        if hx is None:
            return [zeros(self.num_layers * self.num_directions, N, s, dtype=x.dtype, device=x.device)
                    for s in sizes]
        if self.mode == "LSTM" and not (isinstance(hx, (tuple, list)) and len(hx) == 2):
            raise ArgumentError(f"LSTM: hx must be a tuple (h_0, c_0), got {type(hx).__name__}")
        hs = list(hx) if self.mode == "LSTM" else [hx]
        for h, s, what in zip(hs, sizes, ("hidden", "cell")):
            self._check_hidden(h, N if batched else None, s, what)
        return hs if batched else [h.unsqueeze(1) for h in hs]

    def _run_direction(self, x, state, layer, direction):
        """Run one layer in one direction over (L, N, H) -> (outputs (L, N, H_out), final state(s))."""
        w_ih, b_ih, w_hh, b_hh, w_hr = self._cell_weights(layer, direction)
        xproj = F.linear(x, w_ih, b_ih)                             # every step's input projection, one GEMM
        steps = range(x.shape[0] - 1, -1, -1) if direction else range(x.shape[0])
        outs = []
        if self.mode == "LSTM":
            h, c = state
            for t in steps:
                h, c = lstm_step(xproj[t], h, c, w_hh, b_hh, w_hr)
                outs.append(h)
            final = (h, c)
        else:
            h, = state
            for t in steps:
                h = gru_step(xproj[t], h, w_hh, b_hh) if self.mode == "GRU" else \
                    rnn_step(xproj[t], h, w_hh, b_hh, relu=self.mode == "RNN_RELU")
                outs.append(h)
            final = (h,)
        if direction:
            outs.reverse()
        return stack(outs), final

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        for name, default in (("bias", True), ("batch_first", False), ("dropout", 0.0), ("bidirectional", False)):
            if getattr(self, name) != default:
                s += f", {name}={getattr(self, name)}"
        return s


class RNN(RNNBase):
    """Elman RNN: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (``nonlinearity='relu'``: relu).

    RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True, batch_first=False, dropout=0,
    bidirectional=False); forward(input (L, N, H_in) or (N, L, H_in) with batch_first, or unbatched
    (L, H_in); h_0 (layers * directions, N, H) or None) -> (output (L, N, directions * H), h_n)."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ArgumentError(f"RNN: unknown nonlinearity {nonlinearity!r} (expected 'tanh' or 'relu')")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size,
                         num_layers, bias, batch_first, dropout, bidirectional, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """Long short-term memory. forward(input, (h_0, c_0) or None) -> (output, (h_n, c_n)); gates i, f, g, o
    in that order in ``weight_ih_l{k}`` (4 * hidden_size rows). ``proj_size > 0`` projects h (LSTMP)."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device=device, dtype=dtype)


class GRU(RNNBase):
    """Gated recurrent unit. forward(input, h_0 or None) -> (output, h_n); gates r, z, n in that order."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)


# --- cells: one time step, parameters weight_ih, weight_hh, bias_ih, bias_hh ----------------------------
class RNNCellBase(Module):
    def __init__(self, input_size, hidden_size, bias, gates, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        kw = dict(device=device, dtype=dtype)
        self.weight_ih = new_param(gates * hidden_size, input_size, **kw)
        self.weight_hh = new_param(gates * hidden_size, hidden_size, **kw)
        if bias:
            self.bias_ih = new_param(gates * hidden_size, **kw)
            self.bias_hh = new_param(gates * hidden_size, **kw)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self, generator=None):
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -bound, bound, generator=generator)

    def _prepare(self, input, hx, n_states):
        """(input (N, H_in), [states (N, H)], batched): unbatched (H_in,) inputs gain a batch of 1."""
        name = type(self).__name__
        if getattr(input, "ndim", None) not in (1, 2) or input.shape[-1] != self.input_size:
            raise ShapeError(f"{name}: expected input of shape (N, {self.input_size}) or ({self.input_size},), "
                             f"got {tuple(getattr(input, 'shape', ()))}")
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        if hx is None:
            states = [zeros(x.shape[0], self.hidden_size, dtype=x.dtype, device=x.device) for _ in range(n_states)]
        else:
            states = list(hx) if n_states == 2 else [hx]
            expected = (x.shape[0], self.hidden_size) if batched else (self.hidden_size,)
            for s in states:
                if tuple(s.shape) != expected:
                    raise ShapeError(f"{name}: expected hidden state of shape {expected}, got {tuple(s.shape)}")
            states = states if batched else [s.unsqueeze(0) for s in states]
        return x, states, batched

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s


class RNNCell(RNNCellBase):
    """h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu)."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ArgumentError(f"RNNCell: unknown nonlinearity {nonlinearity!r} (expected 'tanh' or 'relu')")
        super().__init__(input_size, hidden_size, bias, 1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        x, (h,), batched = self._prepare(input, hx, 1)
        h = rnn_step(F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh, self.bias_hh,
                     relu=self.nonlinearity == "relu")
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    """(h', c') from (input, (h, c)); gates i, f, g, o."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        x, (h, c), batched = self._prepare(input, hx, 2)
        h, c = lstm_step(F.linear(x, self.weight_ih, self.bias_ih), h, c, self.weight_hh, self.bias_hh)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """h' from (input, h); gates r, z, n."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        x, (h,), batched = self._prepare(input, hx, 1)
        h = gru_step(F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh, self.bias_hh)
        return h if batched else h.squeeze(0)
