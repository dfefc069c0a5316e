"""Weight-only int8 quantization: ``quantize_(model)`` stores Linear and Embedding weights as int8.

Per output channel (a row of ``weight``: one output feature of a Linear, one token's vector of an
Embedding) the scale is ``s = max|w_row| / 127`` and the stored weight ``q = round(w / s)`` in [-127, 127].
Activations stay float: a Linear computes ``(x @ q^T) * s + b`` — exact algebra, since ``s`` is constant
along the summed dimension, so the product accumulates in float and is scaled once per output — and an
Embedding returns ``q[idx] * s[idx]``. The int8 weight is widened to the activations' dtype for each
product (NumPy has no int8 x float GEMM): weights at rest take 1 byte per value, about 0.25x float32 plus
one float32 scale per row.

What it costs is rounding: each weight moves by at most s/2. ``weight_bytes`` and the lecture measure
the memory; the tiny GPT's validation loss before and after measures the quality.
"""
import numpy as np

from ..errors import ArgumentError
from ..nn import Embedding, Linear, Module
from ..nn import functional as F
from ..tensor import tensor


def quantize_per_channel(weight):
    """(int8 q, float32 scale) of a 2-D float array, one scale per row."""
    w = np.asarray(weight, dtype=np.float32)
    scale = np.abs(w).max(axis=1) / 127.0
    scale = np.where(scale > 0, scale, 1.0).astype(np.float32)
    q = np.clip(np.rint(w / scale[:, None]), -127, 127).astype(np.int8)
    return q, scale


class _Quantized(Module):
    def __init__(self, weight):
        super().__init__()
        q, s = quantize_per_channel(weight.detach().cpu().numpy())
        self.register_buffer("weight", tensor(q, device=weight.device))
        self.register_buffer("weight_scale", tensor(s, device=weight.device))
        self.float_dtype = weight.dtype

    def dequantized_weight(self):
        """The float weight the int8 one stands for (q * s), e.g. to measure the rounding error."""
        return self.weight.to(self.float_dtype) * self.weight_scale.to(self.float_dtype).unsqueeze(1)


class QuantizedLinear(_Quantized):
    """``nn.Linear`` with an int8 weight and per-output-channel scales; the bias stays float."""

    def __init__(self, linear):
        super().__init__(linear.weight)
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.bias = linear.bias

    def forward(self, x):
        y = F.linear(x, self.weight.to(x.dtype)) * self.weight_scale.to(x.dtype)
        return y if self.bias is None else y + self.bias

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, int8 weight"


class QuantizedEmbedding(_Quantized):
    """``nn.Embedding`` with int8 rows and one scale per row."""

    def __init__(self, embedding):
        super().__init__(embedding.weight)
        self.num_embeddings, self.embedding_dim = embedding.num_embeddings, embedding.embedding_dim

    def forward(self, idx):
        rows = F.embedding(idx, self.weight).to(self.float_dtype)
        return rows * F.embedding(idx, self.weight_scale.unsqueeze(1)).to(self.float_dtype)

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}, int8 weight"


def quantize_(model, modules=(Linear, Embedding)):
    """Replace every ``nn.Linear`` / ``nn.Embedding`` of ``model`` (in place) by its int8 version; returns
    ``model``. ``modules`` narrows the kinds replaced. Inference only: the int8 weights get no gradient."""
    kinds = tuple(modules)
    if not kinds or not all(k in (Linear, Embedding) for k in kinds):
        raise ArgumentError(f"quantize_: modules must be nn.Linear and/or nn.Embedding, got {modules!r}")
    if isinstance(model, kinds):
        raise ArgumentError("quantize_: pass the model that holds the layer (it is replaced in its parent)")
    for name, child in list(model.named_children()):
        if isinstance(child, Linear) and Linear in kinds:
            setattr(model, name, QuantizedLinear(child))
        elif isinstance(child, Embedding) and Embedding in kinds:
            setattr(model, name, QuantizedEmbedding(child))
        else:
            quantize_(child, kinds)
    return model


def weight_bytes(model):
    """Bytes of every parameter and buffer of ``model`` (int8 weights, scales, biases, norms...)."""
    return sum(t.nbytes for t in list(model.parameters()) + list(model.buffers()))
