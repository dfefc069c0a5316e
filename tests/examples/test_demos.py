"""Smoke tests of the training examples (minigrad/examples): each ``main()`` runs with tiny settings into a
temporary folder and must return finite metrics, lower its loss, write its PNG curves and a checkpoint that
``mg.load`` reads back into a model giving the same score. The full ``make demo`` run is marked slow."""
import math

import numpy as np
import pytest

import minigrad as mg
from minigrad.examples import demo, digits_cnn, digits_mlp, tiny_gpt

pytest.importorskip("sklearn", reason="the digits ship inside scikit-learn")
pytest.importorskip("matplotlib", reason="the examples plot their curves")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TINY_GPT = ["--steps", "12", "--d-model", "16", "--n-layer", "1", "--n-head", "2", "--block-size", "16",
            "--batch-size", "8", "--eval-batches", "2", "--eval-interval", "6", "--sample-len", "30"]


def _run(module, tmp_path, *flags):
    return module.main(["--out", str(tmp_path), "--no-progress", *flags])


def _check_files(metrics, tmp_path, name):
    png, ckpt = tmp_path / f"{name}.png", tmp_path / f"{name}.npz"
    assert metrics["png"] == str(png) and metrics["checkpoint"] == str(ckpt)
    assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 5000      # a real, non-empty plot
    assert ckpt.stat().st_size == metrics["checkpoint_bytes"] > 0
    return mg.load(ckpt)


def test_digits_mlp_learns_and_checkpoint_round_trips(tmp_path):
    m = _run(digits_mlp, tmp_path, "--epochs", "10", "--hidden", "128")
    assert all(math.isfinite(m[k]) for k in ("first_loss", "final_loss", "test_loss", "test_acc",
                                             "train_time_s", "samples_per_s"))
    assert m["final_loss"] < 0.5 * m["first_loss"]
    assert m["test_acc"] >= 0.9
    assert m["reloaded_test_acc"] == m["test_acc"]
    assert m["params"] == 64 * 128 + 128 + 128 * 128 + 128 + 128 * 10 + 10
    ckpt = _check_files(m, tmp_path, "digits_mlp")
    assert ckpt["epoch"] == 10 and ckpt["test_accuracy"] == m["test_acc"] and ckpt["args"]["hidden"] == 128
    fresh = digits_mlp.build_mlp(hidden=128)
    fresh.load_state_dict(ckpt["model"])                       # strict: every key present, shapes match
    x, y = mg.datasets.load_digits("test", flatten=True).tensors
    assert digits_mlp.evaluate(fresh, x, y)[1] == m["test_acc"]


def test_digits_mlp_is_deterministic(tmp_path):
    a = _run(digits_mlp, tmp_path / "a", "--epochs", "2", "--hidden", "32", "--seed", "3")
    b = _run(digits_mlp, tmp_path / "b", "--epochs", "2", "--hidden", "32", "--seed", "3")
    c = _run(digits_mlp, tmp_path / "c", "--epochs", "2", "--hidden", "32", "--seed", "4")
    assert (a["final_loss"], a["test_acc"]) == (b["final_loss"], b["test_acc"])
    assert a["final_loss"] != c["final_loss"]


def test_digits_cnn_smoke(tmp_path):
    m = _run(digits_cnn, tmp_path, "--epochs", "2", "--channels", "4")
    assert math.isfinite(m["final_loss"]) and math.isfinite(m["test_loss"])
    assert m["final_loss"] < m["first_loss"]
    assert m["test_acc"] > 0.3                                   # chance is 0.1
    assert m["reloaded_test_acc"] == m["test_acc"]
    ckpt = _check_files(m, tmp_path, "digits_cnn")
    assert tuple(ckpt["model"]["0.weight"].shape) == (4, 1, 3, 3)


def test_tiny_gpt_smoke(tmp_path):
    m = _run(tiny_gpt, tmp_path, *TINY_GPT, "--prompt", "CYNIC, n.  ")
    for k in ("first_loss", "final_loss", "first_val_loss", "val_loss", "tokens_per_s"):
        assert math.isfinite(m[k]), k
    assert abs(m["first_val_loss"] - math.log(84)) < 0.3        # starts near uniform over the vocabulary
    assert m["val_loss"] < m["first_val_loss"] and m["final_loss"] < m["first_loss"]
    assert m["reloaded_val_loss"] == m["val_loss"]
    assert m["sample"].startswith("CYNIC, n.  ") and len(m["sample"]) == len("CYNIC, n.  ") + 30
    assert m["generate_tokens_per_s"] > 0
    assert (tmp_path / "tiny_gpt_sample.txt").read_text(encoding="utf-8") == m["sample"] + "\n"
    ckpt = _check_files(m, tmp_path, "tiny_gpt")
    assert ckpt["step"] == 12 and len(ckpt["vocab"]) == 84


