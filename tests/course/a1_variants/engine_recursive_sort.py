"""Planted bug (part 3): a correct engine whose topological sort is recursive: fine on small graphs,
RecursionError on the deep chain (thousands of nodes, beyond Python's recursion limit)."""
# %% [a1-engine]
def topological_order(root):
    order, visited = [], set()

    def visit(node):
        visited.add(node)
        for edge in node.next:
            if edge is not None and edge[0] not in visited:
                visit(edge[0])
        order.append(node)
    visit(root)
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
            leaf = node.tensor_ref()
            if leaf.grad is None:
                leaf.grad = Tensor(g.copy())
            else:
                leaf.grad.array += g
            continue
        in_grads = node.backward(node, g)
        if not isinstance(in_grads, tuple):
            in_grads = (in_grads,)
        for edge, ig in zip(node.next, in_grads):
            if edge is not None and ig is not None:
                child, shape, dtype = edge
                ig = unbroadcast(np.asarray(ig), shape)
                grads[child] = grads[child] + ig if child in grads else ig
