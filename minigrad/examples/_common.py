"""Plumbing shared by the training examples: flags, device, BLAS threads, progress bars, plots, checkpoints.

Nothing here is needed to *use* minigrad; it keeps each example focused on its model and training loop.
"""
import argparse
import contextlib
import math
import os
import sys
import time

import minigrad as mg


# --- flags -----------------------------------------------------------------------------------------------
def make_parser(doc, *, batch_size, lr):
    """An ArgumentParser with the flags every example takes (the training-length flag is added by each)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch-size", type=int, default=batch_size, help="mini-batch size (default %(default)s)")
    p.add_argument("--lr", type=float, default=lr, help="peak learning rate (default %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="seed for init, shuffling and sampling")
    p.add_argument("--out", default="results", help="folder for the PNG curves and the checkpoint "
                                                    "(default %(default)s/)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="where to train")
    p.add_argument("--threads", type=int, default=1,
                   help="BLAS threads (default 1: the examples' matrices are small, and several OpenBLAS "
                        "pools spinning on 2 cores thrash; 0 leaves the library default)")
    p.add_argument("--no-progress", action="store_true", help="no tqdm progress bars")
    return p


def plain_args(args):
    """The parsed flags as a dict that ``mg.save`` can store (for the checkpoint's record of the run)."""
    return {k: v for k, v in vars(args).items() if v is None or isinstance(v, (bool, int, float, str))}


def resolve_device(name):
    if name == "cuda" and not mg.cuda.is_available():
        raise SystemExit("--device cuda: no usable GPU (CuPy and a CUDA device are needed; "
                         "MINIGRAD_EMULATE_CUDA=1 runs the NumPy emulator)")
    return mg.device(name)


@contextlib.contextmanager
def blas_threads(n):
    """Limit every BLAS thread pool in the process (NumPy's and SciPy's OpenBLAS) to ``n`` threads.

    Uses threadpoolctl (installed with scikit-learn); without it, or with ``n <= 0``, does nothing.
    """
    if n is None or n <= 0:
        yield
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - scikit-learn brings it
        yield
        return
    try:  # load SciPy's BLAS now, so its pool exists when the limit is applied (optim uses it for axpy)
        import scipy.linalg.blas  # noqa: F401
    except ImportError:  # pragma: no cover
        pass
    with threadpool_limits(limits=n, user_api="blas"):
        yield


def tune_malloc():
    """glibc malloc tuned for many-MB temporaries (minigrad.utils.host_malloc: never done by importing
    minigrad; the examples ask for it here, for their whole run)."""
    from minigrad.utils.host_malloc import tune_host_malloc
    return tune_host_malloc()


@contextlib.contextmanager
def runtime(args):
    """What every example's ``main`` runs inside: BLAS threads as ``--threads`` says, malloc tuned."""
    try:  # fail now, not after training, when the curves cannot be drawn
        import matplotlib  # noqa: F401
    except ImportError:
        raise SystemExit("the examples save their curves with matplotlib: pip install 'minigrad[plot]' "
                         "(make demo installs it)") from None
    tune_malloc()
    with blas_threads(args.threads):
        yield


# --- progress ------------------------------------------------------------------------------------------------
def progress(total, desc, unit, enabled=True):
    """A tqdm bar counting ``unit``s (samples or tokens), so its rate reads as samples/s or tokens/s."""
    from tqdm.auto import tqdm
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, disable=not enabled, dynamic_ncols=True,
                leave=True, mininterval=0.25)


class Timer:
    """Accumulates the seconds spent inside ``with timer:`` blocks (training, not evaluation)."""

    def __init__(self):
        self.seconds = 0.0

    def __enter__(self):
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds += time.perf_counter() - self._t0


# --- models, metrics ------------------------------------------------------------------------------------------
def count_params(model):
    return sum(p.numel() for p in model.parameters())


def set_seed(seed):
    """Seed minigrad's global RNG (parameter init, dropout) and return a Generator for data order."""
    mg.manual_seed(seed)
    return mg.Generator().manual_seed(seed)


def finite(*values):
    return all(math.isfinite(v) for v in values)


# --- plots ------------------------------------------------------------------------------------------------------
def save_curves(path, panels, title=None):
    """Save side-by-side line plots as a PNG. ``panels``: list of dicts with ``series`` ({label: (xs, ys)}),
    ``xlabel``, ``ylabel`` and optionally ``title``, ``ylim``, ``styles`` ({label: plot kwargs}), ``hlines``
    ([(y, label)]: a dashed reference line, e.g. a clipping threshold) and ``notes`` ([(x, y, text)]: a
    value written next to its point, so 97.5 % reads as 97.5 %).

    Uses matplotlib's object API with the Agg canvas (no pyplot, so no GUI backend and no global state).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.0 * len(panels), 3.6), dpi=100)
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, panel in zip(axes, panels):
        for label, (xs, ys) in panel["series"].items():
            style = panel.get("styles", {}).get(label, {})
            ax.plot(xs, ys, label=label, **style)
        ax.set_xlabel(panel["xlabel"])
        ax.set_ylabel(panel["ylabel"])
        if panel.get("title"):
            ax.set_title(panel["title"])
        for y, label in panel.get("hlines", []):
            ax.axhline(y, color="tab:red", linestyle="--", linewidth=1, label=label)
        for x, y, text in panel.get("notes", []):
            ax.annotate(text, (x, y), xytext=(-6, -14), textcoords="offset points", ha="right", fontsize=9)
        if panel.get("ylim"):
            ax.set_ylim(*panel["ylim"])
        ax.grid(True, alpha=0.3)
        if len(panel["series"]) + len(panel.get("hlines", [])) > 1:
            ax.legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path)
    return path


def smooth(values, alpha=0.1):
    """Exponential moving average (for noisy per-step losses in plots)."""
    out, m = [], None
    for v in values:
        m = v if m is None else (1 - alpha) * m + alpha * v
        out.append(m)
    return out


# --- checkpoints -------------------------------------------------------------------------------------------------
def save_and_verify(path, model, build_fresh, evaluate, extra=None):
    """Save ``model``'s state dict (plus ``extra``) with ``mg.save``, load it with ``mg.load`` into the fresh
    model ``build_fresh()`` and check that ``evaluate`` gives exactly the same value for both.

    Returns ``(value_of_reloaded_model, checkpoint_size_in_bytes)``; raises if the values differ.
    """
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    mg.save({"model": model.state_dict(), **(extra or {})}, path)
    ckpt = mg.load(path, device="cpu")
    fresh = build_fresh()
    fresh.load_state_dict(ckpt["model"])
    fresh.to(next(model.parameters()).device)
    expected, got = evaluate(model), evaluate(fresh)
    if got != expected:
        raise RuntimeError(f"checkpoint round trip through {path}: reloaded model gives {got!r}, "
                           f"the trained one {expected!r}")
    return got, os.path.getsize(path)


def results_dir(out):
    os.makedirs(out, exist_ok=True)
    return out

