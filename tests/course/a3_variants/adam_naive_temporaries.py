# Correct AdamW written with whole-array expressions: several parameter-sized temporaries at once.
# %% [a3-adamw] patch
# <<<
                w = np.empty_like(x)                       # the one temporary
                x *= 1 - lr * wd                           # decoupled weight decay
                m *= beta1
                np.multiply(g, 1 - beta1, out=w)
                m += w
                v *= beta2
                np.multiply(g, g, out=w)
                w *= 1 - beta2
                v += w
                np.divide(v, 1 - beta2 ** t, out=w)        # v_hat
                np.sqrt(w, out=w)
                w += eps
                np.divide(m, w, out=w)                     # m / (sqrt(v_hat) + eps)
                w *= lr / (1 - beta1 ** t)                 # ... times lr / bias correction of m
                x -= w
                del w                                      # before the next parameter's temporary
# ===
                x *= 1 - lr * wd
                st["m"] = m = beta1 * m + (1 - beta1) * g
                st["v"] = v = beta2 * v + (1 - beta2) * g * g
                x -= lr * (m / (1 - beta1 ** t)) / (np.sqrt(v / (1 - beta2 ** t)) + eps)
# >>>
