"""The sandbox child: runs one part of one submission and writes raw observations. NOT trusted.

Started by `sandbox.run_part` as ``python -I -S -B _child.py TOKEN_FD JOB_JSON``. Before any student code
runs it (1) reads its random result token from an inherited pipe and closes it, (2) confines itself:
pids cgroup or RLIMIT_NPROC, CPU / address-space / file-size rlimits, no capabilities, Landlock (only
the sandbox folders and the Python installation are visible, no network, no signals outside), (3) sets
``sys.path`` to the runtime copy (minigrad, this harness, the spec) plus numpy's site folder, and
captures the functions it writes results with. Then it runs the cells, and for every case calls the
spec's observe function and writes ``<token>-<k>.npz`` (arrays) and ``<token>-<k>.json`` (status).

Everything written here is an observation, never a verdict: the parent reloads the arrays with
``allow_pickle=False`` and judges them itself, so a submission that subverts this file (it can: it runs
in the same interpreter) can at most report wrong observations for its own tests.

Standard library only at the top: numpy is imported after the sandbox is in place.
"""
import json
import os
import sys
import time


def _write(out_dir, name, data, _open=os.open, _write=os.write, _close=os.close):
    fd = _open(os.path.join(out_dir, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = _write(fd, view)
            view = view[n:]
    finally:
        _close(fd)


def _confine(job):
    """Apply every limit the parent asked for. Returns a list of notes (what was enforced)."""
    import resource
    notes = []
    lim = job["limits"]
    cg = lim.get("cgroup")
    if cg:  # must happen first: it needs root, which we drop below
        with open(os.path.join(cg, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
        notes.append("pids cgroup")

    def setl(which, value):
        resource.setrlimit(which, (value, value))

    cpu = int(lim["cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    setl(resource.RLIMIT_AS, int(lim["memory_mb"]) << 20)
    setl(resource.RLIMIT_FSIZE, int(lim["fsize_mb"]) << 20)
    setl(resource.RLIMIT_NOFILE, int(lim.get("nofile", 256)))
    setl(resource.RLIMIT_CORE, 0)
    if lim.get("nproc"):
        setl(resource.RLIMIT_NPROC, int(lim["nproc"]))
        notes.append(f"RLIMIT_NPROC={lim['nproc']}")
    if os.geteuid() == 0:
        _drop_capabilities()
        notes.append("capabilities dropped")
    ll = job.get("landlock")
    if ll:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import _landlock as L
        del sys.path[0]
        rules = [(p, L.READ_EXEC) for p in ll["read"]] + [(p, L.READ | L.WRITE) for p in ll["write"]]
        rules += [(p, L.DROPBOX) for p in ll["dropbox"]] + [(p, L.READ | L.WRITE_FILE) for p in ll["devices"]]
        notes.append(L.restrict(rules))
    return notes


def _drop_capabilities():
    """uid 0 without capabilities: cannot raise its rlimits, leave its cgroup, or bypass permissions."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in range(64):                       # bounding set: nothing comes back through execve
        if libc.prctl(24, cap, 0, 0, 0) != 0:   # PR_CAPBSET_DROP; EINVAL past the last capability
            break
    libc.prctl(47, 4, 0, 0, 0)                  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    if libc.capset(ctypes.byref(Header(0x20080522, 0)), (Data * 2)()) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def _format_error(exc, _cell_prefix="<cell "):
    """The traceback restricted to the student's cells (plus the exception line)."""
    import traceback
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if f.filename.startswith(_cell_prefix)]
    lines = traceback.format_list(mine)     # the harness's own frames mean nothing to a student
    lines += traceback.format_exception_only(type(exc), exc)
    text = "".join(lines)
    return {"type": type(exc).__name__, "message": str(exc)[:2000], "traceback": text[-6000:],
            "in_student_code": bool(mine) or isinstance(exc, SyntaxError)}


def main():
    token_fd, job_path = int(sys.argv[1]), sys.argv[2]
    token = os.read(token_fd, 256).decode().strip()
    os.close(token_fd)
    with open(job_path) as f:
        job = json.load(f)
    out = job["out_dir"]
    runtime = os.path.dirname(job_path)

    # Bound now, before student code can replace module attributes (json.dumps, this module's _write).
    write, dumps = _write, json.dumps

    def put(name, obj):
        write(out, f"{token}-{name}", dumps(obj).encode())

    try:
        notes = _confine(job)
    except BaseException as e:  # the parent reports this as a grader problem, never the student's
        put("sandbox.json", {"ok": False, "error": f"{type(e).__name__}: {e}"})
        os._exit(3)
    put("sandbox.json", {"ok": True, "notes": notes})

    sys.path[:] = [job.get("code_dir", runtime)] + [p for p in sys.path if p] + job["site_dirs"]
    import io
    import linecache
    from autograder._guard import GUARD, lock_tracemalloc, protect_imports
    import numpy as np
    savez, asarray, BytesIO, exit_now = np.savez, np.asarray, io.BytesIO, os._exit
    importlib = __import__("importlib")
    spec_mod = importlib.import_module(job["spec_module"])
    for name in job.get("preload", []):       # what the observes import lazily: bound before student code
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    from autograder.spec import Case, Namespace
    from autograder._guard import IntegrityError
    observers = {j["observe"]: getattr(spec_mod, j["observe"]) for j in job["jobs"]}
    inputs = np.load(os.path.join(runtime, "inputs.npz"), allow_pickle=False)
    cases = {}
    for j in job["jobs"]:
        k = j["k"]
        arrays = {key.split("/", 1)[1]: inputs[key] for key in inputs.files if key.split("/", 1)[0] == str(k)}
        cases[k] = Case(params=j["params"], label=j.get("label", ""), inputs=arrays)

    # ---- the student's code (and the reference for the parts this one builds on) -------------------
    import types
    module = types.ModuleType("submission")
    module.__dict__["__builtins__"] = __builtins__
    import builtins

    def exit(code=None):   # what `site` would have defined; it raises SystemExit like in Jupyter
        raise SystemExit(code)
    builtins.exit = builtins.quit = exit
    sys.modules["submission"] = module
    cell_report = []
    guarded = False
    for i, cell in enumerate(job["cells"]):
        if not guarded and cell["role"] != "preamble":
            lock_tracemalloc()
            protect_imports()
            GUARD.snapshot()            # what the grader relies on, before any student code
            guarded = True
        filename = f"<cell {cell['id']}>" if cell["role"] != "reference" else f"<reference {cell['id']}>"
        src = cell["source"]
        linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
        put(f"cell-{i}.start", {})
        entry = {"id": cell["id"], "role": cell["role"], "ok": True}
        try:
            exec(compile(src, filename, "exec"), module.__dict__)
        except BaseException as e:   # SystemExit, KeyboardInterrupt too: one cell never ends the run
            entry.update(ok=False, error=_format_error(e))
        cell_report.append(entry)
        put(f"cell-{i}.done", entry)
    bad = GUARD.check()
    if bad:
        cell_report.append({"id": "integrity", "role": "integrity", "ok": False,
                            "error": {"type": "IntegrityError", "message": GUARD.describe(bad), "traceback": "",
                                      "in_student_code": False}})
    put("cells.json", cell_report)

    ns = Namespace(module.__dict__, where="your notebook")
    for j in job["jobs"]:
        k = j["k"]
        put(f"{k}.start", {})
        t0 = time.perf_counter()
        try:
            obs = observers[j["observe"]](ns, cases[k])
            if not isinstance(obs, dict):
                raise TypeError(f"observe returned {type(obs).__name__}, not a dict")
            arrays = {}
            for key, value in obs.items():
                a = asarray(value)
                if a.dtype.hasobject:
                    raise TypeError(f"`{key}` is not a numeric array (got {type(value).__name__})")
                arrays[str(key)] = a
            bad = GUARD.check()
            if bad:
                raise IntegrityError(GUARD.describe(bad))
            buf = BytesIO()
            savez(buf, **arrays)
            write(out, f"{token}-{k}.npz", buf.getvalue())
            status = {"ok": True}
        except BaseException as e:
            status = {"ok": False, "error": _format_error(e)}
        status["seconds"] = time.perf_counter() - t0
        put(f"{k}.json", status)
    put("done", {})
    exit_now(0)   # skip the student's atexit handlers and non-daemon threads


if __name__ == "__main__":
    main()
