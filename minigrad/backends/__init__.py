"""``mg.backends``: PyTorch's switches for its compute libraries, so programs that set them run unchanged.

    mg.backends.mps.is_available()                 False: minigrad has no Apple-GPU backend
    mg.backends.cuda.matmul.allow_tf32 = True      accepted; minigrad's float32 matmuls never use TF32
    mg.backends.cudnn.benchmark = True             accepted; minigrad does not use cuDNN

The flags are recorded (reading one gives back what was set) and change nothing: NumPy and CuPy compute
float32 products in float32, and minigrad's convolutions are its own GEMMs, already deterministic.
"""
from . import cpu, cuda, cudnn, mps

__all__ = ["cpu", "cuda", "cudnn", "mps"]
