# Each gradient clipped to max_norm on its own: the direction of the update changes.
# %% [a3-clip] patch
# <<<
    if total > max_norm:
        factor = max_norm / (total + eps)
        for g in grads:
            g *= factor
# ===
    for g in grads:
        n = math.sqrt(float(np.vdot(g, g)))
        if n > max_norm:
            g *= max_norm / (n + eps)
# >>>
