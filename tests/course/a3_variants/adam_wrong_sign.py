# The Adam update added instead of subtracted: feedback must name the step and the element, not an index
# over (step, *shape).
# %% [a3-adamw] patch
# <<<
                x -= w
# ===
                x += w
# >>>
