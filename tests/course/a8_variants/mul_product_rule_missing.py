# The product rule with one term: the tangent of a * b is taken as da * b.
# %% [a8-dual] patch
# <<<
        return Dual(self.value * o.value, self.tangent * o.value + self.value * o.tangent)
# ===
        return Dual(self.value * o.value, self.tangent * o.value)
# >>>
