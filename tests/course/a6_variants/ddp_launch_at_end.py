# Every all-reduce starts only when backward has finished: nothing overlaps.
# %% [a6-ddp] patch
# <<<
        self.pending[self.bucket_of[k]] -= 1
        while len(self.handles) < len(self.buckets) and self.pending[len(self.handles)] == 0:
            bucket = self.buckets[len(self.handles)]
            flat = np.concatenate([self.params[j].grad.array.ravel() for j in bucket])
            self.handles.append(self.comm.iall_reduce(flat))
# ===
        self.pending[self.bucket_of[k]] -= 1
# >>>
# <<<
        for bucket, handle in zip(self.buckets, self.handles):
# ===
        for bucket in self.buckets:
            flat = np.concatenate([self.params[j].grad.array.ravel() for j in bucket])
            self.handles.append(self.comm.iall_reduce(flat))
        for bucket, handle in zip(self.buckets, self.handles):
# >>>
