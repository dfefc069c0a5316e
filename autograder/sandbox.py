"""Running untrusted code: one child process per part, confined, timed, and cleaned up after.

What the child gets (see README "The sandbox"):

* a fresh interpreter, ``python -I -S -B``: no ``PYTHON*`` variables, no user site, no ``.pth`` hooks (so
  no editable-install finder pointing into the repository); ``sys.path`` is set by the harness to a
  private *runtime* copy (minigrad, the harness, the spec module, the student's cells) and numpy's
  site folder. It is never given the repository's path.
* a temporary folder: ``runtime/`` (read only), ``work/`` (its cwd, HOME and TMPDIR), ``out/`` (a
  drop box for results: files can be created there but the folder cannot be listed);
* stdin from /dev/null, stdout discarded, stderr to a capped file (only shown for crashes), a scrubbed
  environment, its own session / process group;
* limits: wall clock (the parent kills the whole group), RLIMIT_CPU, RLIMIT_AS, RLIMIT_FSIZE,
  RLIMIT_NOFILE, no core files; a process limit (see `process_limit_mode`); as root, no capabilities;
  where the kernel has it, Landlock: nothing outside those folders and the Python installation can be
  read or written, no TCP, no signals to processes outside the sandbox.

After the child ends, every process it left behind is killed: its process group and session, the pids
cgroup, and orphans re-parented to us (the grading process is a child subreaper).
"""
from __future__ import annotations

import atexit
import ctypes
import importlib.util
import json
import math
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from . import _landlock
from .spec import PACKAGE_DIR

CHILD_FILES = ["spec.py", "verdicts.py", "_child.py", "_landlock.py"]   # what spec modules may import
SANDBOX_USER_ENV = "AUTOGRADER_SANDBOX_USER"
NO_LANDLOCK_ENV = "AUTOGRADER_NO_LANDLOCK"     # for debugging only
_CGROUP_V1 = Path("/sys/fs/cgroup/pids")
_CGROUP_V2 = Path("/sys/fs/cgroup")
_CGROUP_NAME = "minigrad-autograder"


@dataclass
class Limits:
    timeout_s: float = 10.0          # wall clock, per child
    memory_mb: int = 2048            # RLIMIT_AS
    fsize_mb: int = 64               # largest file the child may write (observations, stderr)
    nofile: int = 256
    nproc_headroom: int = 64         # processes/threads the child may add (fork bombs stop here)
    max_observation_mb: int = 64     # largest observation file the parent will load

    @property
    def cpu_s(self) -> int:
        return int(math.ceil(self.timeout_s)) + 1


# ---- what this machine offers -------------------------------------------------------------------
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


# ---- the runtime copy -------------------------------------------------------------------------------
_templates: dict[str, Path] = {}
_template_root: Path | None = None


def _cleanup_templates():
    if _template_root is not None:
        shutil.rmtree(_template_root, ignore_errors=True)


def minigrad_dir() -> Path | None:
    spec = importlib.util.find_spec("minigrad")
    if spec is None:
        return None
    locs = list(spec.submodule_search_locations or [])
    return Path(locs[0]) if locs else None


def runtime_template(spec_file: str) -> Path:
    """A folder with what every child of this assignment imports; built once per grading process."""
    global _template_root
    key = str(Path(spec_file).resolve())
    if key in _templates:
        return _templates[key]
    if _template_root is None:
        _template_root = Path(tempfile.mkdtemp(prefix="autograder-runtime-"))
        atexit.register(_cleanup_templates)
    t = _template_root / f"t{len(_templates)}"
    ag = t / "autograder"
    (ag / "assignments").mkdir(parents=True)
    (ag / "__init__.py").write_text('"""The autograder inside the sandbox: only what spec modules import."""\n\n\n'
                                    'def check(*args, **kwargs):\n    """Self-checks do nothing while grading."""\n')
    (ag / "assignments" / "__init__.py").write_text("")
    for name in CHILD_FILES:
        shutil.copy2(PACKAGE_DIR / name, ag / name)
    spec = Path(spec_file)
    if spec.is_dir():                                   # a spec package: its modules, not its caches
        shutil.copytree(spec, ag / "assignments" / spec.name, ignore=shutil.ignore_patterns("__pycache__"))
    else:
        shutil.copy2(spec, ag / "assignments" / spec.name)
    mg = minigrad_dir()
    if mg is not None:
        shutil.copytree(mg, t / "minigrad", ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "tests"))
    import compileall
    compileall.compile_dir(str(t), quiet=2, workers=1)   # children run with -B; ship bytecode ready
    _templates[key] = t
    return t


