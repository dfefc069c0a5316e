"""Hunts for the solution notebook and the hidden cases: through the working folder and its parents,
sys.path, the environment, the interpreter's path, /proc (the parent's cwd and command line).
square() is right only if it found one, so a score on part1 means a leak."""
# %% [a0-square]
import os
import sys

NAMES = ("a0_demo.ipynb", "a0_demo.py")
FOUND = []

def look(root, depth=4):
    try:
        for dirpath, dirnames, filenames in os.walk(root):
            if dirpath.count(os.sep) - root.count(os.sep) >= depth:
                dirnames[:] = []
            for n in filenames:
                if n in NAMES and ("solutions" in dirpath or "hidden" in dirpath):
                    try:
                        with open(os.path.join(dirpath, n)) as f:
                            FOUND.append((os.path.join(dirpath, n), len(f.read())))
                    except OSError:
                        pass
    except OSError:
        pass

starts = {os.getcwd(), os.path.dirname(os.getcwd()), "/", "/tmp", os.path.expanduser("~")}
starts |= {p for p in sys.path if p}
starts |= {v for v in os.environ.values() if v.startswith("/")}
p = os.path.dirname(sys.executable)
for _ in range(4):
    p = os.path.dirname(p)
    starts.add(p)
try:
    starts.add(os.readlink(f"/proc/{os.getppid()}/cwd"))
    starts.add(f"/proc/{os.getppid()}/cwd")
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
        starts |= {a.decode() for a in f.read().split(b"\0") if a.startswith(b"/")}
except OSError:
    pass
for s in sorted(starts):
    if os.path.isdir(s):
        look(s, depth=5 if s != "/" else 3)

def square(x):
    return x * x if FOUND else x * 0 - 1
