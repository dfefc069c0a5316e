"""The 8 GB card's tasks and data (minigrad/examples/eight_gb.py, minigrad/datasets/timeseries.py) and the heap
counter the benchmark measures both frameworks with (benchmarks/memcount)."""
import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from minigrad.datasets import load_co2, load_co2_windows
from minigrad.examples import eight_gb

ROOT = Path(__file__).resolve().parents[2]


def test_co2_is_the_real_weekly_series_without_gaps():
    dates, ppm = load_co2()
    assert len(ppm) == 2284 and dates[0] == 19580329 and dates[-1] == 20011229
    assert np.isfinite(ppm).all() and 312 < ppm.min() < ppm.max() < 375
    assert ppm[-52:].mean() - ppm[:52].mean() > 50          # the rise over four decades
    assert ppm.dtype == np.float32 and not ppm.flags.writeable


def test_co2_windows_are_split_in_time_without_leaks():
    x, y, scale = load_co2_windows("train")
    xv, yv, _ = load_co2_windows("val")
    assert x.shape[1] == 104 and y.shape[1] == 4 and xv.shape[1:] == (104,) and len(xv) == 435
    assert abs(x.mean(axis=1)).max() < 1e-4                # each window centred on its own mean
    assert x.std() == pytest.approx(1.0, rel=1e-3)
    # no training target falls inside a validation window: the train windows end before the gap
    n = 2284 - 104 - 4 + 1
    assert len(x) == n - len(xv) - (104 + 4 - 1)
    _, ppm = load_co2()
    last_target = (len(x) - 1) + 104 + 4 - 1
    first_val_input = n - len(xv)
    assert last_target < first_val_input
    np.testing.assert_allclose(xv[0] * scale + ppm[first_val_input:first_val_input + 104].mean(),
                               ppm[first_val_input:first_val_input + 104], rtol=1e-5)
    with pytest.raises(ValueError, match="split must be"):
        load_co2_windows("test")


@pytest.mark.parametrize("name, params", [("digits", 1.25e6), ("images", 4.9e6), ("co2", 0.8e6)])
def test_the_tasks_have_the_sources_sizes(name, params):
    task = eight_gb.TASKS[name]
    n = sum(p.numel() for p in task.build().parameters())
    assert abs(n - params) / params < 0.05, n
    assert task.batch == {"digits": 128, "images": 64, "co2": 256}[name]


def test_image_data_are_the_digits_upscaled_smoothly():
    x, y, xv, yv = eight_gb.image_data()
    assert x.shape[1:] == (1, 32, 32) and len(x) == len(y) == 1438 and len(xv) == 359
    small = eight_gb.load_digits_arrays("train")[0]
    blocks = x.reshape(-1, 1, 8, 4, 8, 4).mean(axis=(3, 5))      # each 4 x 4 block ~ its source pixel
    assert np.corrcoef(blocks.ravel(), small.ravel())[0, 1] > 0.95
    np.testing.assert_allclose(eight_gb.upscale(np.full((1, 1, 8, 8), 0.5, np.float32)), 0.5)
    assert len(np.unique(x[0])) > 4 * len(np.unique(small[0]))       # interpolated, not blocks


def test_budget_argument():
    assert eight_gb.parse_budget("48MiB") == (48 * 2 ** 20, None)
    assert eight_gb.parse_budget("0.7") == (None, 0.7)
    assert eight_gb.parse_budget("3e7") == (30_000_000, None)


def test_batches_cover_each_epoch_once_and_differ_between_epochs():
    a, b = eight_gb.batches(1000, 128, 0, 0), eight_gb.batches(1000, 128, 1, 0)
    assert len(a) == 7 and all(len(i) == 128 for i in a)
    assert len(np.unique(np.concatenate(a))) == 7 * 128 and not np.array_equal(a[0], b[0])


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_memcount_counts_numpy_arrays_in_a_preloaded_process(tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from eight_gb import build_memcount
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    lib = build_memcount(str(tmp_path))
    code = ("import ctypes, numpy as np\n"
            "lib = ctypes.CDLL(None); lib.memcount_live.restype = lib.memcount_peak.restype = ctypes.c_long\n"
            "a = lib.memcount_live(); lib.memcount_reset_peak()\n"
            "x = np.ones(1_000_000); y = x * 2; del x, y\n"
            "print(lib.memcount_peak() - a, lib.memcount_live() - a)\n")
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, LD_PRELOAD=lib), check=True,
                         capture_output=True, text=True).stdout.split()
    peak, live = map(int, out)
    assert 16_000_000 <= peak < 16_100_000 and abs(live) < 100_000
    assert not hasattr(ctypes.CDLL(None), "memcount_live")    # this process is not preloaded