def site_dirs() -> list[str]:
    """Folders the child needs on sys.path besides the stdlib: wherever numpy is installed."""
    import numpy
    return [str(Path(numpy.__file__).resolve().parent.parent)]


# ---- one child --------------------------------------------------------------------------------------
@dataclass
class ChildRun:
    """What came back from one child. Everything except returncode/timed_out was written by the child."""
    returncode: int | None
    timed_out: bool
    wall_s: float
    sandbox: dict | None                        # {"ok":..., "notes"/"error"}
    cells: list[dict] | None                    # per-cell report (None if the child died before the end)
    cell_started: list[int]                     # indexes of cells that started
    cell_done: list[int]
    started: set[int]                           # case indexes that started
    status: dict[int, dict]                     # case index -> status json
    observations: dict[int, dict]               # case index -> {name: array} (validated load)
    observation_errors: dict[int, str]
    done: bool
    stderr_tail: str

    def describe_exit(self) -> str:
        if self.timed_out:
            return "it ran past its time limit and was stopped"
        rc = self.returncode
        if rc is None:
            return "it did not finish"
        if rc < 0:
            sig = -rc
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
            hint = {"SIGXCPU": " (CPU time limit)", "SIGXFSZ": " (wrote more output than allowed)",
                    "SIGSEGV": " (segmentation fault)", "SIGKILL": " (killed, possibly out of memory)",
                    "SIGABRT": " (aborted)"}.get(name, "")
            return f"the process was killed by {name}{hint}"
        return (f"the process exited with code {rc} before the grader finished"
                f" (does your code call sys.exit(), os._exit() or quit()?)")


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


def _read_json(path: Path, limit: int = 1 << 20):
    try:
        if path.stat().st_size > limit:
            return None
        obj = json.loads(path.read_bytes())
        return obj if isinstance(obj, (dict, list)) else None
    except (OSError, ValueError):
        return None


def load_observation(path: Path, max_bytes: int) -> dict:
    """Load a child's .npz without pickle, refusing anything oversized. Raises ValueError."""
    import numpy as np
    size = path.stat().st_size
    if size > max_bytes:
        raise ValueError(f"observation file is {size >> 20} MB (limit {max_bytes >> 20} MB)")
    with zipfile.ZipFile(path) as zf:
        total = sum(i.file_size for i in zf.infolist())
        if total > max_bytes:
            raise ValueError(f"observations unpack to {total >> 20} MB (limit {max_bytes >> 20} MB)")
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: np.array(z[k]) for k in z.files}
    except Exception as e:
        raise ValueError(f"unreadable observations ({type(e).__name__}: {e})") from None


