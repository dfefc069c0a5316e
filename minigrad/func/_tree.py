"""Nested tuples, lists and dicts of tensors ("pytrees", as torch.func and JAX call them): flatten to a
list of leaves and rebuild. Used by ``vmap`` (in_dims/out_dims per input and output) and the transforms
(several inputs and outputs)."""


def flatten(tree):
    """``(leaves, spec)``: the leaves in order and what ``unflatten(spec, leaves)`` needs to rebuild."""
    leaves = []
    spec = _flatten(tree, leaves)
    return leaves, spec


def _flatten(tree, leaves):
    if isinstance(tree, (tuple, list)):
        return (type(tree), [_flatten(t, leaves) for t in tree])
    if isinstance(tree, dict):
        return (dict, [(k, _flatten(v, leaves)) for k, v in tree.items()])
    leaves.append(tree)
    return None


def unflatten(spec, leaves):
    it = iter(leaves)
    return _unflatten(spec, it)


def _unflatten(spec, it):
    if spec is None:
        return next(it)
    kind, children = spec
    if kind is dict:
        return {k: _unflatten(c, it) for k, c in children}
    items = [_unflatten(c, it) for c in children]
    if kind is tuple or kind is list:
        return kind(items)
    return kind(*items)   # namedtuples


def broadcast_prefix(prefix, tree, what):
    """Per-leaf values of ``prefix`` (an int/None, or a structure matching ``tree``'s top levels), as
    torch.func's in_dims: ``in_dims=(0, None)`` for two arguments, ``in_dims=0`` for all."""
    if not isinstance(prefix, (tuple, list, dict)):
        return [prefix] * len(flatten(tree)[0])
    if isinstance(prefix, dict):
        if not isinstance(tree, dict) or set(prefix) != set(tree):
            raise ValueError(f"{what}: a dict of dims must have the keys of the value it maps")
        return [d for k in tree for d in broadcast_prefix(prefix[k], tree[k], what)]
    if not isinstance(tree, (tuple, list)) or len(prefix) != len(tree):
        raise ValueError(f"{what}: expected one entry per element ({len(prefix)} given for "
                         f"{len(tree) if isinstance(tree, (tuple, list)) else 1})")
    return [d for p, t in zip(prefix, tree) for d in broadcast_prefix(p, t, what)]
