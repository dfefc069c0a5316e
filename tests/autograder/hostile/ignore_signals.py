"""Ignores every catchable signal and spins: the CPU limit or the wall clock must still stop it."""
# %% [a0-square]
import signal

def square(x):
    for s in (signal.SIGTERM, signal.SIGXCPU, signal.SIGINT, signal.SIGHUP, signal.SIGALRM):
        signal.signal(s, signal.SIG_IGN)
    n = 0
    while True:
        n += 1
