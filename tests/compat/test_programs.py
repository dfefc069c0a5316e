"""Real PyTorch programs, unchanged, run on minigrad for a few steps (``python -m minigrad.as_torch``).

Each program is kept as published, with its licence and origin, under ``programs/<name>/`` (README.md here
lists them); only its data download is replaced by small local data (``local_data.py``) and, for the MNIST
example, torchvision by a local stand-in (``shims/torchvision``). Each runs in a fresh process on a copy of
its folder, as a CPU-only machine would run it (no CUDA emulation), with small command-line settings.
``benchmarks/compat_compare.py`` runs the same programs on PyTorch and compares losses and gradients.
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import local_data

HERE = Path(__file__).resolve().parent
PROGRAMS = HERE / "programs"
SHIMS = HERE / "shims"
TIMEOUT = 600          # seconds; generous: the CI machine is small and shared


def _env():
    env = {k: v for k, v in os.environ.items() if k != "MINIGRAD_EMULATE_CUDA"}
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):   # small GEMMs: one thread,
        env.setdefault(var, "1")                                             # no spinning on a busy machine
    env["PYTHONPATH"] = os.pathsep.join([str(SHIMS)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def _copy(name, tmp_path):
    work = tmp_path / name
    shutil.copytree(PROGRAMS / name, work)
    return work


def _run(script, args, cwd):
    proc = subprocess.run([sys.executable, "-m", "minigrad.as_torch", str(script), *args], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, f"{script} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return proc.stdout


def _floats(pattern, text):
    return [float(m) for m in re.findall(pattern, text)]


# --- pytorch/tutorials: polynomial fitting ----------------------------------------------------------------
def test_tutorial_custom_autograd_function_matches_pytorchs_output(tmp_path):
    """No randomness in this program: its losses are PyTorch's to float32 precision (PyTorch 2.13 prints
    '1999 8.943641662597656'). Its custom Function computes on arrays in minigrad, on tensors in PyTorch:
    the same code runs on both."""
    work = _copy("polynomial", tmp_path)
    out = _run("polynomial_custom_function.py", [], work)
    losses = dict(re.findall(r"^(\d+) ([\d.]+)$", out, re.M))
    assert len(losses) == 20 and float(losses["1999"]) == pytest.approx(8.943641662597656, rel=1e-5)
    assert float(losses["99"]) > float(losses["1999"])
    assert "Result: y = " in out and "* P3(" in out


def test_tutorial_nn_polynomial(tmp_path):
    work = _copy("polynomial", tmp_path)
    out = _run("polynomial_nn.py", [], work)
    losses = _floats(r"(?m)^\d+ ([\d.]+)$", out)
    assert len(losses) == 20 and losses[-1] < losses[0] and losses[-1] < 20
    assert re.search(r"Result: y = \S+ \+ \S+ x \+ \S+ x\^2 \+ \S+ x\^3", out)


# --- pytorch/examples: MNIST (torchvision stand-in, digits data) ----------------------------------------------
def test_mnist_example_trains_and_tests_with_adadelta_and_steplr(tmp_path):
    work = _copy("mnist", tmp_path)
    run_dir = local_data.prepare_mnist(work)
    out = _run(work / "main.py", ["--epochs", "2", "--batch-size", "16", "--test-batch-size", "24",
                                  "--log-interval", "2", "--save-model"], run_dir)
    train = _floats(r"Loss: ([\d.]+)", out)
    assert len(train) == 6 and all(0 < v < 10 for v in train)
    assert len(re.findall(r"Test set: Average loss: [\d.]+, Accuracy: \d+/48", out)) == 2
    assert (Path(run_dir) / "mnist_cnn.pt").exists()


def test_mnist_rnn_example_lstm_batchnorm_and_dropout2d(tmp_path):
    work = _copy("mnist_rnn", tmp_path)
    run_dir = local_data.prepare_mnist(work)
    out = _run(work / "main.py", ["--epochs", "2", "--batch-size", "16", "--test-batch-size", "24",
                                  "--log-interval", "2"], run_dir)
    assert len(_floats(r"Loss: ([\d.]+)", out)) == 6
    assert len(re.findall(r"Test set: Average loss: [\d.]+, Accuracy: \d+/48", out)) == 2


# --- pytorch/examples: word_language_model ------------------------------------------------------------------
WLM_ARGS = ["--emsize", "16", "--nhid", "16", "--nlayers", "2", "--bptt", "8", "--batch_size", "4", "--epochs", "1",
            "--dry-run", "--nhead", "2"]


def _wlm_result(out):
    valid = _floats(r"valid loss\s+([\d.]+)", out)
    test = _floats(r"test loss\s+([\d.]+)", out)
    assert len(valid) == 1 and len(test) == 1 and 0 < test[0] < 20
    return valid[0], test[0]


def test_word_language_model_transformer_saves_and_reloads_the_whole_model(tmp_path):
    """nn.Transformer subclassed, a float causal mask from log(tril(ones)), torch.save(model) and
    torch.load under torch.serialization.safe_globals([...]) -- the whole script, end to end."""
    pytest.importorskip("minigrad.onnx", reason="main.py imports torch.onnx (minigrad.onnx: the inference work)")
    work = _copy("word_language_model", tmp_path)
    local_data.prepare_word_language_model(work)
    out = _run("main.py", WLM_ARGS + ["--model", "Transformer", "--use-optimizer", "--lr", "0.01"], work)
    _wlm_result(out)
    assert (work / "model.pt").exists()


@pytest.mark.parametrize("model", ["LSTM", "GRU"])
def test_word_language_model_recurrent(model, tmp_path):
    pytest.importorskip("minigrad.onnx", reason="main.py imports torch.onnx (minigrad.onnx: the inference work)")
    work = _copy("word_language_model", tmp_path)
    local_data.prepare_word_language_model(work)
    _wlm_result(_run("main.py", WLM_ARGS + ["--model", model, "--tied"], work))


# --- karpathy/nanoGPT ------------------------------------------------------------------------------------------
NANOGPT_ARGS = ["config/train_shakespeare_char.py", "--device=cpu", "--compile=False", "--eval_iters=2",
                "--log_interval=1", "--block_size=32", "--batch_size=4", "--n_layer=2", "--n_head=2", "--n_embd=32",
                "--lr_decay_iters=4", "--dropout=0.0", "--eval_interval=2"]


def test_nanogpt_trains_checkpoints_and_resumes(tmp_path):
    work = _copy("nanogpt", tmp_path)
    local_data.prepare_nanogpt(work)
    out = _run("train.py", NANOGPT_ARGS + ["--max_iters=4"], work)
    losses = _floats(r"iter \d+: loss ([\d.]+)", out)
    assert len(losses) == 5 and all(3 < v < 6 for v in losses)
    assert "saving checkpoint to out-shakespeare-char" in out
    resumed = _run("train.py", NANOGPT_ARGS + ["--max_iters=6", "--init_from=resume"], work)
    assert re.search(r"^step 4: train loss [\d.]+, val loss [\d.]+$", resumed, re.M)
    assert _floats(r"iter (\d+): loss", resumed) == [4, 5, 6]


# --- karpathy/makemore -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("model", ["transformer", "gru"])
def test_makemore_trains_with_an_endless_sampler_and_tensorboard(model, tmp_path):
    pytest.importorskip("tensorboardX")
    work = _copy("makemore", tmp_path)
    out = _run("makemore.py", ["-i", "names.txt", "-o", "out", "--type", model, "--max-steps", "3",
                               "--num-workers", "0", "--n-layer", "2", "--n-embd", "16", "--n-embd2", "16",
                               "--batch-size", "8"], work)
    assert "number of examples in the dataset: 1002" in out
    assert 2.5 < _floats(r"step 0 \| loss ([\d.]+)", out)[0] < 4.5
    assert list((work / "out").glob("events.out.tfevents.*"))            # the SummaryWriter's file


def test_makemore_bigram_samples_with_topk_and_multinomial(tmp_path):
    pytest.importorskip("tensorboardX")
    work = _copy("makemore", tmp_path)
    out = _run("makemore.py", ["-i", "names.txt", "-o", "out", "--type", "bigram", "--max-steps", "201",
                               "--num-workers", "0", "--batch-size", "32", "--top-k", "5",
                               "--learning-rate", "0.05"], work)
    losses = _floats(r"step \d+ \| loss ([\d.]+)", out)
    assert len(losses) == 21 and losses[-1] < losses[0] - 0.3              # it learns
    counts = [int(n) for n in re.findall(r"^(\d+) samples that are", out, re.M)]
    assert len(counts) == 3 and sum(counts) == 10                          # print_samples(num=10) ran
