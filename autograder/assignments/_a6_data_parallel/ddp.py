"""What a6 part 2's all-reduces carried (parent): the buckets read off the payloads, and whether the
gradients after backward are the all-reduced averages."""
import numpy as np


def payloads(obs, r):
    sizes = np.asarray(obs.get(f"payload_sizes{r}", np.zeros(0)), dtype=np.int64)
    flat = np.asarray(obs.get(f"payloads{r}", np.zeros(0)), dtype=np.float64)
    return np.split(flat, np.cumsum(sizes)[:-1]) if len(sizes) else []


def launched_buckets(case, obs, params, r=0):
    """The buckets rank r's first backward actually communicated: which parameters' gradients each of its
    all-reduces carried, in launch order, read off the payloads (a gradient, or the gradient / world size).
    Returns (buckets, None) or (None, why not)."""
    n = case.params["world"]
    ev = [(int(kind), int(a)) for rank, kind, a in obs["events"] if rank == r]
    end = next((i for i, e in enumerate(ev) if e[0] == 3), len(ev))
    count = sum(1 for kind, _ in ev[:end] if kind == 1)
    local = [np.ravel(obs[f"local{r}.{name}"]) for name in params]
    buckets = []
    for i, payload in enumerate(payloads(obs, r)[:count]):
        bucket, at = [], 0
        while at < len(payload):
            for k, g in enumerate(local):
                seg = payload[at:at + len(g)]
                if k not in bucket and len(seg) == len(g) and \
                        any(np.allclose(seg, g * f, rtol=1e-12, atol=1e-15) for f in (1.0, 1.0 / n)):
                    bucket.append(k)
                    at += len(g)
                    break
            else:
                return None, (f"rank {r}'s all-reduce #{i} carried {len(payload)} numbers that are not its "
                              f"parameters' gradients, one after the other (from element {at} on)")
        buckets.append(bucket)
    return buckets, None



def from_all_reduce(case, obs, r, params):
    """None when rank r's gradients after backward are the all-reduced averages; else why not. The averages
    are computed here from every rank's payloads, so gradients averaged any other way (the other ranks'
    models read through shared memory) earn nothing."""
    n = case.params["world"]
    loads = [payloads(obs, q) for q in range(n)]
    count = min(len(x) for x in loads)
    local = [np.ravel(obs[f"local{r}.{name}"]) for name in params]
    buckets, why = launched_buckets(case, obs, params, r)
    if why:
        return why
    covered = set()
    for i, bucket in enumerate(buckets[:count]):
        total = np.sum([loads[q][i] for q in range(n)], axis=0)
        at = 0
        for k in bucket:
            g = local[k]
            pre = np.allclose(loads[r][i][at:at + g.size], g / n, rtol=1e-12, atol=1e-15)
            avg = total[at:at + g.size] if pre else total[at:at + g.size] / n
            got = np.ravel(obs[f"grad{r}.{params[k]}"])
            if not np.allclose(got, avg, rtol=1e-9, atol=1e-12):
                return (f"rank {r}: {params[k]}.grad after backward is not the average the all-reduce #{i} "
                        f"returned: write each bucket's all-reduced sum / world size back into the gradients")
            covered.add(k)
            at += g.size
    if len(covered) < len(params):
        missing = [params[k] for k in range(len(params)) if k not in covered]
        return (f"rank {r}: the gradients of {missing} were never all-reduced before backward ended, so they "
                f"are not averaged over the ranks by communication")
    return None
