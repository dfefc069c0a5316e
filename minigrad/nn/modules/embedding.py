"""Embedding: a lookup table of ``num_embeddings`` vectors of size ``embedding_dim``."""
from ...errors import ArgumentError, ShapeError
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter
from ._factory import new_param


class Embedding(Module):
    """``weight[input]`` for integer ``input`` of any shape; weight ~ N(0, 1) as in PyTorch.

    ``padding_idx``: that row is initialised to zeros and receives no gradient.
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, _weight=None, _freeze=False,
                 device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ArgumentError(f"Embedding: padding_idx ({padding_idx}) must be within num_embeddings "
                                    f"({num_embeddings})")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        if _weight is None:
            self.weight = new_param(num_embeddings, embedding_dim, device=device, dtype=dtype)
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ShapeError(f"Embedding: _weight shape {tuple(_weight.shape)} does not match "
                                 f"({num_embeddings}, {embedding_dim})")
            self.weight = Parameter(_weight.detach(), requires_grad=not _freeze)

    def reset_parameters(self, generator=None):
        init.normal_(self.weight, generator=generator)
        if self.padding_idx is not None:
            self.weight.array[self.padding_idx] = 0
            self.weight._version_counter.bump()

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None):
        """An Embedding holding a copy-free view of ``embeddings`` (2-D); frozen by default."""
        if embeddings.ndim != 2:
            raise ShapeError(f"Embedding.from_pretrained: embeddings must be 2-D, got shape "
                             f"{tuple(embeddings.shape)}")
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx=padding_idx, _weight=embeddings, _freeze=freeze)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s
