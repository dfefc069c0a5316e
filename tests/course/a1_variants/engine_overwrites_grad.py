"""Planted bug (part 3): the engine assigns leaf.grad instead of adding to it, so a second backward
replaces the first gradient (every single-backward test still passes)."""
# %% [a1-engine]
def topological_order(root):
    order, visited = [], {root}
    stack = [(root, iter(root.next))]
    while stack:
        node, edges = stack[-1]
        for edge in edges:
            if edge is not None and edge[0] not in visited:
                visited.add(edge[0])
                stack.append((edge[0], iter(edge[0].next)))
                break
        else:
            stack.pop()
            order.append(node)
    return order[::-1]


def backward(output, grad=None):
    if grad is None:
        grad = np.ones_like(output.array)
    grads = {output.grad_fn: np.asarray(grad, dtype=output.array.dtype)}
    for node in topological_order(output.grad_fn):
        g = grads.pop(node, None)
        if g is None:
            continue
        if hasattr(node, "tensor_ref"):
            node.tensor_ref().grad = Tensor(g.copy())
            continue
        in_grads = node.backward(node, g)
        if not isinstance(in_grads, tuple):
            in_grads = (in_grads,)
        for edge, ig in zip(node.next, in_grads):
            if edge is not None and ig is not None:
                child, shape, dtype = edge
                ig = unbroadcast(np.asarray(ig), shape)
                grads[child] = grads[child] + ig if child in grads else ig
