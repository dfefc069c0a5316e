"""The default process group: joining a job, and knowing who is missing when something hangs.

``init_process_group`` finds this process's rank and the world size (arguments, else RANK / WORLD_SIZE
as ``minigrad.distributed.run`` or torchrun set them, else the PMI_RANK / PMI_SIZE that ``mpiexec``
sets), meets the other ranks at a ``TCPStore`` (MASTER_ADDR:MASTER_PORT, rank 0 or the launcher hosting
it), then builds the backend: ``mpi`` (mpi4py, CPU) or ``nccl`` (cupy.cuda.nccl, GPU).

Joining through the store *before* MPI or NCCL start is deliberate: ``MPI_Init`` and
``ncclCommInitRank`` block until every rank arrives, so a rank that never starts would hang the others.
The store has a deadline and knows which ranks came. Under a plain ``mpiexec -n N`` without
MASTER_PORT, MPI starts first and rank 0 hands out a store's port through MPI.
"""
import atexit
import collections
import datetime
import json
import os
import sys
import threading

from ..errors import ArgumentError, DistTimeoutError, DistributedError
from .reduce_op import ReduceOp
from .store import TCPStore

__all__ = ["ReduceOp", "init_process_group", "destroy_process_group", "is_initialized", "get_rank",
           "get_world_size", "get_backend", "is_available", "is_mpi_available", "is_nccl_available",
           "comm_stats", "comm_log", "reset_comm_stats"]

default_pg_timeout = datetime.timedelta(minutes=5)
LOG_LIMIT = 100_000  # records comm_log() keeps in memory; MINIGRAD_COMM_LOG's file keeps every one


class ProcessGroup:
    """A group of ranks: ``rank`` (in this group), ``size``, ``ranks`` (their global ranks), the store, the
    backend, and a counter of collectives issued. The world is one; ``new_group`` makes others (groups.py).

    Every collective gets a sequence number (``#k``) in its group; each rank's heartbeat reports the last
    one it issued in every group, which is how a timeout names the rank that never got there.
    The communication log (``comm_log()``) is written here, by the group, not by the code calling it.
    """

    def __init__(self, backend_name, rank, size, store, timeout, ranks=None, name="world", world=None):
        self.backend_name, self.rank, self.size = backend_name, rank, size
        self.store, self.timeout = store, timeout
        self.ranks = list(range(size)) if ranks is None else list(ranks)
        self.name, self.world = name, world or self  # the world group is its own world
        self.backend = None
        self.broken = False
        self.seq, self.last = 0, "init_process_group"
        self.stats = {}
        self.subgroups, self.groups_made = {}, 0  # world only: name -> ProcessGroup, for the heartbeat
        # world only: the last LOG_LIMIT collectives of every group, in issue order (the file keeps them all)
        self.log, self.log_file = collections.deque(maxlen=LOG_LIMIT), None
        self.wake_heartbeat = lambda: None
        self._lock = threading.Lock()

    @property
    def global_rank(self):
        return self.ranks[self.rank]

    def _next_seq(self, name):
        with self._lock:
            self.seq += 1
            self.last = name
        if self.world is not self:
            self.world.last = f"{name} in {self.name}"
        self.world.wake_heartbeat()  # tell the store at once: a rank may die right after issuing this
        return self.seq

    def progress(self):
        return self.seq, self.last, {n: g.seq for n, g in list(self.subgroups.items())}

    def count(self, name, nbytes, peer=None):
        """Count a collective in this group's statistics and append it to the world's log."""
        entry = self.stats.setdefault(name, {"calls": 0, "bytes": 0})
        entry["calls"] += 1
        entry["bytes"] += int(nbytes)
        record = {"op": name, "bytes": int(nbytes), "group": self.name, "seq": self.seq}
        if peer is not None:
            record["peer"] = int(peer)
        world = self.world
        world.log.append(record)
        if world.log_file is not None:
            world.log_file.write(json.dumps(record) + "\n")
            world.log_file.flush()

    def timeout_error(self, work, limit):
        """The DistTimeoutError for ``work``: which ranks never reached it, and whether they died."""
        self.broken = self.world.broken = True  # exit without MPI_Finalize, which would wait for the dead
        sub = self.world is not self
        where = f" in group {self.name} (ranks {self.ranks})" if sub else ""
        head = (f"{work.name} (collective #{work.seq}{where}) timed out after {limit:g} s on rank "
                f"{self.global_rank} of {self.world.size}")
        try:
            status = self.store.status()
        except (DistributedError, OSError) as e:
            return DistTimeoutError(f"{head}; the store is unreachable too ({e}), so rank 0 or the "
                                    f"launcher hosting it has probably died")
        missing = []
        for r in self.ranks:
            s = status.get(r)
            if r == self.global_rank:
                continue
            if s is None:
                missing.append(f"rank {r} (never joined)")
                continue
            seq = s.get("groups", {}).get(self.name, 0) if sub else s["seq"]
            last = f"#{seq}{' in ' + self.name if sub else ''} (last of all: {s['what']})"
            if not s["alive"]:
                how = "left (destroy_process_group)" if s["left"] else "died"
                missing.append(f"rank {r} ({how} {s['age']:.1f} s ago; the last collective it reported was {last})")
            elif seq < work.seq:
                missing.append(f"rank {r} (alive, but its last collective is {last})")
        if not missing:
            return DistTimeoutError(f"{head}; every rank reached it, so the transport itself is stuck")
        return DistTimeoutError(f"{head}; waiting for {', '.join(missing)}")


