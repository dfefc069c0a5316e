# Adam without bias correction: the first steps are far too small.
# %% [a3-adamw] patch
# <<<
                np.divide(v, 1 - beta2 ** t, out=w)        # v_hat
# ===
                np.copyto(w, v)
# >>>
# <<<
                w *= lr / (1 - beta1 ** t)                 # ... times lr / bias correction of m
# ===
                w *= lr
# >>>
