"""Private machinery of ``minigrad.utils.checkpoint``, split out so the public module reads as its API.

- ``frame.py``: one checkpointed call (a *frame*): what it keeps (its inputs, RNG states, the policy's
  kept outputs), the pack/unpack hooks that replace saved activations by handles, and the recomputation.
- ``selective.py``: selective activation checkpointing (``CheckpointPolicy``, policies by op).

Used only by ``minigrad/utils/checkpoint.py``; nothing here is public.
"""
