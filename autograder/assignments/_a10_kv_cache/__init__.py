"""Parent-only helpers of the a10_kv_cache spec: the allocator logs and the scheduler's plans replayed against
reference counts and the policy the parent reconstructs (``replay``), and minigrad's own engine run on the
same requests. The verdicts import it; no observe function does."""