def run_child(*, spec_file: str, spec_module: str, cells: list[dict], jobs: list[dict],
              inputs: dict[str, object], limits: Limits, keep: str | Path | None = None) -> ChildRun:
    """Run `cells` then observe every job in one sandboxed child; return what it wrote.

    `jobs`: [{"k": int, "observe": function name, "params": {...}, "label": str}];
    `inputs`: {"<k>/<name>": array}. With `keep`, the sandbox folder is copied there (debugging).

    One child at a time per process: the clean-up treats every process re-parented to this one while
    the child ran as the child's (batch grading runs one grader process per submission).
    """
    import numpy as np
    _set_subreaper(True)
    caps = capabilities()
    template = runtime_template(spec_file)
    box = Path(tempfile.mkdtemp(prefix="autograder-box-"))
    cgroup = None
    try:
        runtime, work, out = box / "runtime", box / "work", box / "out"
        shutil.copytree(template, runtime)
        (work / "tmp").mkdir(parents=True)
        out.mkdir()
        np.savez(runtime / "inputs.npz", **inputs)
        token = secrets.token_hex(16)
        nproc = None
        uid, gid = os.geteuid(), os.getegid()
        if caps.process_limit == "rlimit":
            if caps.sandbox_user:
                import pwd
                pw = pwd.getpwnam(caps.sandbox_user)
                uid, gid = pw.pw_uid, pw.pw_gid
            nproc = _user_tasks(uid) + limits.nproc_headroom
        else:
            cgroup = _make_cgroup(limits.nproc_headroom)
        read_dirs = [str(runtime), sys.base_prefix, sys.base_exec_prefix, *site_dirs(),
                     "/usr", "/lib", "/lib64", "/bin", "/etc", "/proc", "/sys/devices/system/cpu"]
        job = {
            "spec_module": spec_module,
            "site_dirs": site_dirs(),
            "out_dir": str(out),
            "limits": {"cpu_s": limits.cpu_s, "memory_mb": limits.memory_mb, "fsize_mb": limits.fsize_mb,
                       "nofile": limits.nofile, "nproc": nproc, "cgroup": str(cgroup) if cgroup else None},
            "landlock": ({"read": read_dirs, "write": [str(work)], "dropbox": [str(out)],
                          "devices": ["/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"]}
                         if caps.landlock_abi else None),
            "cells": cells,
            "jobs": jobs,
        }
        (runtime / "job.json").write_text(json.dumps(job))
        if caps.sandbox_user:
            for p in (work, work / "tmp", out):
                os.chown(p, uid, -1)
            for p in (box, runtime):
                p.chmod(0o755)
        stderr_path = box / "stderr.txt"
        env = {"PATH": "/usr/bin:/bin", "HOME": str(work), "TMPDIR": str(work / "tmp"), "LANG": "C.UTF-8",
               "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "MPLBACKEND": "Agg", "MPLCONFIGDIR": str(work / ".mpl")}
        r, w = os.pipe()
        extra = {}
        if caps.sandbox_user:
            extra = {"user": uid, "group": gid, "extra_groups": []}
        t0 = time.monotonic()
        with open(stderr_path, "wb") as err:
            with _lock:
                proc = subprocess.Popen(
                    [sys.executable, "-I", "-S", "-B", str(runtime / "autograder" / "_child.py"), str(r),
                     str(runtime / "job.json")],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, cwd=work, env=env,
                    pass_fds=(r,), start_new_session=True, close_fds=True, **extra)
                _live_children.add(proc.pid)
        child_start = _starttime(proc.pid)
        os.close(r)
        os.write(w, token.encode())
        os.close(w)
        timed_out = False
        try:
            proc.wait(timeout=limits.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        wall = time.monotonic() - t0
        _live_children.discard(proc.pid)
        try:
            os.killpg(proc.pid, signal.SIGKILL)   # leftovers in the group
        except (ProcessLookupError, PermissionError):
            pass
        _sweep(proc.pid, child_start, cgroup)
        cgroup = None

        # ---- read back only the files named with our token -------------------------------------------
        def f(name):
            return out / f"{token}-{name}"

        max_b = limits.max_observation_mb << 20
        started, status, obs, obs_err = set(), {}, {}, {}
        for j in jobs:
            k = j["k"]
            if f(f"{k}.start").exists():
                started.add(k)
            st = _read_json(f(f"{k}.json"))
            if isinstance(st, dict):
                status[k] = st
                if st.get("ok"):
                    try:
                        obs[k] = load_observation(f(f"{k}.npz"), max_b)
                    except (OSError, ValueError, zipfile.BadZipFile) as e:
                        obs_err[k] = str(e) or type(e).__name__
        cell_started = [i for i in range(len(cells)) if f(f"cell-{i}.start").exists()]
        cell_done = [i for i in range(len(cells)) if f(f"cell-{i}.done").exists()]
        cells_report = _read_json(f("cells.json"))
        try:
            with open(stderr_path, "rb") as e:
                e.seek(max(0, stderr_path.stat().st_size - 3000))
                tail = e.read().decode(errors="replace")
        except OSError:
            tail = ""
        if keep:
            shutil.copytree(box, Path(keep), dirs_exist_ok=True)
        return ChildRun(returncode=proc.returncode, timed_out=timed_out, wall_s=wall,
                        sandbox=_read_json(f("sandbox.json")),
                        cells=cells_report if isinstance(cells_report, list) else None,
                        cell_started=cell_started, cell_done=cell_done, started=started, status=status,
                        observations=obs, observation_errors=obs_err, done=f("done").exists(),
                        stderr_tail=tail)
    finally:
        if cgroup is not None:      # only if something above failed before the normal sweep
            _kill_cgroup(cgroup)
        _set_subreaper(False)
        _rmtree(box)


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


def _rmtree(path: Path) -> None:
    """Remove a sandbox folder even if the student made parts of it unreadable."""
    def fix(func, p, _exc):
        try:
            os.chmod(os.path.dirname(p), 0o700)
            os.chmod(p, 0o700)
            func(p)
        except OSError:
            pass
    shutil.rmtree(path, onerror=fix)
