"""``mg.backends.mps``: Apple's Metal backend, which minigrad does not have (devices are 'cpu' and 'cuda')."""


def is_available():
    return False


def is_built():
    return False
