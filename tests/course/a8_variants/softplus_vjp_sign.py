# Softplus.vjp with sigmoid(-x) instead of sigmoid(x): backward is right, create_graph is not.
# %% [a8-twice] patch
# <<<
        return grad / (1 + (-x).exp())
# ===
        return grad / (1 + x.exp())
# >>>
