"""``python -m minigrad.distributed.run --nproc-per-node N script.py args``: start a job, like torchrun.

Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT. The launcher
hosts the rendezvous store itself (MINIGRAD_STORE_HOSTED=1), so the store outlives any rank and can tell
the others which one died.

On one node the ranks are started by the mpich wheel's ``mpiexec`` when it is installed (so the 'mpi'
backend works; 'nccl' does too), each wrapped in a tiny ``sh`` that reports its exit code: a rank killed
by a signal then looks to MPICH like a rank that exited, and the survivors are left running long enough to
raise their timeout error naming it (MPICH would otherwise kill them on the spot). Without mpiexec, or
with ``--launcher spawn`` or several nodes, the ranks are plain child processes (the 'nccl' backend; for
'mpi' across machines use ``mpiexec`` with a host file). Scripts also run under a plain ``mpiexec -n N``.
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

from .store import TCPStore

# sh runs the rank and says how it ended; "$0" "$@" is the python command line, untouched. It ignores the
# SIGUSR1 by which hydra (with -disable-auto-cleanup) tells the survivors that a process has exited.
_WRAPPER = ('trap "" USR1; "$0" "$@"; rc=$?; [ $rc -eq 0 ] || echo "minigrad.distributed.run: rank $RANK exited with '
            'code $rc" >&2; exit $rc')


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m minigrad.distributed.run", description=__doc__.splitlines()[0])
    p.add_argument("--nproc-per-node", "--nproc_per_node", type=int, default=1)
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--node-rank", "--node_rank", type=int, default=0)
    p.add_argument("--master-addr", "--master_addr", default="127.0.0.1")
    p.add_argument("--master-port", "--master_port", type=int, default=0, help="0: a free port (one node)")
    p.add_argument("--launcher", choices=("auto", "mpiexec", "spawn"), default="auto")
    p.add_argument("-m", "--module", action="store_true", help="run the script as a module (python -m)")
    p.add_argument("script")
    p.add_argument("args", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    if args.nproc_per_node < 1 or args.nnodes < 1 or not 0 <= args.node_rank < args.nnodes:
        p.error("need --nproc-per-node >= 1, --nnodes >= 1 and 0 <= --node-rank < --nnodes")
    if args.nnodes > 1 and args.master_port == 0:
        p.error("several nodes need an explicit --master-port (and --master-addr of node 0)")
    return args


def find_mpiexec():
    """The mpiexec next to this Python (the mpich wheel's), else one on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return here if os.access(here, os.X_OK) else shutil.which("mpiexec")


def rank_envs(args, port):
    world = args.nnodes * args.nproc_per_node
    base = {"WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(args.nproc_per_node),
            "MASTER_ADDR": args.master_addr, "MASTER_PORT": str(port), "MINIGRAD_STORE_HOSTED": "1",
            "GROUP_RANK": str(args.node_rank)}
    return [dict(base, RANK=str(args.node_rank * args.nproc_per_node + i), LOCAL_RANK=str(i))
            for i in range(args.nproc_per_node)]


def command(args):
    return [sys.executable, "-u"] + (["-m"] if args.module else []) + [args.script] + list(args.args)


def mpiexec_command(mpiexec, envs, cmd):
    """One MPMD block per rank (``-n 1 -env RANK r ... : ...``), each rank wrapped in ``_WRAPPER``."""
    line = [mpiexec, "-launcher", "fork", "-disable-auto-cleanup"]
    for i, env in enumerate(envs):
        if i:
            line.append(":")
        line += ["-n", "1"]
        for k, v in env.items():
            line += ["-env", k, v]
        line += ["sh", "-c", _WRAPPER] + cmd
    return line


def spawn(envs, cmd):
    """Start the ranks as children; when one fails, give the others time to report, then stop them."""
    procs = [subprocess.Popen(cmd, env=dict(os.environ, **env)) for env in envs]
    grace = float(os.environ.get("MINIGRAD_RUN_GRACE", "30"))
    failed_at, code = None, 0
    while any(p.poll() is None for p in procs):
        for rank, p in enumerate(procs):
            rc = p.poll()
            if rc not in (None, 0) and code == 0:
                code, failed_at = rc if rc > 0 else 128 - rc, time.monotonic()
                print(f"minigrad.distributed.run: rank {envs[rank]['RANK']} exited with code {rc}",
                      file=sys.stderr)
        if failed_at is not None and time.monotonic() - failed_at > grace:
            for p in procs:
                if p.poll() is None:
                    p.kill()
        time.sleep(0.05)
    return code or max((p.returncode for p in procs), default=0)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    store = None
    port = args.master_port
    if args.node_rank == 0:
        store = TCPStore(args.master_addr, port, is_master=True)
        port = store.port
    envs = rank_envs(args, port)
    mpiexec = find_mpiexec() if args.launcher != "spawn" and args.nnodes == 1 else None
    if args.launcher == "mpiexec" and mpiexec is None:
        sys.exit("minigrad.distributed.run: --launcher mpiexec, but no mpiexec was found "
                 "(pip install 'minigrad[dist]' brings the mpich wheel's)")
    try:
        if mpiexec:
            code = subprocess.call(mpiexec_command(mpiexec, envs, command(args)))
        else:
            code = spawn(envs, command(args))
    finally:
        if store is not None:
            store.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
