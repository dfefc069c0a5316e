"""``mg.backends.cpu``: what the CPU backend offers (NumPy; its SIMD level is NumPy's business)."""


def get_cpu_capability():
    return "DEFAULT"
