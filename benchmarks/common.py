"""Shared benchmark helpers: timing with warm-up and medians, thread pinning, a small table printer."""
import os
import statistics
import time


def pin_threads(n):
    """Use the same number of BLAS/OpenMP threads for NumPy and PyTorch (set before they load), and tune
    glibc malloc as minigrad's examples do (``minigrad.utils.host_malloc``: minigrad never does it by
    itself; trees from before that change did it on first use, so every benchmark does it explicitly)."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, str(n))
    try:
        from minigrad.utils.host_malloc import tune_host_malloc
    except ImportError:     # a tree from before the change tunes by itself, on first use
        return
    tune_host_malloc()


def median_time(fn, repeat=7, number=1, warmup=2, timer=time.perf_counter):
    """Median seconds per call of ``fn`` over ``repeat`` runs of ``number`` calls, after ``warmup`` calls
    (``timer=time.process_time``: CPU time, for loaded machines)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = timer()
        for _ in range(number):
            fn()
        times.append((timer() - t0) / number)
    return statistics.median(times)


def interleaved_medians(fns, repeat=7, warmup=2, block=5, settle=0.05, timer=time.perf_counter):
    """Median seconds per call of each of ``fns``, timed in alternating blocks of ``block`` calls.

    On a shared VM whose speed drifts by 20-30 % over seconds, timing A for a while and then B compares
    two different machines; alternating blocks makes the ratios fair. Alternating single calls is not:
    NumPy's OpenBLAS threads and PyTorch's OpenMP threads keep spinning after each call and steal the
    two cores from each other. So each block starts after a short pause (``settle`` s) and one untimed
    call, which lets the other library's threads go idle and brings this one's back to steady state.
    ``timer=time.process_time`` counts CPU time only (a loaded machine's waits for a core left out).
    """
    fns = [f for f in fns if f is not None]
    for f in fns:
        for _ in range(warmup):
            f()
    times = [[] for _ in fns]
    while len(times[0]) < repeat:
        for f, ts in zip(fns, times):
            time.sleep(settle)
            f()
            for _ in range(min(block, repeat - len(ts))):
                t0 = timer()
                f()
                ts.append(timer() - t0)
    return [statistics.median(t) for t in times]


def try_import_torch(threads):
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(threads)
    return torch


def quiet_inductor(torch):
    """Make torch.compile build its kernels in this process: inductor's default pool of compile workers
    keeps starting up (each imports torch: seconds of CPU) while the timed runs go on, on the same cores."""
    import torch._inductor.config as config
    config.compile_threads = 1


def chain_arguments(parser, threads):
    """The options of the elementwise-chain benchmarks (fusion.py, compile_breaks.py): size and threads."""
    parser.add_argument("--n", type=int, default=1 << 22, help="elements (rows x cols)")
    parser.add_argument("--cols", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=threads)
    parser.add_argument("--repeat", type=int, default=7)
    return parser


def table(rows, headers):
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    line = "  ".join(str(h).ljust(w) for h, w in zip(headers, widths))
    out = [line, "-" * len(line)]
    out += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(out)
