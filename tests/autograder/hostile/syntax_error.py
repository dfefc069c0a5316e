"""A syntax error in part 1. Part 3 still runs (with the reference square)."""
# %% [a0-square]
def square(x)
    return x * x
