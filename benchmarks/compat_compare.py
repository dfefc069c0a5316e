"""The compatibility programs (tests/compat) on PyTorch and on minigrad, side by side.

    .venv-bench/bin/python benchmarks/compat_compare.py                 # everything
    .venv-bench/bin/python benchmarks/compat_compare.py --part lockstep --steps 5

Part 1, end to end: every program as the test suite runs it, once with PyTorch (``python script.py``) and
once with ``python -m minigrad.as_torch script.py``, in fresh copies of its folder: exit status, wall time
and the losses it prints. The two runs draw different random numbers (different generators), so their
losses are comparable in size only -- except the tutorial without randomness, whose losses must agree.

Part 2, lockstep: each program's own model classes, imported from its source once per framework, start from
the same weights (PyTorch's initialisation copied into minigrad through ``load_state_dict``: the parameter
names must match), see the same batches and take the program's optimizer steps. Per step: the relative
difference of the losses and the largest relative difference of any parameter's gradient
(max |g_pt - g_mg| / max |g_pt|). Dropout is off (p = 0, or eval mode) so both compute the same function.
"""
import argparse
import contextlib
import importlib.util
import io
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
COMPAT = ROOT / "tests" / "compat"
PROGRAMS, SHIMS = COMPAT / "programs", COMPAT / "shims"
sys.path[:0] = [str(ROOT), str(COMPAT), str(SHIMS)]      # this tree's minigrad, local_data, torchvision

import torch  # noqa: E402  (the real one: imported before anything aliases it)

import minigrad as mg  # noqa: E402
from minigrad import as_torch  # noqa: E402
import local_data  # noqa: E402

# --- part 1: whole programs ------------------------------------------------------------------------------
WLM = ["--emsize", "16", "--nhid", "16", "--nlayers", "2", "--bptt", "8", "--batch_size", "4", "--epochs", "1",
       "--dry-run", "--nhead", "2"]
NANO = ["config/train_shakespeare_char.py", "--device=cpu", "--compile=False", "--eval_iters=2", "--log_interval=1",
        "--block_size=32", "--batch_size=4", "--n_layer=2", "--n_head=2", "--n_embd=32", "--lr_decay_iters=4",
        "--dropout=0.0", "--eval_interval=2", "--max_iters=4"]
MAKEMORE = ["-i", "names.txt", "-o", "out", "--max-steps", "3", "--num-workers", "0", "--n-layer", "2", "--n-embd",
            "16", "--n-embd2", "16", "--batch-size", "8", "--type"]
def _env():
    env = {k: v for k, v in os.environ.items() if k != "MINIGRAD_EMULATE_CUDA"}
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):   # both frameworks: one BLAS
        env.setdefault(var, "1")                                             # thread (fair, and no spinning)
    env["PYTHONPATH"] = os.pathsep.join([str(SHIMS), str(ROOT)])
    return env


def _sine_data(work, prefix):
    """time_sequence_prediction makes its data with its own script, saved by the framework that runs it."""
    subprocess.run(prefix + ["generate_sine_wave.py"], cwd=work, env=_env(), check=True, capture_output=True)
    return work


def _local(prepare):
    return lambda work, prefix: prepare(work)


RUNS = [  # (label, folder, prepare(work, command prefix), script, args, regex of the printed losses)
    ("polynomial custom Function", "polynomial", None, "polynomial_custom_function.py", [], r"(?m)^\d+ ([\d.]+)$"),
    ("polynomial nn", "polynomial", None, "polynomial_nn.py", [], r"(?m)^\d+ ([\d.]+)$"),
    ("mnist", "mnist", _local(local_data.prepare_mnist), "../main.py",
     ["--epochs", "2", "--batch-size", "16", "--test-batch-size", "24", "--log-interval", "2"], r"Loss: ([\d.]+)"),
    ("mnist RNN", "mnist_rnn", _local(local_data.prepare_mnist), "../main.py",
     ["--epochs", "2", "--batch-size", "16", "--test-batch-size", "24", "--log-interval", "2"], r"Loss: ([\d.]+)"),
    ("word LM Transformer", "word_language_model", _local(local_data.prepare_word_language_model), "main.py",
     WLM + ["--model", "Transformer", "--use-optimizer", "--lr", "0.01"], r"(?:valid|test) loss\s+([\d.]+)"),
    ("word LM LSTM", "word_language_model", _local(local_data.prepare_word_language_model), "main.py",
     WLM + ["--model", "LSTM", "--tied"], r"(?:valid|test) loss\s+([\d.]+)"),
    ("word LM GRU", "word_language_model", _local(local_data.prepare_word_language_model), "main.py",
     WLM + ["--model", "GRU", "--tied"], r"(?:valid|test) loss\s+([\d.]+)"),
    ("nanoGPT", "nanogpt", _local(local_data.prepare_nanogpt), "train.py", NANO, r"iter \d+: loss ([\d.]+)"),
    ("makemore transformer", "makemore", None, "makemore.py", MAKEMORE + ["transformer"], r"loss ([\d.]+) \|"),
    ("makemore gru", "makemore", None, "makemore.py", MAKEMORE + ["gru"], r"loss ([\d.]+) \|"),
    ("makemore bow", "makemore", None, "makemore.py", MAKEMORE + ["bow"], r"loss ([\d.]+) \|"),
    ("time sequence LSTMCell + LBFGS", "time_sequence_prediction", _sine_data, "train.py", ["--steps", "1"],
     r"(?m)^(?:test )?loss: ([\d.e-]+)$"),
]


