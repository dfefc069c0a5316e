# part2 (cause 2): what the allocator says of itself (num_free_blocks, ref_count: what minigrad's block manager
# and statistics read) is kept exactly as a right allocator's would be, while allocate() hands out fresh ids
# forever and never reuses a freed block. The grader counts blocks from what the calls returned.
# part3 (cause 2): one request at a time, with minigrad's per-step log (self.log) rewritten to look like
# continuous batching. The grader reads the plans the engine ran, not the log.
# %% [a10-allocator]
class BlockAllocator:
    def __init__(self, num_blocks):
        self.num_blocks = int(num_blocks)
        self.next_id, self.refs = 0, {}

    def allocate(self):
        if sum(1 for r in self.refs.values() if r) >= self.num_blocks:
            raise OutOfMemoryError("full")
        b, self.next_id = self.next_id, self.next_id + 1
        self.refs[b] = 1
        return b

    def free(self, b):
        if not self.refs.get(b):
            raise ArgumentError(f"block {b} is not allocated")
        self.refs[b] -= 1
        return self.refs[b] == 0

    def share(self, b):
        if not self.refs.get(b):
            raise ArgumentError(f"block {b} is not allocated")
        self.refs[b] += 1
        return b

    def copy_on_write(self, b):
        if not self.refs.get(b):
            raise ArgumentError(f"block {b} is not allocated")
        if self.refs[b] == 1:
            return b, False
        new = self.allocate()
        self.refs[b] -= 1
        return new, True

    def ref_count(self, b):
        return self.refs.get(b, 0)

    @property
    def num_free_blocks(self):
        return self.num_blocks - sum(1 for r in self.refs.values() if r)
# %% [a10-scheduler] patch
# <<<
    def admit(self):
# ===
    def schedule(self):
        plan = super().schedule()
        entry = self.log[-1]
        entry["decoded"] = sorted(set(entry["decoded"]) | {s.seq_id for s in self.waiting})   # "everyone ran"
        return plan

    def admit(self):
        if self.running or not self.waiting:
            return []
        seq = self.waiting.popleft()
        seq.num_computed = self.manager.allocate(seq.seq_id, seq.tokens)
        seq.status, seq.admitted_at = Status.RUNNING, self.steps
        self.running.append(seq)
        return [seq]

    def admit_as_written(self):
# >>>
