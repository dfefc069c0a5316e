"""Helpers of the a9_model_parallelism spec. ``world`` is what a rank runs in (the recorded collectives, the
pipeline stage), the only module the sandboxed child imports; ``comm``, ``reference`` and the verdicts (``tp``,
``fsdp``, ``pipeline``) are parent-only (the spec imports them when a verdict is first called)."""