def _run_program(framework, folder, prepare, script, args):
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / folder
        shutil.copytree(PROGRAMS / folder, work)
        prefix = [sys.executable] + (["-m", "minigrad.as_torch"] if framework == "minigrad" else [])
        cwd = prepare(str(work), prefix) if prepare is not None else str(work)
        t0 = time.perf_counter()
        proc = subprocess.run(prefix + [script] + args, cwd=cwd, env=_env(), capture_output=True, text=True,
                              timeout=1800)
        return proc, time.perf_counter() - t0


def _last_line(text):
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:70] if lines else ""


def end_to_end(only):
    print("## End to end (different random numbers on each side, except the polynomial custom Function)\n")
    print("| program | PyTorch | minigrad | time PyTorch / minigrad (s) | losses printed: first .. last (PyTorch / minigrad) |")
    print("| --- | --- | --- | --- | --- |")
    for label, folder, prepare, script, args, pattern in RUNS:
        if only and folder not in only:
            continue
        cells, losses, times = [], [], []
        for fw in ("torch", "minigrad"):
            proc, dt = _run_program(fw, folder, prepare, script, args)
            ok = proc.returncode == 0
            cells.append("ok" if ok else "fails: " + _last_line(proc.stderr).replace("|", "/"))
            vals = [float(v) for v in re.findall(pattern, proc.stdout)]
            losses.append(f"{vals[0]:.4f} .. {vals[-1]:.4f}" if vals else "-")
            times.append(f"{dt:.1f}")
        print(f"| {label} | {cells[0]} | {cells[1]} | {' / '.join(times)} | {' / '.join(losses)} |", flush=True)


# --- part 2: lockstep ------------------------------------------------------------------------------------
def _is_program_module(module):
    f = getattr(module, "__file__", None) or ""
    return f.startswith(str(PROGRAMS)) or f.startswith(str(SHIMS))


@contextlib.contextmanager
def _torch_is(framework):
    """Within the block ``import torch`` gives ``framework`` ('torch' or 'minigrad'); the programs' own
    modules (and the torchvision stand-in) are forgotten on entry and exit, so they bind to it afresh."""
    saved = {k: v for k, v in sys.modules.items() if k == "torch" or k.startswith("torch.")}
    for k in [k for k, m in sys.modules.items() if _is_program_module(m)]:
        del sys.modules[k]
    if framework == "minigrad":
        for k in saved:
            del sys.modules[k]
        as_torch.install()
    try:
        yield
    finally:
        if framework == "minigrad":
            as_torch.uninstall()
            sys.modules.update(saved)
        for k in [k for k, m in sys.modules.items() if _is_program_module(m)]:
            del sys.modules[k]


