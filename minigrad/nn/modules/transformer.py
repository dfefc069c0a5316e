"""A pre-norm transformer block (GPT-2 style):

    x = x + dropout(attn(ln1(x)))
    x = x + dropout(mlp(ln2(x)))        mlp = Linear(d, d_ff) -> GELU -> Linear(d_ff, d)

PyTorch's nn.Transformer family lives in ``transformer_layers.py``; it is re-exported here because PyTorch
programs name it by this module's path (``torch.nn.modules.transformer.TransformerEncoderLayer``).
"""
from collections import OrderedDict

from .activation import GELU, ReLU
from .attention import MultiheadAttention
from .container import Sequential
from .dropout import Dropout
from .linear import Linear
from .normalization import LayerNorm
from ..module import Module
from .transformer_layers import (Transformer, TransformerDecoder, TransformerDecoderLayer,  # noqa: F401
                                 TransformerEncoder, TransformerEncoderLayer)


class TransformerBlock(Module):
    """Pre-norm block on (N, L, d_model) inputs.

    Args: d_model, n_heads, d_ff (default 4 * d_model), dropout (on the attention weights and on both
    residual branches), bias, activation ('gelu', 'gelu_tanh', 'relu' or a Module), norm_eps, causal (the
    default for ``is_causal`` in forward: True for a GPT).

    forward(x, attn_mask=None, key_padding_mask=None, is_causal=None, kv_cache=None): masks as in
    MultiheadAttention; ``kv_cache`` (inference, causal blocks only) is this block's layer cache, handed to
    its attention (``minigrad.inference``).
    """

    def __init__(self, d_model, n_heads, d_ff=None, dropout=0.0, bias=True, activation="gelu", norm_eps=1e-5,
                 causal=False, device=None, dtype=None):
        super().__init__()
        d_ff = 4 * d_model if d_ff is None else d_ff
        kw = dict(device=device, dtype=dtype)
        if isinstance(activation, Module):
            act = activation
        elif activation == "gelu":
            act = GELU()
        elif activation == "gelu_tanh":
            act = GELU(approximate="tanh")
        elif activation == "relu":
            act = ReLU()
        else:
            raise ValueError(f"TransformerBlock: unknown activation {activation!r}")
        self.d_model, self.n_heads, self.d_ff, self.causal = d_model, n_heads, d_ff, causal
        self.ln1 = LayerNorm(d_model, eps=norm_eps, **kw)
        self.attn = MultiheadAttention(d_model, n_heads, dropout=dropout, bias=bias, batch_first=True, **kw)
        self.ln2 = LayerNorm(d_model, eps=norm_eps, **kw)
        self.mlp = Sequential(OrderedDict([("fc", Linear(d_model, d_ff, bias=bias, **kw)), ("act", act),
                                           ("proj", Linear(d_ff, d_model, bias=bias, **kw))]))
        self.dropout = Dropout(dropout)

    def forward(self, x, attn_mask=None, key_padding_mask=None, is_causal=None, kv_cache=None):
        causal = self.causal if is_causal is None else is_causal
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, key_padding_mask=key_padding_mask, need_weights=False, attn_mask=attn_mask,
                         is_causal=causal, kv_cache=kv_cache)
        x = x + self.dropout(a)
        return x + self.dropout(self.mlp(self.ln2(x)))

    def extra_repr(self):
        return f"d_model={self.d_model}, n_heads={self.n_heads}, d_ff={self.d_ff}, causal={self.causal}"
