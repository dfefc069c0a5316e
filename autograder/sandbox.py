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

import json
import math
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .containment import (Capabilities, _kill_cgroup, _live_children, _lock, _make_cgroup, _set_subreaper,
                          _starttime, _sweep, _user_tasks, capabilities, process_limit_mode)
from .runtime import CHILD_FILES, _rmtree, minigrad_dir, runtime_template, site_dirs

__all__ = ["CHILD_FILES", "Capabilities", "ChildRun", "Limits", "capabilities", "load_observation",
           "minigrad_dir", "process_limit_mode", "run_child", "runtime_template", "site_dirs"]


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
    limit_s: float = 0.0                        # the wall-clock limit it ran under

    def describe_exit(self) -> str:
        if self.timed_out:
            return (f"it ran past the part's time limit of {self.limit_s:g} s and was stopped (the whole part "
                    f"runs in one process, so the cases after it could not run)")
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
              inputs: dict[str, object], limits: Limits, keep: str | Path | None = None,
              spec_extra: list[str] | None = None, stubs: list[str] = (), preload: list[str] = ()) -> ChildRun:
    """Run `cells` then observe every job in one sandboxed child; return what it wrote.

    `jobs`: [{"k": int, "observe": function name, "params": {...}, "label": str}];
    `inputs`: {"<k>/<name>": array}. With `keep`, the sandbox folder is copied there (debugging).
    `spec_extra`: the spec's private sibling packages, copied next to it. `stubs`: the names of minigrad
    the child's copy leaves out (autograder/stubs.py). `preload`: modules imported before student code.

    One child at a time per process: the clean-up treats every process re-parented to this one while
    the child ran as the child's (batch grading runs one grader process per submission).
    """
    import numpy as np
    from .runtime import shared
    _set_subreaper(True)
    caps = capabilities()
    template = runtime_template(spec_file, spec_extra, stubs)
    box = Path(tempfile.mkdtemp(prefix="autograder-box-"))
    cgroup = None
    try:
        runtime, work, out = box / "job", box / "work", box / "out"
        if shared():                # the child can read the template but not change it: no copy needed
            code = template
            runtime.mkdir()
        else:                       # else a copy of its own, so no child changes what a later one imports
            code = box / "runtime"
            shutil.copytree(template, code)
            runtime.mkdir()
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
        read_dirs = [str(runtime), str(code), sys.base_prefix, sys.base_exec_prefix, *site_dirs(),
                     "/usr", "/lib", "/lib64", "/bin", "/etc", "/proc", "/sys/devices/system/cpu"]
        job = {
            "spec_module": spec_module,
            "code_dir": str(code),
            "site_dirs": site_dirs(),
            "out_dir": str(out),
            "limits": {"cpu_s": limits.cpu_s, "memory_mb": limits.memory_mb, "fsize_mb": limits.fsize_mb,
                       "nofile": limits.nofile, "nproc": nproc, "cgroup": str(cgroup) if cgroup else None},
            "landlock": ({"read": read_dirs, "write": [str(work)], "dropbox": [str(out)],
                          "devices": ["/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"]}
                         if caps.landlock_abi else None),
            "cells": cells,
            "jobs": jobs,
            "preload": list(preload),
        }
        (runtime / "job.json").write_text(json.dumps(job))
        if caps.sandbox_user:
            for p in (work, work / "tmp", out):
                os.chown(p, uid, -1)
            for p in (box, runtime):
                p.chmod(0o755)
            (runtime / "inputs.npz").chmod(0o644)
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
                    [sys.executable, "-I", "-S", "-B", str(code / "autograder" / "_child.py"), str(r),
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
        return ChildRun(returncode=proc.returncode, timed_out=timed_out, wall_s=wall, limit_s=limits.timeout_s,
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
