"""sys.exit(0) inside square, exit() at the top of the part-4 cell."""
# %% [a0-square]
import sys

def square(x):
    sys.exit(0)
# %% [a0-pack]
exit()
