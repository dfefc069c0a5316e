"""PyTorch keeps Embedding in ``torch.nn.modules.sparse``; programs that name it by that path (e.g. in a
``safe_globals`` list) find minigrad's here. The layer lives in ``embedding.py``."""
from .embedding import Embedding

__all__ = ["Embedding"]
