"""Reading a child's allocator log (parent): where each block went, in the student's terms (malloc
numbers, segments, offsets), and what a better allocator would have reused."""
import re

import numpy as np

from autograder import verdicts as V
from autograder.spec import Verdict

from .trace_device import FREE, MALLOC, OK, ALIGN, KiB, MiB


def _nbytes(n):
    """Exact below 10 KiB or when not a whole number of KiB, else in KiB/MiB."""
    n = int(n)
    return f"{n:,} B" if n < 10 * KiB or n % KiB else V.mib(n)


def _rounded(n):
    """A request rounded as the pool rounds it: up to a multiple of the block alignment, at least one."""
    return ALIGN if n < ALIGN else -(-n // ALIGN) * ALIGN


def _pool(size):
    return "small" if size <= MiB else "large"


def _seg_pool(seg_size):
    return "small" if seg_size == 2 * MiB else "large"


class _Log:
    """A checked log, with the facts the messages need: per malloc its segment (in order of reservation),
    offset and size; per op the reserved bytes after it and the segments reserved during it."""

    def __init__(self, obs, ops, capacity=None):
        self.ops = np.asarray(ops)
        self.events = np.asarray(obs.get("events"))
        self.marks = np.asarray(obs.get("marks"), dtype=np.int64)
        self.status = np.asarray(obs.get("status"), dtype=np.int64)
        self.ret = np.asarray(obs.get("ret"), dtype=np.int64)
        self.errors = [str(e) for e in np.asarray(obs.get("errors"))]
        n = len(self.ops)
        if self.marks.shape != (n,) or self.status.shape != (n,) or self.ret.shape != (n,) \
                or len(self.errors) != n:
            raise ValueError("the observation does not have one entry per operation")
        self.rep = V.replay(self.events, alignment=ALIGN, capacity=capacity, max_violations=3)
        self.requests = {int(i): int(b) for op, i, b in self.ops.tolist() if op == MALLOC}
        self.seg_index, self.seg_size, self.seg_addr = {}, [], []
        self.where = {}                     # block id -> (segment index, offset, size)
        self.reserved_in_op = [[] for _ in range(n)]
        self.released_in_op = [[] for _ in range(n)]
        live_segs = {}
        op_of_event = np.searchsorted(self.marks, np.arange(len(self.events)), side="right")
        for e, (kind, ident, addr, size) in enumerate(self.events.tolist()):
            i = int(op_of_event[e])
            if kind == V.RESERVE:
                idx = len(self.seg_size)
                self.seg_index[ident] = idx
                self.seg_size.append(size)
                self.seg_addr.append(addr)
                live_segs[ident] = (addr, size, idx)
                if i < n:
                    self.reserved_in_op[i].append(idx)
            elif kind == V.RELEASE:
                seg = live_segs.pop(ident, None)
                if seg is not None and i < n:
                    self.released_in_op[i].append(seg[2])
            elif kind == V.ALLOC:
                for sa, ss, idx in live_segs.values():
                    if sa <= addr < sa + ss:
                        self.where[ident] = (idx, addr - sa, size)
                        break
                else:
                    self.where[ident] = (-1, addr, size)
        self.reserved = np.array([self.rep.reserved[m - 1] if m > 0 else 0 for m in self.marks], np.int64)
        live_req = np.zeros(n, np.int64)
        cur, alive = 0, {}
        for i, (op, ident, nbytes) in enumerate(self.ops.tolist()):
            if op == MALLOC and self.status[i] == OK:
                alive[ident] = nbytes
                cur += nbytes
            elif op == FREE and ident in alive:
                cur -= alive.pop(ident)
            live_req[i] = cur
        self.live_requested = live_req

    # -- figures
    @property
    def peak(self):
        return self.rep.peak_reserved

    @property
    def unused(self):
        """Average bytes of reserved memory that held no requested byte, over the ops."""
        return float(np.mean(self.reserved - self.live_requested)) if len(self.ops) else 0.0

    @property
    def unused_share(self):
        """The share of all reserved bytes, summed over the ops, that held no requested byte (rounding,
        remainders, free cached blocks). Not fragmentation: that is `fragmentation`."""
        total = float(self.reserved.sum())
        return 0.0 if total == 0 else 1.0 - float(self.live_requested.sum()) / total

    @property
    def fragmentation(self):
        """minigrad.memory's fragmentation (1 - largest free block / all free bytes, fragmentation_of) of the
        student's layout right after the op at which reserved memory peaked."""
        from minigrad.memory.stats import fragmentation_of, free_holes   # parent only: the one definition
        if not len(self.ops) or not self.reserved.max(initial=0):
            return 0.0
        segs, blocks = self.state_before(int(np.argmax(self.reserved)) + 1)
        return fragmentation_of(free_holes(segs.values(), blocks.values()))

    # -- words
    def place(self, ident):
        idx, off, size = self.where.get(ident, (-1, 0, 0))
        if idx < 0:
            return f"a block of {V.mib(size)} outside every segment"
        return f"a block of {_nbytes(size)} at offset {_nbytes(off)} of segment {idx}"

    def malloc_words(self, ident):
        n = self.requests.get(ident, 0)
        return f"malloc #{ident} ({_nbytes(n)}: a {_pool(_rounded(n))}-pool block of {_nbytes(_rounded(n))})"

    def violation(self):
        """The first replay violation, in the student's terms (malloc numbers, segment offsets)."""
        text = self.rep.violations[0]
        m = re.match(r"event (\d+) \((\w+) id=(-?\d+) addr=(-?\d+) size=(-?\d+)\): (.*)", text)
        if not m:
            return text
        kind, ident, msg = m.group(2), int(m.group(3)), m.group(6)
        o = re.match(r"overlaps the live block \[(\d+), (\d+)\)", msg)
        if kind == "alloc" and o:
            other = self._block_at(int(o.group(1)), int(o.group(2)), before=ident)
            if other is not None:
                msg = f"it overlaps the live block of malloc #{other} ({self.place(other)})"
        msg = self._addresses(msg)
        if kind == "alloc":
            return f"{self.malloc_words(ident)} got {self.place(ident)}: {msg}"
        if kind == "free":
            return f"free of the block of malloc #{ident}: {msg}"
        if kind == "reserve":
            c = re.match(r"reserved (\d+) bytes, more than the device's (\d+)", msg)
            if c:
                msg = f"that makes {V.mib(int(c.group(1)))} reserved, more than the {V.mib(int(c.group(2)))} allowed"
            return f"segment request of {V.mib(int(m.group(5)))} from the device: {msg}"
        return f"segment release: {msg}"

    def _block_at(self, start, end, before):
        """The latest malloc before `before` whose block was [start, end)."""
        for ident in sorted((k for k in self.where if k < before), reverse=True):
            idx, off, size = self.where[ident]
            if idx >= 0 and self.seg_addr[idx] + off == start and size == end - start:
                return ident
        return None

    def _addresses(self, msg):
        def sub(mm):
            a = int(mm.group(0))
            for idx, (sa, ss) in enumerate(zip(self.seg_addr, self.seg_size)):
                if sa <= a <= sa + ss:
                    return f"offset {_nbytes(a - sa)} of segment {idx}"
            return mm.group(0)
        return re.sub(r"\d{7,}", sub, msg)

    def device_forged(self):
        """Why the segment rows cannot have come from the grader's simulated device, or "": it numbers its
        segments 0, 1, 2... and places each one at the next 64 KiB boundary past the previous one plus a gap."""
        address, sid = 1 << 32, 0
        for kind, ident, addr, size in self.events.tolist():
            if kind == V.RESERVE:
                if ident != sid or addr != address:
                    return (f"the segment log was edited: segment #{sid} is not where the grader's device put it "
                            f"(the log belongs to the device, not to your allocator)")
                address += -(-(size + 65536) // 65536) * 65536
                sid += 1
        return ""

    def checks(self):
        """Structural checks: a log the device did not write, replay violations, blocks smaller than requested."""
        forged = self.device_forged()
        if forged:
            return Verdict.rejected(forged)
        if not self.rep.ok:
            more = len(self.rep.violations) - 1
            return Verdict.fail(self.violation() + (f" (and {more} more problem{'s' if more > 1 else ''})"
                                                    if more else ""))
        for ident, (idx, off, size) in sorted(self.where.items()):
            if size < self.requests.get(ident, 0):
                return Verdict.fail(f"{self.malloc_words(ident)} returned a block of only {_nbytes(size)}")
        return Verdict.ok()

    def state_before(self, i):
        """(live segments {id: (addr, size)}, live blocks {id: (addr, size)}) just before op i."""
        segs, blocks = {}, {}
        m = int(self.marks[i - 1]) if i > 0 else 0
        for kind, ident, addr, size in self.events[:m].tolist():
            _apply(segs, blocks, kind, ident, addr, size)
        return segs, blocks

    def missed_reuse(self):
        """The first malloc that asked the device for a segment although a free range of a segment of
        its pool (free neighbours counted together) could hold it: (malloc id, segment, offset, bytes)."""
        segs, blocks = {}, {}
        op_of_event = np.searchsorted(self.marks, np.arange(len(self.events)), side="right")
        for e, (kind, ident, addr, size) in enumerate(self.events.tolist()):
            i = int(op_of_event[e])
            if kind == V.RESERVE and i < len(self.ops) and self.ops[i][0] == MALLOC:
                need = _rounded(int(self.ops[i][2]))
                hit = _free_range(segs, blocks, _pool(need), need)
                if hit is not None:
                    sid, off, nbytes = hit
                    return int(self.ops[i][1]), self.seg_index.get(sid, -1), off, nbytes
            _apply(segs, blocks, kind, ident, addr, size)
        return None


def _apply(segs, blocks, kind, ident, addr, size):
    if kind == V.RESERVE:
        segs[ident] = (addr, size)
    elif kind == V.RELEASE:
        segs.pop(ident, None)
    elif kind == V.ALLOC:
        blocks[ident] = (addr, size)
    elif kind == V.FREE:
        blocks.pop(ident, None)


def _free_range(segs, blocks, pool, need):
    """(segment id, offset, bytes) of the first range of at least `need` bytes that holds no live block,
    in a segment of `pool`; None if there is none."""
    used = sorted(blocks.values())
    for sid, (sa, ss) in segs.items():
        if _seg_pool(ss) != pool:
            continue
        top = sa
        for a, s in [(a, s) for a, s in used if sa <= a < sa + ss] + [(sa + ss, 0)]:
            if a - top >= need:
                return sid, top - sa, a - top
            top = max(top, a + s)
    return None


def _load(obs, case, capacity=None):
    """``(log, None)``, or ``(log or None, the failing verdict)`` when the log is unreadable or breaks the
    rules every allocator keeps (``_Log.checks``): each verdict starts here."""
    try:
        log = _Log(obs, case["ops"], capacity)
    except Exception as e:
        return None, Verdict.fail(f"the grader could not read your allocator's log ({type(e).__name__}: {e})")
    v = log.checks()
    return log, (None if v.passed else v)


REUSE_ADVICE = {
    False: "a freed block must go back to the free list (_free) and be found again by _take_best_fit",
    True: "a freed block must merge with its free neighbours (coalescing, _coalesce) and be found again by "
          "the best-fit search",
}


def _reuse_hint(log, coalesce=True):
    miss = log.missed_reuse()
    if miss is None:
        return ""
    ident, seg, off, nbytes = miss
    return (f". First waste: {log.malloc_words(ident)} asked the device for a new segment while segment "
            f"{seg} had {V.mib(nbytes)} free from offset {_nbytes(off)} on: {REUSE_ADVICE[coalesce]}")