_world = None
_generation = 0  # how many groups this process has initialised: fresh store keys for each


def _group():
    if _world is None:
        raise DistributedError("Default process group has not been initialized, please make sure to call "
                               "init_process_group.")
    return _world


def _seconds(timeout):
    if timeout is None:
        timeout = default_pg_timeout
    seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else float(timeout)
    if seconds <= 0:
        raise ArgumentError(f"init_process_group: timeout must be positive, got {timeout!r}")
    return seconds


def _env_int(*names):
    for name in names:
        if os.environ.get(name, "") != "":
            return int(os.environ[name])
    return None


def init_process_group(backend="mpi", init_method=None, rank=None, world_size=None, timeout=None,
                       store=None):
    """Join the job. ``backend``: 'mpi' (CPU, mpi4py) or 'nccl' (GPU, cupy.cuda.nccl).

    ``init_method``: 'env://' (MASTER_ADDR / MASTER_PORT, the default) or 'tcp://host:port'; ``store``:
    a TCPStore to meet at instead. ``timeout`` (seconds or timedelta) bounds the rendezvous and every
    collective: past it, a DistTimeoutError names the ranks that did not arrive.
    """
    global _world, _generation
    if _world is not None:
        raise DistributedError("init_process_group: trying to initialize the default process group twice")
    name = str(backend).lower()
    if name not in ("mpi", "nccl"):
        raise ArgumentError(f"init_process_group: unknown backend {backend!r} (use 'mpi' or 'nccl')")
    seconds = _seconds(timeout)
    rank = _env_int("RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK") if rank is None else int(rank)
    size = _env_int("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE") if world_size is None else int(world_size)
    if rank is None or size is None:
        rank, size = (0, 1) if rank is None and size is None else (rank, size)
    if rank is None or size is None or not 0 <= rank < size:
        raise ArgumentError(f"init_process_group: rank {rank} is not in a world of size {size}")
    _generation += 1
    prefix = f"g{_generation}/"
    address = _address(init_method)
    mpi_first = store is None and address is None and size > 1
    if mpi_first:  # plain mpiexec: MPI can rendezvous by itself; it then hands out a store for heartbeats
        if name != "mpi" and "PMI_RANK" not in os.environ and "OMPI_COMM_WORLD_RANK" not in os.environ:
            raise DistributedError(f"init_process_group(backend={name!r}): no MASTER_ADDR/MASTER_PORT and "
                                   f"not started by mpiexec; use python -m minigrad.distributed.run")
        store = _store_through_mpi(rank, seconds)
    elif store is None:
        host, port = address or ("127.0.0.1", 0)
        hosted = os.environ.get("MINIGRAD_STORE_HOSTED") == "1"  # the launcher hosts it
        store = TCPStore(host, port, is_master=(rank == 0 and not hosted), timeout=seconds)
    group = ProcessGroup(name, rank, size, store, seconds)
    group.prefix = prefix
    _join(group, prefix, name)
    if os.environ.get("MINIGRAD_COMM_LOG"):  # a folder: each rank appends its log to rank<r>.jsonl
        group.log_file = open(os.path.join(os.environ["MINIGRAD_COMM_LOG"], f"rank{rank}.jsonl"), "a")
    group.wake_heartbeat = store.start_heartbeat(rank, group.progress, interval=min(0.2, seconds / 10))
    try:
        if name == "mpi":
            from .backend_mpi import MPIBackend
            group.backend = MPIBackend(group)
        else:
            from .backend_nccl import NCCLBackend
            group.backend = NCCLBackend(group, prefix)
    except BaseException:
        store.close()
        raise
    _world = group


