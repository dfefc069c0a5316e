"""The autocast policy: which ops run in low precision, which in float32, which promote. One table.

Keys are ``Function.name`` (``type(op).name``: the class name in snake case unless the op sets ``name``).
An op not in the table runs in whatever dtype its inputs have -- elementwise ops after a float16 matmul
stay float16, as in PyTorch. The lists follow PyTorch's CUDA autocast lists, restricted to minigrad's ops
(``mm``/``bmm`` are ``matmul`` here):

=========  =====================================================  ==========================================
rule       ops                                                    why
=========  =====================================================  ==========================================
LOWER      matmul, linear, conv1d, conv2d,                        GEMMs: the FLOPs and the saved activations;
           scaled_dot_product_attention                           float16 in, float32 accumulate, float16 out
FLOAT32    softmax, log_softmax, cross_entropy, nll_loss,         exp/log overflow float16 (exp(12) > 65504);
           mse_loss, binary_cross_entropy_with_logits,            sums of many terms lose the small ones
           layer_norm, batch_norm, sum, mean, var, prod, cumsum,  (float16 has 11 bits); statistics and
           logsumexp, exp, log, pow, sqrt                         losses need the range
PROMOTE    add, sub, mul, div, maximum, minimum, where, cat,      mixed float16/float32 inputs: all go to
           stack                                                  the widest (no silent narrowing)
=========  =====================================================  ==========================================

Only float16/float32 tensors are *eligible* for casting (PyTorch's rule): float64 and integer tensors pass
through untouched. An op not in the table whose inputs are float16 runs in float16 (on NumPy devices it
computes in float32 on float16 storage, except the ``MOVEMENT`` ops, which only move elements and are as
fast in float16). ``batch_norm`` is in FLOAT32 here (PyTorch's cuDNN kernel takes float16 input with
float32 statistics; minigrad's op needs one dtype, so the whole op runs in float32).
"""
LOWER = "lower"
FLOAT32 = "float32"
PROMOTE = "promote"

POLICY = {
    # GEMM-like: low precision
    "matmul": LOWER, "linear": LOWER, "conv1d": LOWER, "conv2d": LOWER,
    "scaled_dot_product_attention": LOWER,
    # range- or accumulation-sensitive: float32
    "softmax": FLOAT32, "log_softmax": FLOAT32, "cross_entropy": FLOAT32, "nll_loss": FLOAT32,
    "mse_loss": FLOAT32, "binary_cross_entropy_with_logits": FLOAT32,
    "layer_norm": FLOAT32, "batch_norm": FLOAT32,
    "sum": FLOAT32, "mean": FLOAT32, "var": FLOAT32, "prod": FLOAT32, "cumsum": FLOAT32,
    "logsumexp": FLOAT32, "exp": FLOAT32, "log": FLOAT32, "pow": FLOAT32, "sqrt": FLOAT32,
    # several floating inputs: the widest wins
    "add": PROMOTE, "sub": PROMOTE, "mul": PROMOTE, "div": PROMOTE, "maximum": PROMOTE, "minimum": PROMOTE,
    "where": PROMOTE, "cat": PROMOTE, "stack": PROMOTE,
}

# ops that only move or select elements: float16 is as fast as float32 there (no float32 compute on NumPy)
MOVEMENT = frozenset({"reshape", "transpose", "permute", "expand", "getitem", "setitem", "cat", "stack", "pad",
                      "repeat", "flip", "tril", "clone", "cast", "to", "gather", "masked_fill", "embedding"})


def table():
    """The policy as rows ``(rule, [op names])``, for lectures and docs."""
    return [(rule, sorted(n for n, r in POLICY.items() if r == rule)) for rule in (LOWER, FLOAT32, PROMOTE)]
