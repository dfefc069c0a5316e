"""Continuous batching: which sequences run this step, decided one step at a time.

Each ``schedule()`` call is two small steps, each a method a subclass (or a student) can replace:

1. ``admit()``: move waiting sequences to running, first come first served, while the batch has room
   (``max_num_seqs``), this step's prefill stays within ``max_prefill_tokens``, and the block manager can
   give the sequence blocks for all its tokens. Admitted sequences are prefilled this step.
2. ``make_room(candidates)``: every other running sequence decodes one token, which needs one slot. When
   blocks run out, the most recently admitted running sequence is **preempted**: its blocks are freed and
   it goes back to the front of the queue, to be recomputed (prefilled with its prompt and the tokens it
   had generated) when blocks free up. The oldest requests keep running, so they finish and free memory.

Finished sequences leave at once (``finish``), so their blocks serve the next admission in the same step
that follows. ``policy="static"`` admits only when the batch is empty: a batch runs until its longest
request ends (static batching, the baseline of the benchmark and the lecture).

``log`` keeps every step's decisions (admitted, decoded, preempted, finished ids and free blocks): what a
grader checks from outside.
"""
from collections import deque
from dataclasses import dataclass, field

from ..errors import ArgumentError
from .sequence import Status


@dataclass
class StepPlan:
    prefill: list = field(default_factory=list)     # sequences admitted this step (prefill, first token)
    decode: list = field(default_factory=list)      # sequences decoding one token
    preempted: list = field(default_factory=list)
    copies: list = field(default_factory=list)      # (src, dst) blocks to copy before the forward (COW)


class Scheduler:
    def __init__(self, manager, max_num_seqs=16, max_prefill_tokens=2048, policy="continuous"):
        if policy not in ("continuous", "static"):
            raise ArgumentError(f"Scheduler: policy must be 'continuous' or 'static', got {policy!r}")
        if int(max_num_seqs) < 1 or int(max_prefill_tokens) < 1:
            raise ArgumentError(f"Scheduler: max_num_seqs and max_prefill_tokens must be >= 1, got "
                                f"{max_num_seqs} and {max_prefill_tokens}")
        self.manager, self.policy = manager, policy
        self.max_num_seqs, self.max_prefill_tokens = int(max_num_seqs), int(max_prefill_tokens)
        self.waiting = deque()
        self.running = []          # in admission order: the last is the first to be preempted
        self.log = []
        self.steps = 0

    def add(self, seq):
        self.waiting.append(seq)

    def has_unfinished(self):
        return bool(self.waiting or self.running)

    def schedule(self):
        before = set(id(s) for s in self.running)
        admitted = self.admit()
        plan = StepPlan()
        plan.decode, plan.preempted, plan.copies = self.make_room([s for s in self.running if id(s) in before])
        plan.prefill = [s for s in admitted if s.status is Status.RUNNING]
        self.log.append({"step": self.steps, "admitted": [s.seq_id for s in plan.prefill],
                         "decoded": [s.seq_id for s in plan.decode],
                         "preempted": [s.seq_id for s in plan.preempted], "finished": [],
                         "free_blocks": self.manager.allocator.num_free_blocks})
        self.steps += 1
        return plan

    # --- the two decisions ---------------------------------------------------------------------------
    def admit(self):
        """Waiting -> running while there is room; returns the admitted sequences (to prefill)."""
        if self.policy == "static" and self.running:
            return []
        admitted, tokens = [], 0
        while self.waiting and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            if admitted and tokens + len(seq.tokens) > self.max_prefill_tokens:
                break
            if not self.manager.can_allocate(seq.tokens):
                break                                       # first come, first served: no overtaking
            self.waiting.popleft()
            seq.num_computed = self.manager.allocate(seq.seq_id, seq.tokens)
            seq.status, seq.admitted_at = Status.RUNNING, self.steps
            self.running.append(seq)
            admitted.append(seq)
            tokens += len(seq.tokens)
        return admitted

    def make_room(self, candidates):
        """One slot for each decoding sequence, preempting the newest when blocks run out.
        Returns (decoding sequences, preempted sequences, copy-on-write (src, dst) pairs)."""
        decode, preempted, copies = [], [], []
        for seq in candidates:
            if seq.status is not Status.RUNNING:
                continue                                    # preempted to make room for an older one
            position = len(seq.tokens) - 1                  # the last token's keys and values go here
            while not self.manager.can_append(seq.seq_id, position):
                victim = self.running[-1]
                self.preempt(victim)
                preempted.append(victim)
                if victim is seq:
                    break
            else:
                copy = self.manager.append_slot(seq.seq_id, position)
                if copy is not None:
                    copies.append(copy)
                decode.append(seq)
        return decode, preempted, copies

    # --- transitions ---------------------------------------------------------------------------------
    def preempt(self, seq):
        """Free the sequence's blocks and queue it first, to be recomputed."""
        self.manager.free(seq.seq_id)
        self.running.remove(seq)
        seq.status, seq.num_computed = Status.WAITING, 0
        seq.num_preemptions += 1
        self.waiting.appendleft(seq)

    def finish(self, seq, reason):
        """Retire a sequence now: its blocks are free for the next step."""
        self.manager.free(seq.seq_id)
        if seq in self.running:
            self.running.remove(seq)
        seq.status, seq.finish_reason = Status.FINISHED, reason
        if self.log:
            self.log[-1]["finished"].append(seq.seq_id)
