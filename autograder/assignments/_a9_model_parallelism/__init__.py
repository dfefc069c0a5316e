"""Helpers of the a9_model_parallelism spec: the recorded world a rank runs in (``world``, the only module the
sandboxed child imports), what each rank's collectives carried (``comm``) and the one-process float64
reference (``reference``), both parent-only."""