def _address(init_method):
    if init_method in (None, "env://"):
        addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
        if port:
            return addr or "127.0.0.1", int(port)
        if init_method == "env://":
            raise ArgumentError("init_process_group: init_method='env://' needs MASTER_PORT (and MASTER_ADDR)")
        return None
    if isinstance(init_method, str) and init_method.startswith("tcp://"):
        host, _, port = init_method[len("tcp://"):].rpartition(":")
        return host or "127.0.0.1", int(port)
    raise ArgumentError(f"init_process_group: unsupported init_method {init_method!r} "
                        f"(use 'env://' or 'tcp://host:port')")


def _store_through_mpi(rank, seconds):
    from .backend_mpi import mpi
    comm = mpi().COMM_WORLD
    host = os.environ.get("MASTER_ADDR", "127.0.0.1")
    store = TCPStore(host, 0, is_master=True, timeout=seconds) if rank == 0 else None
    port = comm.bcast(store.port if store else None, root=0)
    return store or TCPStore(host, port, timeout=seconds)


def _join(group, prefix, name):
    """Everyone says hello at the store; wait for all, or name who is missing."""
    store, rank, size = group.store, group.rank, group.size
    store.set(f"{prefix}join/{rank}", b"1")
    store.add(f"{prefix}joined", 1)
    if store.try_get(f"{prefix}size", 0) is None:
        store.set(f"{prefix}size", str(size))
    if int(store.get(f"{prefix}size")) != size:
        raise DistributedError(f"init_process_group: rank {rank} was told world_size={size}, but another "
                               f"rank said {int(store.get(prefix + 'size'))}")
    import time
    deadline, delay = time.monotonic() + group.timeout, 0.001
    while int(store.add(f"{prefix}joined", 0)) < size:
        if time.monotonic() > deadline:
            missing = [r for r in range(size) if store.try_get(f"{prefix}join/{r}", 0) is None]
            store.close()
            raise DistTimeoutError(
                f"init_process_group(backend={name!r}): rank {rank} waited {group.timeout:g} s, but rank(s) "
                f"{missing} of {size} never joined (did they crash before init, or start elsewhere?)")
        time.sleep(delay)
        delay = min(2 * delay, 0.05)


def destroy_process_group():
    """Leave the job: close the backend's communicator and the store connection."""
    global _world
    group = _group()
    _world = None
    try:
        for sub in group.subgroups.values():
            sub.backend.close()
        if group.backend is not None:
            group.backend.close()
    finally:
        group.store.close()
        if group.log_file is not None:
            group.log_file.close()


def is_initialized():
    return _world is not None


def get_rank(group=None):
    """This process's rank in ``group`` (None: the world)."""
    return _group().rank if group is None else group.rank


def get_world_size(group=None):
    return _group().size if group is None else group.size


def get_backend():
    return _group().backend_name


def is_available():
    return True


def is_mpi_available():
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def is_nccl_available():
    try:
        from cupy.cuda import nccl
    except Exception:  # ImportError, or a CuPy without NCCL
        return False
    return bool(getattr(nccl, "available", True))


def comm_stats(group=None):
    """{collective: {"calls", "bytes"}}: what this rank handed to each collective of ``group`` (default:
    the world; ``"all"``: every group summed) since the last reset (payload bytes; a ring all-reduce
    moves 2(N-1)/N of them per rank)."""
    world = _group()
    if group != "all":
        return {k: dict(v) for k, v in (group or world).stats.items()}
    total = {}
    for g in [world] + list(world.subgroups.values()):
        for k, v in g.stats.items():
            t = total.setdefault(k, {"calls": 0, "bytes": 0})
            t["calls"] += v["calls"]
            t["bytes"] += v["bytes"]
    return total


def comm_log():
    """This rank's collectives since the last reset (the last LOG_LIMIT), in issue order, every group's: a list of
    ``{"op", "bytes", "group", "seq"[, "peer"]}`` (``peer``: the other rank of a send or recv). Written by the
    process group as each collective is issued; with MINIGRAD_COMM_LOG=<folder> also appended to
    <folder>/rank<r>.jsonl as it happens."""
    return [dict(r) for r in _group().log]


def reset_comm_stats():
    world = _group()
    for g in [world] + list(world.subgroups.values()):
        g.stats.clear()
    world.log.clear()


@atexit.register
def _exit_if_broken():
    """After a timeout, MPI_Finalize would wait forever for the dead peer: leave without it."""
    if _world is not None and _world.broken:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
