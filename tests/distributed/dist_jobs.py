"""Start a small multi-process job for a test and collect what its ranks saved.

Workers live in ``workers/``; each writes its results into a folder the test then reads, so all
assertions happen in the test process. Every job has a hard wall-clock limit: a test never hangs.
"""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

WORKERS = pathlib.Path(__file__).parent / "workers"
REPO = pathlib.Path(__file__).parents[2]

try:
    import mpi4py  # noqa: F401
    from minigrad.distributed.run import find_mpiexec
    MPIEXEC = find_mpiexec()
except ImportError:
    MPIEXEC = None

needs_mpi = pytest.mark.skipif(MPIEXEC is None, reason="needs mpi4py and mpiexec (pip install 'minigrad[dist]')")


def _env(extra=None):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK", "MINIGRAD_STORE_HOSTED"):
        env.pop(k, None)
    env.update(extra or {})
    return env


def launch(worker, out, *args, nproc=2, plain_mpiexec=False, limit=60, env=None, launcher="auto"):
    """Run ``workers/<worker>`` on ``nproc`` ranks (through minigrad.distributed.run, or a plain mpiexec);
    returns the CompletedProcess (stdout and stderr together in ``.stdout``)."""
    script = [str(WORKERS / worker), str(out), *map(str, args)]
    if plain_mpiexec:
        cmd = [MPIEXEC, "-launcher", "fork", "-n", str(nproc), sys.executable] + script
    else:
        cmd = [sys.executable, "-m", "minigrad.distributed.run", "--nproc-per-node", str(nproc),
               "--launcher", launcher] + script
    try:
        return subprocess.run(cmd, cwd=REPO, env=_env(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=limit)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"job {worker} did not finish within {limit} s:\n{e.stdout}")


def results(out, rank):
    out = pathlib.Path(out)
    arrays = dict(np.load(out / f"rank{rank}.npz")) if (out / f"rank{rank}.npz").exists() else {}
    info = json.loads((out / f"rank{rank}.json").read_text()) if (out / f"rank{rank}.json").exists() else {}
    return arrays, info
