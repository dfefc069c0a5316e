"""A fork bomb, bounded (at most 2**10 processes if nothing contained it, each exiting after 20 s).
square() returns how many forks succeeded, so the feedback shows how far it got."""
# %% [a0-square]
import os
import time

def square(x):
    made = 0
    for _ in range(10):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            made = 0          # children keep forking too (exponential), then sleep
            continue
        made += 1
    time.sleep(0.5)
    if os.getpid() != ROOT_PID:
        time.sleep(20)
        os._exit(0)
    return x * 0 + made

ROOT_PID = os.getpid()
# %% [a0-pack]
import os

def pack(sizes, alignment):
    n = 0
    for _ in range(2000):     # linear: every child sleeps, so they pile up until the limit
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            import time
            time.sleep(20)
            os._exit(0)
        n += 1
    if n >= 100:
        return [0] * len(sizes)       # not contained: a visibly wrong answer
    offsets, top = [], 0              # contained: a correct packing, so the score shows it
    for s in sizes:
        offsets.append(top)
        top += -(-s // alignment) * alignment
    return offsets
