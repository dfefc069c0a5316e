"""Planted bug (part 1): no version check, so an input modified in place between forward and backward gives
a silently wrong gradient."""
# %% [a5-checkpoint] patch
# <<<
        for i, (a, v) in enumerate(zip(kept, versions)):
            if v is not None and a._version != v:
                raise RuntimeError(f"checkpoint: input {i} was modified in place after the forward "
                                   f"(version {a._version}, expected {v})")
# ===
# >>>
