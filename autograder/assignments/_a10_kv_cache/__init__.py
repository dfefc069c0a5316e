"""Helpers of the a10_kv_cache spec.

    world.py    what child and parent both build: the seeded decoder, the request mixes, the driver of random
                allocator traces, and the grader's proxies (a cache probe, an allocator recorder)
    replay.py   parent only: allocator logs and the scheduler's plans replayed against reference counts and the
                policy, and minigrad's own engine run on the same requests (the verdicts import it)
"""
