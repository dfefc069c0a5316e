# matmul's tangent forgets A @ dB.
# %% [a8-dual] patch
# <<<
        return Dual(self.value @ o.value, self.tangent @ o.value + self.value @ o.tangent)
# ===
        return Dual(self.value @ o.value, self.tangent @ o.value)
# >>>
