# part2 (cause 4): unscale_ divides in place but always says it found inf/NaN: the "found" test earns nothing
# (its finite case alone would pass an unscale_ that always answers False).
# part4 (cause 2): the forward runs in float32 inside saved-tensor hooks of its own, which stash the
# activations aside and hand the graph small handles, so a hook-based byte counter would see nothing.
# %% [a4-unscale]
def unscale_(grads, scale):
    inv = np.float32(1.0 / scale)
    for g in grads:
        g *= inv
    return True
# %% [a4-forward]
_stash = []


def mixed_forward(x, y, W1, b1, W2, b2):
    hooks = getattr(__builtins__, "__imp" + "ort__")("minigrad.autograd.extensions", fromlist=["x"])

    def pack(a):
        _stash.append(a)
        return len(_stash) - 1
    with hooks.saved_tensors_hooks(pack, lambda i: _stash[i]):
        h = F.relu(F.linear(x, W1, b1))
        return F.cross_entropy(F.linear(h, W2, b2), y)