def test_tiny_gpt_model_is_causal():
    mg.manual_seed(0)
    model = tiny_gpt.TinyGPT(vocab_size=10, block_size=8, d_model=16, n_layer=1, n_head=2).eval()
    a = mg.tensor([[1, 2, 3, 4, 5, 6]])
    b = mg.tensor([[1, 2, 3, 9, 9, 9]])                           # differs from position 3 on
    with mg.no_grad():
        la, lb = model(a).numpy(), model(b).numpy()
    assert la.shape == (1, 6, 10)
    np.testing.assert_allclose(la[:, :3], lb[:, :3], rtol=1e-5, atol=1e-6)
    assert not np.allclose(la[:, 3:], lb[:, 3:])
    with pytest.raises(ValueError, match="block_size"):
        model(mg.zeros(1, 9, dtype="int64"))


def test_generate_top_k_1_is_greedy():
    mg.manual_seed(0)
    model = tiny_gpt.TinyGPT(vocab_size=12, block_size=4, d_model=8, n_layer=1, n_head=2)
    ids = tiny_gpt.generate(model, [1, 2], 2, temperature=0.5, top_k=1, seed=7)   # through the KV cache
    assert ids[:2] == [1, 2] and len(ids) == 4 and model.training   # mode restored
    model.eval()
    with mg.no_grad():
        for i in range(2, 4):                                     # each id is the argmax given the context
            assert ids[i] == int(model(mg.tensor([ids[:i]]))[0, -1].numpy().argmax())
    # past the context (4) the cache restarts from its last half: 6 more ids still come out
    assert len(tiny_gpt.generate(model, [1, 2], 8, temperature=0)) == 10


def test_demo_quick(tmp_path, capsys):
    out = demo.main(["--quick", "--out", str(tmp_path), "--no-progress"])
    assert [r["model"] for r in out["results"]] == ["digits_mlp", "digits_cnn", "tiny_gpt"]
    assert out["failures"] == []
    text = capsys.readouterr().out
    assert "summary" in text and "tok/s" in text and "samples/s" in text and "DIFFERS" not in text
    assert "generated through the KV cache" in text                 # the demo ends by decoding with the cache
    for name in ("digits_mlp", "digits_cnn", "tiny_gpt"):
        assert (tmp_path / f"{name}.png").exists() and (tmp_path / f"{name}.npz").exists()


def test_demo_quick_never_writes_over_the_real_results(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(demo, "DEMOS", {"digits_mlp": demo.DEMOS["digits_mlp"]})
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "digits_mlp.png").write_bytes(b"the real curves")
    out = demo.main(["--quick", "--no-progress", "--only", "digits_mlp"])
    assert out["results"][0]["png"] == str(tmp_path / "results" / "quick" / "digits_mlp.png").replace(
        str(tmp_path) + "/", "")
    assert (tmp_path / "results" / "digits_mlp.png").read_bytes() == b"the real curves"
    assert (tmp_path / "results" / "quick" / "digits_mlp.png").read_bytes()[:8] == PNG_MAGIC


def test_accuracy_axis_shows_the_last_epochs_range():
    lo, hi = digits_mlp.accuracy_range([0.3, 0.8, 0.95, 0.965, 0.975, 0.97])
    assert 0.9 < lo < 0.95 and hi >= 1.0


def test_demo_reports_missed_target(tmp_path, monkeypatch):
    monkeypatch.setitem(demo.TARGETS, "digits_cnn", ("test_acc", "impossible", lambda v: v > 1.0))
    monkeypatch.setitem(demo.DEMOS, "digits_cnn", (digits_cnn, ["--epochs", "1", "--channels", "4"], []))
    out = demo.main(["--only", "digits_cnn", "--out", str(tmp_path), "--no-progress"])
    assert len(out["failures"]) == 1 and out["failures"][0].startswith("digits_cnn: impossible missed")


@pytest.mark.slow
def test_full_demo_meets_targets(tmp_path):
    """What ``make demo`` runs: MLP and CNN >= 95 % test accuracy, GPT val loss <= 2.5 (about a minute)."""
    out = demo.main(["--out", str(tmp_path), "--no-progress"])
    assert out["failures"] == []
    by_name = {r["model"]: r for r in out["results"]}
    assert by_name["digits_mlp"]["test_acc"] >= 0.95 and by_name["digits_cnn"]["test_acc"] >= 0.95
    assert by_name["tiny_gpt"]["val_loss"] <= 2.5 < by_name["tiny_gpt"]["first_val_loss"]
