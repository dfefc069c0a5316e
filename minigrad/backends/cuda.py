"""``mg.backends.cuda``: ``matmul.allow_tf32`` and friends, recorded without effect (see the package)."""


class _MatmulFlags:
    """``mg.backends.cuda.matmul``: PyTorch's matmul precision switches (no effect in minigrad)."""

    def __init__(self):
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True


matmul = _MatmulFlags()


def is_built():
    """True when CuPy (minigrad's CUDA backend) can be imported."""
    from ..cuda import is_available
    return is_available()
