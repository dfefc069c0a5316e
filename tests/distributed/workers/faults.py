"""Fault worker: ``faults.py OUT MODE``. MODE 'kill': rank 1 dies (SIGKILL) between two all-reduces;
'never': rank 1 never calls init_process_group; 'pipe': a two-stage pipeline over a subgroup, where rank 1
(the last stage) dies after the first step, so rank 0 waits for a gradient that never comes. Rank 0 writes the error it got (and how long it took) to
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
    if mode == "pipe":
        from minigrad.distributed.pipelining import PipelineStage, ScheduleGPipe
        group = dist.new_group([0, 1])
        sched = ScheduleGPipe(PipelineStage(mg.nn.Linear(4, 4), rank, 2, group=group), 2,
                              loss_fn=lambda o, t: ((o - t) ** 2).mean())
        x = mg.ones(4, 4)
        sched.step(x, target=x) if rank == 0 else sched.step(target=x)
        if rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        t0 = time.monotonic()
        sched.step(x, target=x)
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
