"""Containment on this machine: what it can enforce (Landlock, a process limit, a sandbox user), and
the sweep that kills whatever a child left behind (its group, its session, its cgroup, orphans).

Used by `sandbox.run_child`; split out because it is about the machine, not about one run."""
from __future__ import annotations

import ctypes
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import _landlock
from .runtime import site_dirs

SANDBOX_USER_ENV = "AUTOGRADER_SANDBOX_USER"
NO_LANDLOCK_ENV = "AUTOGRADER_NO_LANDLOCK"     # for debugging only
_CGROUP_V1 = Path("/sys/fs/cgroup/pids")
_CGROUP_V2 = Path("/sys/fs/cgroup")
_CGROUP_NAME = "minigrad-autograder"


@dataclass
class Capabilities:
    landlock_abi: int
    process_limit: str | None        # "cgroup-v1", "cgroup-v2", "rlimit" or None (not contained!)
    sandbox_user: str | None         # set when root drops to another user
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        ll = f"landlock ABI {self.landlock_abi}" if self.landlock_abi else "no landlock (filesystem not isolated)"
        pl = self.process_limit or "NO process limit (fork bombs are only killed afterwards)"
        user = f", runs as {self.sandbox_user}" if self.sandbox_user else ""
        return f"{ll}; process limit: {pl}{user}"


_caps: Capabilities | None = None


def capabilities() -> Capabilities:
    global _caps
    if _caps is None:
        abi = 0 if os.environ.get(NO_LANDLOCK_ENV) else _landlock.abi_version()
        user = os.environ.get(SANDBOX_USER_ENV) if os.geteuid() == 0 else None
        mode = process_limit_mode(user)
        notes = []
        if mode is None and os.geteuid() == 0 and _probe_user("nobody"):
            user, mode = "nobody", "rlimit"          # e.g. Gradescope: root, cgroups read-only
            notes.append("no writable pids cgroup: running submissions as nobody")
        _caps = Capabilities(abi, mode, user, notes)
    return _caps


def _probe_user(name: str) -> bool:
    """Can `name` run this interpreter and import numpy? (Not if Python lives under /root, say.)"""
    try:
        import pwd
        pw = pwd.getpwnam(name)
        code = f"import sys; sys.path[:0] = {site_dirs()!r}; import numpy"
        r = subprocess.run([sys.executable, "-I", "-S", "-c", code], user=pw.pw_uid, group=pw.pw_gid,
                           extra_groups=[], cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=60)
        return r.returncode == 0
    except Exception:
        return False


def process_limit_mode(sandbox_user: str | None = None) -> str | None:
    """How fork bombs are stopped.

    RLIMIT_NPROC counts *all* processes (threads) of a user and is ignored for root. So: as an ordinary
    user, the child's RLIMIT_NPROC is the user's current count plus a headroom (other programs of the
    user keep their own limits); as root dropping to `sandbox_user`, the same for that user; as root
    otherwise, a pids cgroup whose ``pids.max`` is the headroom. None when neither is possible.
    """
    if os.geteuid() != 0 or sandbox_user:
        return "rlimit"
    if _cgroup_base("v1") is not None:
        return "cgroup-v1"
    if _cgroup_base("v2") is not None:
        return "cgroup-v2"
    return None


def _cgroup_base(kind: str) -> Path | None:
    try:
        if kind == "v1":
            if not (_CGROUP_V1 / "cgroup.procs").exists():
                return None
            base = _CGROUP_V1 / _CGROUP_NAME
            base.mkdir(exist_ok=True)
            return base if os.access(base, os.W_OK) else None
        ctl = _CGROUP_V2 / "cgroup.controllers"
        if not ctl.exists() or "pids" not in ctl.read_text().split():
            return None
        sub = _CGROUP_V2 / "cgroup.subtree_control"
        if "pids" not in sub.read_text().split():
            sub.write_text("+pids")
        return _CGROUP_V2 if os.access(_CGROUP_V2, os.W_OK) else None
    except OSError:
        return None


def _make_cgroup(limit: int) -> Path | None:
    caps = capabilities()
    if caps.process_limit not in ("cgroup-v1", "cgroup-v2"):
        return None
    base = _cgroup_base(caps.process_limit[-2:])
    cg = base / (f"ag-{os.getpid()}-{secrets.token_hex(6)}" if caps.process_limit == "cgroup-v2"
                 else f"{os.getpid()}-{secrets.token_hex(6)}")
    cg.mkdir()
    (cg / "pids.max").write_text(str(limit))
    return cg


def _user_tasks(uid: int) -> int:
    """Processes + threads owned by `uid` (what RLIMIT_NPROC counts)."""
    n = 0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/status") as f:
                uid_ok = threads = None
                for line in f:
                    if line.startswith("Uid:"):
                        uid_ok = int(line.split()[1]) == uid
                    elif line.startswith("Threads:"):
                        threads = int(line.split()[1])
                if uid_ok:
                    n += threads or 1
        except (OSError, ValueError):
            continue
    return n


_live_children: set[int] = set()
_lock = threading.Lock()


def _set_subreaper(on: bool) -> None:
    """While a child runs, processes it orphans are re-parented to us (so the sweep finds them)."""
    if sys.platform != "linux":
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(36, int(on), 0, 0, 0)   # PR_SET_CHILD_SUBREAPER
    except Exception:
        pass


def _proc_table():
    """(pid, ppid, pgrp, session, starttime, state) for every process we can see."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                raw = f.read().decode(errors="replace")
        except OSError:
            continue
        rest = raw[raw.rfind(")") + 2:].split()
        try:
            out.append((int(d), int(rest[1]), int(rest[2]), int(rest[3]), int(rest[19]), rest[0]))
        except (IndexError, ValueError):
            continue
    return out


def _starttime(pid: int) -> int:
    for p in _proc_table():
        if p[0] == pid:
            return p[4]
    return 0


def _sweep(child_pid: int, child_start: int, cgroup: Path | None) -> int:
    """Kill whatever the child left behind. Returns how many processes were killed."""
    me = os.getpid()
    killed = 0
    for _ in range(500):
        victims = set()
        for pid, ppid, pgrp, sid, start, state in _proc_table():
            if pid == me:
                continue
            mine = ppid == me and start >= child_start and pid not in _live_children
            if state == "Z":
                if mine:
                    victims.add(pid)   # reaped below
                continue
            if pgrp == child_pid or sid == child_pid or mine:
                victims.add(pid)
        if cgroup is not None:
            try:
                victims |= {int(x) for x in (cgroup / "cgroup.procs").read_text().split()}
            except OSError:
                pass
        if not victims:
            break
        for v in victims:
            try:
                os.kill(v, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.005)
        for v in victims:
            try:
                os.waitpid(v, os.WNOHANG)
            except ChildProcessError:
                pass
    if cgroup is not None:
        for _ in range(200):
            try:
                cgroup.rmdir()
                break
            except OSError:
                time.sleep(0.01)
    return killed


def _kill_cgroup(cgroup: Path) -> None:
    for _ in range(200):
        try:
            pids = [int(x) for x in (cgroup / "cgroup.procs").read_text().split()]
        except OSError:
            pids = []
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        try:
            cgroup.rmdir()
            return
        except OSError:
            time.sleep(0.01)
