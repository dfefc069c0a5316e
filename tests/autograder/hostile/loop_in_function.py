"""square() never returns: costs part1 (timeout), nothing else."""
# %% [a0-square]
def square(x):
    while True:
        pass
