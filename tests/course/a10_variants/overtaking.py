"""Planted bug (part 3): a request that does not fit is skipped and later ones are admitted past it (no first
come, first served)."""
# %% [a10-scheduler] patch
# <<<
        admitted, tokens = [], 0
        while self.waiting and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            if admitted and tokens + len(seq.tokens) > self.max_prefill_tokens:
                break
            if not self.manager.can_allocate(seq.tokens):
                break
            self.waiting.popleft()
# ===
        admitted, tokens = [], 0
        for seq in list(self.waiting):
            if len(self.running) >= self.max_num_seqs:
                break
            if admitted and tokens + len(seq.tokens) > self.max_prefill_tokens:
                break
            if not self.manager.can_allocate(seq.tokens):
                continue
            self.waiting.remove(seq)
# >>>
