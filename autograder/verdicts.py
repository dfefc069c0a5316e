"""Helpers for verdict functions: comparing arrays, numerical gradients, memory traces and budgets.

All of this runs in the trusted parent on raw arrays (the child's observations) and on values the
parent computed itself. Messages are written for the student: which input, which index, what was
expected, how far off. numpy only at the top (spec modules import this file in the child too).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from .spec import Verdict

MiB = 1024 ** 2


def _idx(i) -> str:
    i = tuple(int(x) for x in i)
    return "(" + ", ".join(map(str, i)) + ("," if len(i) == 1 else "") + ")" if i else "()"


def _shape(s) -> str:
    return _idx(s)


def _num(x) -> str:
    return f"{float(x):.6g}"


def as_float_array(name: str, got) -> tuple[np.ndarray | None, str]:
    """`got` as float64, or (None, message) if it is not a real numeric array."""
    if got is None:
        return None, f"{name}: no value was returned"
    a = np.asarray(got)
    if a.dtype.kind == "c":
        return None, f"{name}: result is complex ({a.dtype}), expected real numbers"
    if a.dtype.kind not in "biuf":
        return None, f"{name}: result has dtype {a.dtype}, expected numbers"
    return a.astype(np.float64), ""


def compare(name: str, got, expected, *, atol: float = 1e-6, rtol: float = 1e-5,
            what: str = "output") -> Verdict:
    """Elementwise `got` ~ `expected`, with the worst element named in the message."""
    exp = np.asarray(expected, dtype=np.float64)
    g, msg = as_float_array(name, got)
    if g is None:
        return Verdict.fail(msg)
    if g.shape != exp.shape:
        return Verdict.fail(f"{name}: {what} has shape {_shape(g.shape)}, expected {_shape(exp.shape)}")
    if g.size == 0:
        return Verdict.ok()
    bad_finite = ~np.isfinite(g) & np.isfinite(exp)
    if bad_finite.any():
        i = np.unravel_index(int(np.argmax(bad_finite)), g.shape)
        return Verdict.fail(f"{name}: {what} is {g[i]} at index {_idx(i)} (expected {_num(exp[i])}); "
                            f"{int(bad_finite.sum())} of {g.size} elements are NaN or infinite")
    with np.errstate(invalid="ignore"):
        err = np.abs(g - exp)
        err = np.where(np.isnan(err) & (np.isnan(g) == np.isnan(exp)), 0.0, err)
        tol = atol + rtol * np.abs(exp)
        bad = err > tol
    if not bad.any():
        return Verdict.ok()
    i = np.unravel_index(int(np.argmax(np.where(bad, err / tol, -1.0))), g.shape)
    rel = err[i] / max(abs(exp[i]), 1e-300)
    return Verdict.fail(
        f"{name}: {what} wrong at index {_idx(i)}: got {_num(g[i])}, expected {_num(exp[i])} "
        f"(abs error {err[i]:.3g}, relative error {rel:.3g}); {int(bad.sum())} of {g.size} elements "
        f"outside tolerance (atol={atol:g}, rtol={rtol:g})")


# ---- gradients ---------------------------------------------------------------------------------------
def numeric_vjp(f: Callable[..., np.ndarray], inputs: Sequence[np.ndarray], upstream: np.ndarray | None = None,
                eps: float = 1e-6, wrt: Sequence[int] | None = None) -> list[np.ndarray]:
    """Float64 central differences of ``sum(f(*inputs) * upstream)`` with respect to each input.

    `f` must be trusted code (the reference), it is called 2 * (number of elements) times.
    """
    xs = [np.array(x, dtype=np.float64) for x in inputs]
    out = np.asarray(f(*xs), dtype=np.float64)
    up = np.ones_like(out) if upstream is None else np.asarray(upstream, dtype=np.float64)
    grads = []
    for n, x in enumerate(xs):
        if wrt is not None and n not in wrt:
            grads.append(None)
            continue
        g = np.zeros_like(x)
        flat, gflat = x.reshape(-1), g.reshape(-1)
        for i in range(flat.size):
            old = flat[i]
            flat[i] = old + eps
            hi = float(np.sum(np.asarray(f(*xs), dtype=np.float64) * up))
            flat[i] = old - eps
            lo = float(np.sum(np.asarray(f(*xs), dtype=np.float64) * up))
            flat[i] = old
            gflat[i] = (hi - lo) / (2 * eps)
        grads.append(g)
    return grads


def check_gradient(op: str, input_name: str, analytic, numeric: np.ndarray, *, atol: float = 1e-5,
                   rtol: float = 1e-3) -> Verdict:
    """Analytic (the student's) against numeric (ours) gradient for one input, gradcheck style."""
    num = np.asarray(numeric, dtype=np.float64)
    a, msg = as_float_array(f"{op}: gradient w.r.t. `{input_name}`", analytic)
    if a is None:
        return Verdict.fail(msg)
    if a.shape != num.shape:
        return Verdict.fail(f"{op}: gradient w.r.t. `{input_name}` has shape {_shape(a.shape)}, expected "
                            f"{_shape(num.shape)} (the shape of `{input_name}`)")
    if not np.isfinite(a).all():
        i = np.unravel_index(int(np.argmax(~np.isfinite(a))), a.shape)
        return Verdict.fail(f"{op}: gradient w.r.t. `{input_name}` is {a[i]} at index {_idx(i)} "
                            f"(numeric {_num(num[i])})")
    err = np.abs(a - num)
    tol = atol + rtol * np.abs(num)
    bad = err > tol
    if not bad.any():
        return Verdict.ok()
    i = np.unravel_index(int(np.argmax(np.where(bad, err / tol, -1.0))), a.shape)
    rel = err[i] / max(abs(a[i]), abs(num[i]), 1e-300)
    return Verdict.fail(
        f"{op}: gradient w.r.t. `{input_name}` wrong at index {_idx(i)}: analytic {_num(a[i])}, numeric "
        f"{_num(num[i])}, relative error {rel:.3g}; {int(bad.sum())} of {a.size} elements outside "
        f"tolerance (atol={atol:g}, rtol={rtol:g})")


def check_gradients(what: str, names: Sequence[str], obs: dict, numeric: Sequence[np.ndarray], *,
                    missing: str = "{what}: no gradient reached `{name}`") -> Verdict:
    """``check_gradient`` for each input ``name`` (observed as ``obs['d' + name]``) against its numeric
    gradient; a missing one fails with ``missing`` (formatted with ``what`` and ``name``)."""
    v = Verdict.ok()
    for name, num in zip(names, numeric):
        got = obs.get("d" + name)
        if got is None:
            return Verdict.fail(missing.format(what=what, name=name))
        v = v & check_gradient(f"{what}: backward", name, got, num)
    return v


# ---- memory traces -------------------------------------------------------------------------------------
RESERVE, RELEASE, ALLOC, FREE = 1, 2, 3, 4
KIND_NAMES = {RESERVE: "reserve", RELEASE: "release", ALLOC: "alloc", FREE: "free"}


@dataclass
class TraceReport:
    """What `replay` found. Timelines have one entry per event (after the event)."""
    violations: list[str] = field(default_factory=list)
    allocated: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    reserved: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def peak_allocated(self) -> int:
        return int(self.allocated.max()) if self.allocated.size else 0

    @property
    def peak_reserved(self) -> int:
        return int(self.reserved.max()) if self.reserved.size else 0

    fragmentation: float = 0.0     # at the peak of reservation, in minigrad.memory's one sense (replay)

    @property
    def unused_share(self) -> float:
        """1 - allocated / reserved at the moment of peak reservation: the share of reserved memory in no
        live block (free cached blocks, whole or in crumbs). Not fragmentation: see `replay`."""
        if not self.reserved.size or self.peak_reserved == 0:
            return 0.0
        i = int(np.argmax(self.reserved))
        return 1.0 - float(self.allocated[i]) / float(self.reserved[i])


def replay(events, *, alignment: int = 1, capacity: int | None = None, max_violations: int = 5) -> TraceReport:
    """Check an allocator trace and measure it.

    `events`: int array (n, 4) of rows ``[kind, id, addr, size]`` with kinds RESERVE (a segment
    [addr, addr+size) was obtained from the device), RELEASE (segment `id` returned; addr/size ignored),
    ALLOC (block `id` handed out at [addr, addr+size)), FREE (block `id` returned). Checked: every block
    lies inside one live segment, is aligned, overlaps no live block; frees and releases name live
    ids; no segment is released while it holds blocks; reserved bytes never exceed `capacity`.

    `fragmentation` is ``minigrad.memory.fragmentation_of(free_holes(segments, blocks))`` (1 - largest free
    block / all free bytes, the definition of ``CachingAllocator.fragmentation()``) at the moment of peak
    reservation: after the event that first reached the peak and the allocations right after it (the
    block the new segment was reserved for).
    """
    import bisect

    from minigrad.memory.stats import fragmentation_of, free_holes    # imports nothing of minigrad's pool
    ev = np.asarray(events)
    rep = TraceReport()
    if ev.ndim != 2 or ev.shape[1] != 4 or ev.dtype.kind not in "iu":
        rep.violations.append(f"the trace must be an integer array of shape (n, 4), got {ev.dtype} {ev.shape}")
        return rep
    segments: dict[int, tuple[int, int]] = {}       # id -> (addr, size)
    blocks: dict[int, tuple[int, int]] = {}
    starts: list[int] = []                          # live block start addresses, sorted
    ends: dict[int, int] = {}                       # start -> end
    alloc_b = res_b = top = 0
    at_peak = False                                 # a new peak of reservation, its allocations still coming
    allocated = np.zeros(len(ev), np.int64)
    reserved = np.zeros(len(ev), np.int64)

    def bad(i, msg):
        if len(rep.violations) < max_violations:
            kind = KIND_NAMES.get(int(ev[i, 0]), str(int(ev[i, 0])))
            rep.violations.append(f"event {i} ({kind} id={int(ev[i, 1])} addr={int(ev[i, 2])} "
                                  f"size={int(ev[i, 3])}): {msg}")

    for i, (kind, ident, addr, size) in enumerate(ev.tolist()):
        if at_peak and kind != ALLOC:
            rep.fragmentation = fragmentation_of(free_holes(segments.values(), blocks.values()))
            at_peak = False
        if kind == RESERVE:
            if ident in segments:
                bad(i, "segment id already in use")
            elif size <= 0:
                bad(i, "segment size must be positive")
            else:
                for sid, (sa, ss) in segments.items():
                    if addr < sa + ss and sa < addr + size:
                        bad(i, f"overlaps live segment {sid} [{sa}, {sa + ss})")
                        break
                segments[ident] = (addr, size)
                res_b += size
                if capacity is not None and res_b > capacity:
                    bad(i, f"reserved {res_b} bytes, more than the device's {capacity}")
        elif kind == RELEASE:
            if ident not in segments:
                bad(i, "releases a segment that is not reserved")
            else:
                sa, ss = segments[ident]
                j = bisect.bisect_left(starts, sa)
                if j < len(starts) and starts[j] < sa + ss:
                    bad(i, f"segment still holds a live block at {starts[j]}")
                del segments[ident]
                res_b -= ss
        elif kind == ALLOC:
            if ident in blocks:
                bad(i, "block id already live")
            elif size <= 0:
                bad(i, "block size must be positive")
            else:
                if alignment > 1 and addr % alignment:
                    bad(i, f"address {addr} is not a multiple of the alignment {alignment}")
                if not any(sa <= addr and addr + size <= sa + ss for sa, ss in segments.values()):
                    bad(i, f"block [{addr}, {addr + size}) is not inside a reserved segment")
                j = bisect.bisect_right(starts, addr)
                if j > 0 and ends[starts[j - 1]] > addr:
                    bad(i, f"overlaps the live block [{starts[j - 1]}, {ends[starts[j - 1]]})")
                elif j < len(starts) and starts[j] < addr + size:
                    bad(i, f"overlaps the live block [{starts[j]}, {ends[starts[j]]})")
                elif addr in ends:
                    bad(i, f"overlaps the live block at {addr}")
                else:
                    bisect.insort(starts, addr)
                    ends[addr] = addr + size
                blocks[ident] = (addr, size)
                alloc_b += size
        elif kind == FREE:
            if ident not in blocks:
                bad(i, "frees a block that is not live")
            else:
                a, s = blocks.pop(ident)
                if ends.get(a) == a + s:
                    del ends[a]
                    starts.pop(bisect.bisect_left(starts, a))
                alloc_b -= s
        else:
            bad(i, "unknown event kind")
        allocated[i], reserved[i] = alloc_b, res_b
        if res_b > top:
            top, at_peak = res_b, True
    if at_peak:
        rep.fragmentation = fragmentation_of(free_holes(segments.values(), blocks.values()))
    rep.allocated, rep.reserved = allocated, reserved
    return rep


def mib(n: float) -> str:
    return f"{n / 2**20:.2f} MiB" if abs(n) >= 2**20 else (f"{n / 2**10:.1f} KiB" if abs(n) >= 2**10 else f"{int(n)} B")


def check_budget(what: str, measured: float, budget: float, *, unit: Callable[[float], str] = mib,
                 reference: float | None = None, plot: str | None = None) -> Verdict:
    """`measured` (computed by the parent) within `budget`; the message carries both and the ratio."""
    ref = f"; the reference needs {unit(reference)}" if reference is not None else ""
    arts = [plot] if plot else []
    plot_note = f" (timeline: {Path(plot).name})" if plot else ""
    if measured <= budget:
        return Verdict(True, f"{what}: {unit(measured)} within the budget of {unit(budget)}{ref}", arts)
    return Verdict(False, f"{what}: {unit(measured)} is over the budget of {unit(budget)} "
                          f"({measured / budget:.2f}x the budget){ref}{plot_note}", arts)


def plot_timeline(path: str | Path, series: dict[str, np.ndarray], *, budget: float | None = None,
                  title: str = "", ylabel: str = "MiB") -> str:
    """A step plot of byte counts per event (drawn in MiB), the budget as a dashed line. Series whose name
    says "reference" are drawn first, wide and pale, so the student's line on top never hides them.
    Returns the path."""
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 3.4), dpi=100)
    order = sorted(series, key=lambda name: "reference" not in name)
    for name in order:
        ys = np.asarray(series[name], dtype=np.float64) / MiB
        style = dict(linewidth=4, alpha=0.35) if "reference" in name else dict(linewidth=1.3)
        ax.step(np.arange(len(ys)), ys, where="post", label=name, **style)
    if budget is not None:
        ax.axhline(budget / MiB, color="red", linestyle="--", linewidth=1, label="budget")
    ax.set_xlabel("operation")
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.set_title(title, fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)   # off the curves
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return str(path)
