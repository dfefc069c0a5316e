"""The layers of ``minigrad.nn``, one file per family."""
from .activation import GELU, LeakyReLU, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Tanh
from .attention import MultiheadAttention
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .conv import Conv1d, Conv2d, ConvTranspose2d
from .dropout import Dropout, Dropout1d, Dropout2d, Dropout3d
from .embedding import Embedding
from .flatten import Flatten, Unflatten
from .linear import Identity, Linear
from .loss import BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, L1Loss, MSELoss, NLLLoss, SmoothL1Loss
from .normalization import BatchNorm1d, BatchNorm2d, LayerNorm
from .pooling import AdaptiveAvgPool2d, AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d
from .rnn import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNBase, RNNCell, RNNCellBase
from . import sparse  # noqa: F401  (torch.nn.modules.sparse.Embedding: PyTorch's module path)
from .transformer import TransformerBlock
from .upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d
from .transformer_layers import (Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder,
                                 TransformerEncoderLayer)

__all__ = ["AdaptiveAvgPool2d", "AvgPool1d", "AvgPool2d", "BCELoss", "BCEWithLogitsLoss", "BatchNorm1d",
           "BatchNorm2d", "Conv1d", "Conv2d", "ConvTranspose2d", "CrossEntropyLoss", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d",
           "Embedding", "Flatten", "GELU", "GRU", "GRUCell", "HuberLoss", "Identity", "L1Loss", "LSTM", "LSTMCell",
           "LayerNorm", "LeakyReLU", "Linear", "LogSoftmax", "MSELoss", "MaxPool1d", "MaxPool2d", "ModuleDict",
           "ModuleList", "MultiheadAttention", "NLLLoss", "ParameterDict", "ParameterList", "RNN", "RNNBase",
           "RNNCell", "RNNCellBase", "ReLU", "Sequential", "SiLU", "Sigmoid", "SmoothL1Loss", "Softmax", "Tanh",
           "Transformer", "TransformerBlock", "TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder",
           "TransformerEncoderLayer", "Unflatten", "Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d"]
