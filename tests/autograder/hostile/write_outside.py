"""Tries to write outside its temporary folder: /tmp, HOME's parent, the repository (guessed from the
interpreter's path). square() stays correct; the files must not appear."""
# %% [a0-square]
import os
import sys

MARK = "autograder-hostile-write-outside"
targets = [f"/tmp/{MARK}", os.path.join(os.path.dirname(os.path.expanduser("~")), MARK)]
exe = os.path.realpath(sys.executable)
p = os.path.dirname(sys.executable)
for _ in range(6):                       # .venv/bin/python -> repository root candidates
    p = os.path.dirname(p)
    targets.append(os.path.join(p, MARK))
WROTE = []
for t in targets:
    try:
        with open(t, "w") as f:
            f.write("pwned")
        WROTE.append(t)
    except OSError:
        pass

def square(x):
    return x * x
