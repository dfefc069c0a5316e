"""``mg.backends.cudnn``: PyTorch's cuDNN switches, recorded without effect: minigrad does not use cuDNN
(its convolutions are im2col GEMMs, the same computation every run)."""
enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available():
    return False


def version():
    return None
