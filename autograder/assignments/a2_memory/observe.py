"""What the sandboxed child runs: the student's allocator on the grader's device; arrays come back."""
import numpy as np

from autograder import verdicts as V

from .trace_device import TraceSource, _block_fields, _drive


def observe_sizes(ns, case):
    req = [int(x) for x in case["requests"]]
    rounded = [int(x) for x in case["rounded"]]
    return {"round": np.array([ns.round_size(x) for x in req], dtype=np.int64),
            "pool": np.array([str(ns.pool_of(x)) for x in rounded], dtype=str),
            "segment": np.array([ns.segment_size(x) for x in rounded], dtype=np.int64)}


def observe_ops(ns, case):
    """Run the case's ops through the class it names, on a (possibly limited) TraceSource."""
    p = case.params
    source = TraceSource(capacity=p.get("capacity"))
    alloc = getattr(ns, p["cls"])(source, "grader")
    if p.get("limit") is not None:
        alloc.memory_limit = int(p["limit"])
    out = _drive(alloc, source, case["ops"], catch_oom=bool(p.get("catch_oom")))
    if source.capacity != p.get("capacity") or type(source) is not TraceSource:
        from autograder._guard import IntegrityError
        raise IntegrityError("your allocator changed the device the grader gave it (its capacity): the device "
                             "is the grader's, an allocator only asks it for segments and gives them back")
    return out


def observe_minigrad(ns, case):
    """StudentAllocator as minigrad's cpu pool (real memory) while a small model trains."""
    import gc
    import minigrad.memory as mem
    p = case.params
    source = TraceSource(real=True)
    alloc = ns.StudentAllocator(source, "cpu")
    log, requests, live = source.log, [], {}
    cls = type(alloc)

    def malloc(nbytes, cause=None):
        block = cls.malloc(alloc, nbytes, cause)
        k = len(requests)
        address, size = _block_fields(block, k)
        requests.append(int(nbytes))
        live[id(block)] = (k, block)
        log.append([V.ALLOC, k, address, size])
        return block

    def free(block):
        entry = live.pop(id(block), None)
        if entry is not None:           # (a free deferred by AllocatorBase comes back here: logged once)
            log.append([V.FREE, entry[0], 0, 0])
        cls.free(alloc, block)

    alloc.malloc, alloc.free = malloc, free     # instance attributes: what minigrad's storage calls
    was = gc.isenabled()
    gc.disable()
    try:
        with mem.enabled("cpu", allocator=alloc):
            losses = _train(p, case["x"], case["y"])
            gc.collect()
            still_live = len(live)
    finally:
        if was:
            gc.enable()
    return {"losses": losses, "events": np.array(log, dtype=np.int64).reshape(-1, 4),
            "requests": np.array(requests, dtype=np.int64), "still_live": np.int64(still_live)}


def _train(p, x, y):
    """A few Adam steps of a small MLP on (x, y) batches; returns the losses (child and parent)."""
    import minigrad as mg
    from minigrad import nn
    from minigrad.nn import functional as F
    mg.manual_seed(p["seed"])
    widths = p["widths"]
    layers = []
    for a, b in zip(widths[:-1], widths[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    opt = mg.optim.Adam(model.parameters(), lr=1e-3)
    losses, start = [], 0
    for b in p["batches"]:
        xb, yb = mg.tensor(x[start:start + b]), mg.tensor(y[start:start + b])
        start += b
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        del xb, yb, loss
    del model, opt, layers
    return np.array(losses, dtype=np.float64)
