"""Planted bug (part 3): admits only into an empty batch (static batching): a batch runs until its longest
request ends while blocks and seats sit idle."""
# %% [a10-scheduler] patch
# <<<
        admitted, tokens = [], 0
        while self.waiting and len(self.running) < self.max_num_seqs:
# ===
        admitted, tokens = [], 0
        if self.running:
            return admitted
        while self.waiting and len(self.running) < self.max_num_seqs:
# >>>
