"""The device an allocator under test gets (child and parent): a segment source that logs every
segment it hands out, and the driver that runs a list of operations through an allocator."""
import numpy as np

from autograder import verdicts as V

KiB, MiB = 1024, 1024 ** 2
MALLOC, FREE, EMPTY = 0, 1, 2
ALIGN = 512
BUDGET = 1.25                 # x the reference's peak reserved bytes and average unused bytes
CARD = 64 * MiB               # an "8 GB card" scaled down 128x

# status of each op, as the child reports it
OK, OOM, OTHER_OOM, BAD_RETURN = 0, 1, 2, 3


class _Handle:
    """What a simulated segment's release needs (opaque to the allocator)."""
    __slots__ = ("sid",)

    def __init__(self, sid):
        self.sid = sid

    def __repr__(self):
        return f"<segment handle {self.sid}>"


class TraceSource:
    """A segment source that logs what it hands out: ``[RESERVE, id, address, size]`` and
    ``[RELEASE, id, 0, 0]`` rows in ``log`` (the driver adds the ALLOC/FREE rows to the same list).

    Simulated (addresses only, 512-aligned, never adjacent) or ``real`` (NumPy arenas, aligned to 512
    bytes, for tensors). Refuses once ``capacity`` bytes are out, like a full device."""

    def __init__(self, capacity=None, real=False, base=1 << 32):
        self.capacity = capacity
        self.real = real
        self.in_use = 0
        self.next_address = base
        self.log = []
        self.refused = 0
        self._live = {}                 # id(handle) -> (segment id, size, handle)
        self._n = 0

    def allocate(self, nbytes):
        nbytes = int(nbytes)
        if nbytes <= 0:
            raise ValueError(f"source.allocate({nbytes}): a segment needs a positive size")
        if self.capacity is not None and self.in_use + nbytes > self.capacity:
            self.refused += 1
            return None
        sid = self._n
        self._n += 1
        if self.real:
            arena = np.empty(nbytes + ALIGN, dtype=np.uint8)
            start = arena.__array_interface__["data"][0]
            off = (-start) % ALIGN
            handle = arena[off:off + nbytes]        # a view: keeps the arena alive while it is used
            address = start + off
        else:
            address = self.next_address
            self.next_address += -(-(nbytes + 65536) // 65536) * 65536
            handle = _Handle(sid)
        self.in_use += nbytes
        self._live[id(handle)] = (sid, nbytes, handle)
        self.log.append([V.RESERVE, sid, address, nbytes])
        return address, handle

    def release(self, handle):
        entry = self._live.pop(id(handle), None)
        if entry is None or entry[2] is not handle:
            self.log.append([V.RELEASE, -1, 0, 0])  # replay: "releases a segment that is not reserved"
            return
        sid, nbytes, _ = entry
        self.in_use -= nbytes
        self.log.append([V.RELEASE, sid, 0, 0])


def _block_fields(block, i):
    try:
        return int(block.address), int(block.size)
    except Exception as e:
        raise TypeError(f"malloc #{i} returned {block!r}, which has no integer .address and .size "
                        f"(it must return the Block it hands out)") from e


def _drive(alloc, source, ops, catch_oom=False):
    """Run ``ops`` through ``alloc``; returns the observation arrays. A free is logged before the
    allocator sees it, an alloc after malloc returned (its segment requests come first)."""
    import minigrad as mg
    log = source.log
    blocks = {}
    n = len(ops)
    marks = np.zeros(n, np.int64)           # len(log) after each op
    status = np.zeros(n, np.int64)
    ret = np.zeros(n, np.int64)             # what empty_cache() returned
    errors = [""] * n
    for i, (op, ident, nbytes) in enumerate(np.asarray(ops).tolist()):
        if op == MALLOC:
            try:
                block = alloc.malloc(nbytes)
            except (mg.OutOfMemoryError, MemoryError) as e:
                if not catch_oom:
                    raise
                status[i] = OOM if isinstance(e, mg.OutOfMemoryError) else OTHER_OOM
                errors[i] = f"{type(e).__name__}: {str(e)[:300]}"
            else:
                if block is None:
                    if not catch_oom:
                        raise TypeError(f"malloc #{ident} returned None (raise mg.OutOfMemoryError when "
                                        f"there is no memory; return the Block otherwise)")
                    status[i] = BAD_RETURN
                    errors[i] = "returned None"
                else:
                    address, size = _block_fields(block, ident)
                    log.append([V.ALLOC, ident, address, size])
                    blocks[ident] = block
        elif op == FREE:
            if ident in blocks:              # blocks whose malloc failed are not freed
                log.append([V.FREE, ident, 0, 0])
                alloc.free(blocks.pop(ident))
        elif op == EMPTY:
            ret[i] = int(alloc.empty_cache() or 0)
        marks[i] = len(log)
    events = np.array(log, dtype=np.int64).reshape(-1, 4)
    return {"events": events, "marks": marks, "status": status, "ret": ret,
            "errors": np.array(errors, dtype=str)}
