"""Parent-only helpers of the a5_recomputation spec: NumPy references, the byte accounting of memory
traces, and the planner checks. Split out so the spec reads as its tests; the sandboxed child never
imports this package (the spec imports it lazily, inside parent-side functions only)."""
