"""A daemon that leaves the process group and session (double fork + setsid) and would live 60 s.
square() itself is correct: the daemon must still be gone once grading returns."""
# %% [a0-square]
import os
import time

def square(x):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(60)
        os._exit(0)
    time.sleep(0.2)
    return x * x
