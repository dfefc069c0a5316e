"""Fault worker: ``faults.py OUT MODE``. MODE 'kill': rank 1 dies (SIGKILL) between two all-reduces;
'never': rank 1 never calls init_process_group. Rank 0 writes the error it got (and how long it took) to
OUT/rank0.json, then re-raises it."""
import json
import os
import signal
import sys
import time

import minigrad as mg
import minigrad.distributed as dist

out, mode = sys.argv[1], sys.argv[2]
TIMEOUT = 3.0  # the tests expect this
rank = int(os.environ["RANK"])
if mode == "never" and rank == 1:
    time.sleep(TIMEOUT + 0.5)   # "never starts": gone before anyone could wait for it
    sys.exit(0)
t0 = time.monotonic()
try:
    dist.init_process_group("mpi", timeout=TIMEOUT)
    t = mg.ones(4)
    dist.all_reduce(t)
    if mode == "kill" and rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    t0 = time.monotonic()
    dist.all_reduce(t)
except dist.DistTimeoutError as e:
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump({"error": str(e), "seconds": time.monotonic() - t0}, f)
    raise
