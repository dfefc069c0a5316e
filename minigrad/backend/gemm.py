"""Matrix products that accumulate float16 operands in float32 on NumPy.

NumPy has no float16 GEMM: ``a @ b`` on float16 arrays runs a plain C loop, hundreds of times slower than
BLAS. ``np.matmul(a, b, dtype=np.float32)`` widens the operands, calls float32 BLAS and rounds the result
once: float16 inputs, float32 accumulation, float16 output, the numerics of tensor cores with float32
accumulation (what autocast promises on GPU). CuPy's float16 matmul already uses cuBLAS with float32
accumulation, so other array types go straight to ``xp.matmul``. Used by the GEMM ops (matmul, linear,
conv, attention); float32/float64 take the ordinary path unchanged.
"""
import numpy as np

_HALF = np.dtype(np.float16)


def matmul(xp, a, b, out=None):
    """``a @ b`` (into ``out`` when given); float16 NumPy operands accumulate in float32."""
    if xp is np and (a.dtype == _HALF or b.dtype == _HALF) and np.result_type(a, b) == _HALF:
        with np.errstate(over="ignore"):  # float16 overflow gives inf, as on a GPU (GradScaler's signal)
            if out is None:
                return np.matmul(a, b, dtype=np.float32).astype(_HALF)
            return np.matmul(a, b, out=out, dtype=np.float32)
    return xp.matmul(a, b) if out is None else xp.matmul(a, b, out=out)
