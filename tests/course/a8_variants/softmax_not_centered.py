# softmax's tangent without the centering term: s * da.
# %% [a8-dual] patch
# <<<
    return Dual(s, s * (x.tangent - (s * x.tangent).sum(axis=dim, keepdims=True)))
# ===
    return Dual(s, s * x.tangent)
# >>>
