"""Planted bug (part 3): the engine visits nodes breadth-first, each once, instead of in topological
order. A node reached along paths of different lengths runs its backward before all its consumers
have sent their share, and the late shares are lost."""
# %% [a1-engine]
from collections import deque


def backward(output, grad=None):
    if grad is None:
        grad = np.ones_like(output.array)
    grads = {output.grad_fn: np.asarray(grad, dtype=output.array.dtype)}
    queue, seen = deque([output.grad_fn]), {output.grad_fn}
    while queue:
        node = queue.popleft()
        g = grads.pop(node)
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
            if edge is None or ig is None:
                continue
            child, shape, dtype = edge
            ig = unbroadcast(np.asarray(ig), shape)
            if child in seen and child not in grads:
                continue                      # already processed: this share is dropped
            grads[child] = grads[child] + ig if child in grads else ig
            if child not in seen:
                seen.add(child)
                queue.append(child)
