"""The part-2 cell hangs while it is being defined. Part 2 times out; part 3 (which runs the student's
part-2 cell as a dependency) must drop that cell and still pass with the reference."""
# %% [a0-square-backward]
import time
while True:
    time.sleep(0.01)
