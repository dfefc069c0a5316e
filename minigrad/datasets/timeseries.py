"""A real time series that needs no network: weekly atmospheric CO2 at Mauna Loa, 1958-2001 (Keeling and
Whorf, Scripps; public domain), as shipped inside statsmodels (``statsmodels/datasets/co2/co2.csv``, read
with NumPy: pandas is not needed).

``load_co2()``: the 2284 weekly values in ppm as float32, the 59 missing weeks filled by linear
interpolation. ``load_co2_windows(split)``: supervised pairs for a predictor -- the last ``window`` weeks
in, the next ``horizon`` weeks out -- split in time (the last ``val_fraction`` of the windows, by target
date, are validation, never seen in training). Each window is centred on its own mean and scaled by one
constant (the training windows' standard deviation), so a model learns the shape -- the seasonal cycle
and the local trend -- not the level, which rises out of the training range over the decades.
"""
import functools
import importlib.resources

import numpy as np

from ..errors import ArgumentError

__all__ = ["load_co2", "load_co2_windows"]


@functools.lru_cache(maxsize=1)
def load_co2():
    """``(dates, ppm)``: int64 YYYYMMDD and float32 CO2 in ppm, weekly, gaps interpolated."""
    try:
        path = importlib.resources.files("statsmodels.datasets.co2") / "co2.csv"
        text = path.read_text()
    except (ModuleNotFoundError, FileNotFoundError) as e:
        raise ModuleNotFoundError(
            "minigrad.datasets.load_co2 reads the CO2 series shipped inside statsmodels (no download): "
            "pip install 'minigrad[data]'  (or: pip install statsmodels)") from e
    rows = [line.split(",") for line in text.splitlines()[1:] if line.strip()]
    dates = np.array([int(r[0]) for r in rows], dtype=np.int64)
    ppm = np.array([float(r[1]) if r[1].strip() else np.nan for r in rows], dtype=np.float64)
    missing = np.isnan(ppm)
    ppm[missing] = np.interp(np.flatnonzero(missing), np.flatnonzero(~missing), ppm[~missing])
    ppm = ppm.astype(np.float32)
    dates.setflags(write=False)
    ppm.setflags(write=False)
    return dates, ppm


def load_co2_windows(split="train", *, window=104, horizon=4, val_fraction=0.2):
    """``(x, y, scale)``: float32 ``(N, window)`` inputs and ``(N, horizon)`` targets, both minus the input
    window's mean and divided by ``scale`` (ppm per unit; multiply a squared error by ``scale**2`` for
    ppm²). ``split``: 'train' (the first windows in time) or 'val' (the last ``val_fraction``)."""
    if split not in ("train", "val"):
        raise ArgumentError(f"load_co2_windows: split must be 'train' or 'val', got {split!r}")
    if window < 1 or horizon < 1 or not 0.0 < val_fraction < 1.0:
        raise ArgumentError(f"load_co2_windows: need window >= 1, horizon >= 1 and 0 < val_fraction < 1, got "
                            f"window={window}, horizon={horizon}, val_fraction={val_fraction}")
    _, ppm = load_co2()
    n = len(ppm) - window - horizon + 1
    if n < 2:
        raise ArgumentError(f"load_co2_windows: window + horizon ({window + horizon}) leaves no windows in "
                            f"{len(ppm)} weeks")
    idx = np.arange(n)[:, None]
    x = ppm[idx + np.arange(window)]
    y = ppm[idx + window + np.arange(horizon)]
    mean = x.mean(axis=1, keepdims=True)
    x, y = x - mean, y - mean
    n_val = max(1, int(round(val_fraction * n)))
    n_train = n - n_val - (window + horizon - 1)      # no training target inside a validation input
    scale = float(x[:n_train].std())
    part = slice(0, n_train) if split == "train" else slice(n - n_val, n)
    return (np.ascontiguousarray(x[part] / scale, dtype=np.float32),
            np.ascontiguousarray(y[part] / scale, dtype=np.float32), scale)