def _load(framework, folder, filename):
    path = PROGRAMS / folder / filename
    with _torch_is(framework):
        sys.path.insert(0, str(path.parent))
        try:
            spec = importlib.util.spec_from_file_location(f"_{framework}_{folder}_{path.stem}", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        finally:
            sys.path.remove(str(path.parent))
    return module


def _np(t):
    return np.asarray(t.detach().cpu().numpy() if hasattr(t, "detach") else t, dtype=np.float64)


def _copy_weights(pt_model, mg_model):
    state = {k: mg.tensor(v.detach().cpu().numpy()) for k, v in pt_model.state_dict().items()}
    mg_model.load_state_dict(state)


def _grad_diff(pt_model, mg_model):
    mg_params = dict(mg_model.named_parameters())
    worst = 0.0
    for name, p in pt_model.named_parameters():
        if p.grad is None:
            continue
        g_pt, g_mg = _np(p.grad), _np(mg_params[name].grad)
        worst = max(worst, float(np.abs(g_pt - g_mg).max() / (np.abs(g_pt).max() + 1e-12)))
    return worst


def _lockstep(label, build, batches, loss_fn, make_opt, steps, clip=None):
    """Train both copies side by side; return per-step (loss_pt, rel loss diff, worst rel grad diff)."""
    pt_model, mg_model = build("torch"), build("minigrad")
    _copy_weights(pt_model, mg_model)
    opts = make_opt(torch, pt_model), make_opt(mg, mg_model)
    rows = []
    for step in range(steps):
        inputs = batches(step)
        losses = []
        for fw, model, opt in ((torch, pt_model, opts[0]), (mg, mg_model, opts[1])):
            opt.zero_grad()
            loss = loss_fn(fw, model, *[fw.tensor(a) for a in inputs])
            loss.backward()
            if clip:
                fw.nn.utils.clip_grad_norm_(model.parameters(), clip)
            losses.append(loss.item())
        rows.append((losses[0], abs(losses[0] - losses[1]) / abs(losses[0]), _grad_diff(pt_model, mg_model)))
        for opt in opts:
            opt.step()
    return label, rows


def _lockstep_lbfgs(label, build, x, y, steps):
    """time_sequence_prediction's loop: LBFGS.step(closure) on MSE. Per step: the loss the step starts from,
    and the parameters after it (relative difference in place of the gradients, which LBFGS consumes)."""
    pt_model, mg_model = build("torch"), build("minigrad")
    _copy_weights(pt_model, mg_model)
    sides = []
    for fw, model in ((torch, pt_model), (mg, mg_model)):
        opt = fw.optim.LBFGS(model.parameters(), lr=0.8)
        xt, yt = fw.tensor(x), fw.tensor(y)

        def closure(fw=fw, model=model, opt=opt, xt=xt, yt=yt):
            opt.zero_grad()
            loss = fw.nn.functional.mse_loss(model(xt), yt)
            loss.backward()
            return loss
        sides.append((model, opt, closure))
    rows = []
    for _ in range(steps):
        losses = [float(opt.step(closure)) for _, opt, closure in sides]
        mg_params = dict(mg_model.named_parameters())
        worst = max(float(np.abs(_np(p) - _np(mg_params[n])).max() / (np.abs(_np(p)).max() + 1e-12))
                    for n, p in pt_model.named_parameters())
        rows.append((losses[0], abs(losses[0] - losses[1]) / abs(losses[0]), worst))
    return label + " (params)", rows


def lockstep_cases(steps):
    rng = np.random.default_rng(0)
    cases = []

    # pytorch/examples mnist: Net, Adadelta(lr=1.0), nll_loss; eval mode switches its dropout off
    mods = {fw: _load(fw, "mnist", "main.py") for fw in ("torch", "minigrad")}
    from sklearn.datasets import load_digits
    digits = load_digits()
    images = (np.pad(np.kron(digits.images, np.ones((3, 3))), ((0, 0), (2, 2), (2, 2))) / 16.0 - 0.1307) / 0.3081

    def mnist_build(fw):
        return mods[fw].Net().eval()

    def mnist_batch(step):
        idx = np.arange(16 * step, 16 * step + 16)
        return images[idx, None].astype(np.float32), digits.target[idx].astype(np.int64)

    cases.append(_lockstep("mnist Net + Adadelta", mnist_build, mnist_batch,
                           lambda fw, m, x, y: fw.nn.functional.nll_loss(m(x), y),
                           lambda fw, m: fw.optim.Adadelta(m.parameters(), lr=1.0), steps))
    rnn_mods = {fw: _load(fw, "mnist_rnn", "main.py") for fw in ("torch", "minigrad")}
    cases.append(_lockstep("mnist LSTM + BatchNorm1d", lambda fw: rnn_mods[fw].Net().eval(), mnist_batch,
                           lambda fw, m, x, y: fw.nn.functional.nll_loss(m(x), y),
                           lambda fw, m: fw.optim.Adadelta(m.parameters(), lr=0.1), steps))

    # pytorch/examples time_sequence_prediction: two LSTMCells in float64, LBFGS(lr=0.8) with a closure
    ts = {fw: _load(fw, "time_sequence_prediction", "train.py") for fw in ("torch", "minigrad")}
    t = np.arange(40) + rng.integers(-80, 80, (6, 1))
    sine = np.sin(t / 20.0)
    cases.append(_lockstep_lbfgs("time sequence LSTMCell + LBFGS", lambda fw: ts[fw].Sequence().double(),
                                 sine[:, :-1], sine[:, 1:], min(steps, 3)))

    # pytorch/examples word_language_model: RNNModel (LSTM, GRU, RNN_TANH) and TransformerModel, SGD + clipping
    wlm = {fw: _load(fw, "word_language_model", "model.py") for fw in ("torch", "minigrad")}
    ntok, L, N = 50, 8, 4
    tokens = rng.integers(0, ntok, (steps, L + 1, N))

    def wlm_batch(step):
        return tokens[step, :-1], tokens[step, 1:].reshape(-1)

    for kind in ("LSTM", "GRU", "RNN_TANH"):
        def build(fw, kind=kind):
            return wlm[fw].RNNModel(kind, ntok, 16, 16, 2, dropout=0.0, tie_weights=True)

        def loss(fw, m, x, y, kind=kind):
            zeros = fw.zeros(2, N, 16)
            hidden = (zeros, fw.zeros(2, N, 16)) if kind == "LSTM" else zeros
            out, _ = m(x, hidden)
            return fw.nn.functional.nll_loss(out, y)
        cases.append(_lockstep(f"word LM {kind}", build, wlm_batch, loss,
                               lambda fw, m: fw.optim.SGD(m.parameters(), lr=20.0), steps, clip=0.25))
    cases.append(_lockstep(
        "word LM Transformer", lambda fw: wlm[fw].TransformerModel(ntok, 16, 2, 16, 2, dropout=0.0).eval(),
        wlm_batch, lambda fw, m, x, y: fw.nn.functional.nll_loss(m(x).view(-1, ntok), y),
        lambda fw, m: fw.optim.AdamW(m.parameters(), lr=0.01), steps))

    # karpathy/nanoGPT: GPT with its configure_optimizers (AdamW, two groups) and clipping
    nano = {fw: _load(fw, "nanogpt", "model.py") for fw in ("torch", "minigrad")}
    with contextlib.redirect_stdout(io.StringIO()):     # GPT() and configure_optimizers print
        def nano_build(fw):
            cfg = nano[fw].GPTConfig(block_size=16, vocab_size=40, n_layer=2, n_head=2, n_embd=32, dropout=0.0,
                                     bias=False)
            return nano[fw].GPT(cfg)
        seq = rng.integers(0, 40, (steps, 4, 17))
        cases.append(_lockstep(
            "nanoGPT", nano_build, lambda s: (seq[s, :, :-1], seq[s, :, 1:]),
            lambda fw, m, x, y: m(x, y)[1],
            lambda fw, m: m.configure_optimizers(0.1, 1e-3, (0.9, 0.95), "cpu"), steps, clip=1.0))

    # karpathy/makemore: its six models, AdamW as in the script
    mm = {fw: _load(fw, "makemore", "makemore.py") for fw in ("torch", "minigrad")}
    words = rng.integers(0, 27, (steps, 8, 11))
    for kind in ("transformer", "bigram", "mlp", "rnn", "gru", "bow"):
        def build(fw, kind=kind):
            cfg = mm[fw].ModelConfig(vocab_size=27, block_size=10, n_layer=2, n_embd=16, n_embd2=16, n_head=2)
            cls = {"transformer": "Transformer", "bigram": "Bigram", "mlp": "MLP", "bow": "BoW"}.get(kind)
            return getattr(mm[fw], cls)(cfg) if cls else mm[fw].RNN(cfg, cell_type=kind)
        cases.append(_lockstep(
            f"makemore {kind}", build, lambda s: (words[s, :, :-1], words[s, :, 1:]),
            lambda fw, m, x, y: m(x, y)[1],
            lambda fw, m: fw.optim.AdamW(m.parameters(), lr=5e-4, weight_decay=0.01, betas=(0.9, 0.99), eps=1e-8),
            steps))
    return cases


def lockstep(steps):
    print(f"\n## Lockstep: same weights, same batches, {steps} optimizer steps (float32)\n")
    print("| model (program's own code) | loss, step 1 | max rel. loss diff | max rel. grad diff |")
    print("| --- | --- | --- | --- |")
    for label, rows in lockstep_cases(steps):
        loss_diff = max(r[1] for r in rows)
        grad_diff = max(r[2] for r in rows)
        flag = "" if loss_diff < 1e-4 and grad_diff < 1e-3 and all(math.isfinite(r[0]) for r in rows) else " **!**"
        print(f"| {label} | {rows[0][0]:.4f} | {loss_diff:.1e} | {grad_diff:.1e}{flag} |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=["all", "end-to-end", "lockstep"], default="all")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--programs", default="", help="comma-separated folders for part 1 (default: all)")
    args = parser.parse_args()
    torch.manual_seed(0)
    mg.manual_seed(0)
    print(f"PyTorch {torch.__version__}, minigrad {mg.__version__}, NumPy {np.__version__}\n")
    if args.part in ("all", "end-to-end"):
        end_to_end({p for p in args.programs.split(",") if p})
    if args.part in ("all", "lockstep"):
        lockstep(args.steps)


if __name__ == "__main__":
    main()
