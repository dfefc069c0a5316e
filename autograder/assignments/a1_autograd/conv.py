"""Part 4: im2col, col2im and Conv2d, judged against minigrad's own convolution in float64 (parent)."""
import numpy as np

from autograder import verdicts as V
from autograder.spec import Verdict

from .ops import _check_op, _run_op


def _conv_ref(x, w, b, stride, padding):
    """Parent: minigrad's own conv2d in float64 (the trusted reference)."""
    import minigrad as mg
    import minigrad.nn.functional as F
    with mg.no_grad():
        y = F.conv2d(mg.Tensor(x), mg.Tensor(w), None if b is None else mg.Tensor(b), stride=stride,
                     padding=padding)
    return y.numpy().astype(np.float64)


def _im2col_ref(x, kh, kw, stride, padding):
    """Parent: im2col as a convolution with one one-hot kernel per column (c, i, j)."""
    C = x.shape[1]
    K = C * kh * kw
    y = _conv_ref(x, np.eye(K).reshape(K, C, kh, kw), None, stride, padding)   # (N, K, OH, OW)
    return y.transpose(0, 2, 3, 1).reshape(-1, K)


def _out(n, k, s, p):
    return (n + 2 * p - k) // s + 1


def _geometry(p):
    N, C, H, W = p["x"]
    kh, kw = p["k"]
    return N, C, H, W, kh, kw, p["stride"], p["padding"]


def inputs_conv(p):
    rng = np.random.default_rng(p["seed"])
    N, C, H, W, kh, kw, s, pad = _geometry(p)
    OH, OW = _out(H, kh, s, pad), _out(W, kw, s, pad)
    out = {"x": rng.standard_normal((N, C, H, W))}
    if "O" in p:
        O = p["O"]
        out.update(w=rng.standard_normal((O, C, kh, kw)), b=rng.standard_normal(O),
                   up=rng.standard_normal((N, O, OH, OW)))
    out["cols"] = rng.standard_normal((N * OH * OW, C * kh * kw))
    return out


def observe_im2col(ns, case):
    N, C, H, W, kh, kw, s, pad = _geometry(case.params)
    return {"cols": np.asarray(ns.im2col(case["x"].copy(), kh, kw, stride=s, padding=pad))}


def verdict_im2col(case, obs, ctx):
    N, C, H, W, kh, kw, s, pad = _geometry(case.params)
    return V.compare("im2col", obs.get("cols"), _im2col_ref(case["x"], kh, kw, s, pad))


def observe_col2im(ns, case):
    N, C, H, W, kh, kw, s, pad = _geometry(case.params)
    return {"dx": np.asarray(ns.col2im(case["cols"].copy(), (N, C, H, W), kh, kw, stride=s, padding=pad))}


def verdict_col2im(case, obs, ctx):
    N, C, H, W, kh, kw, s, pad = _geometry(case.params)
    # col2im is the vector-Jacobian product of im2col: differentiate the reference im2col numerically
    (expected,) = V.numeric_vjp(lambda x: _im2col_ref(x, kh, kw, s, pad), [case["x"]], case["cols"])
    v = V.compare("col2im", obs.get("dx"), expected)
    if not v.passed and obs.get("dx") is not None and obs["dx"].shape == expected.shape:
        v = Verdict.fail(v.message + " (col2im must add every column entry back where im2col copied it "
                                     "from: overlapping windows add up, padding is cropped)")
    return v


def _conv_call(ns, case):
    p = case.params
    return lambda ts: ns.Conv2d.apply(*ts, stride=p["stride"], padding=p["padding"])


def observe_conv_forward(ns, case):
    import minigrad as mg
    x, w, b = (mg.Tensor(case[n].copy()) for n in ("x", "w", "b"))
    y = ns.Conv2d.apply(x, w, b, stride=case.params["stride"], padding=case.params["padding"])
    if not isinstance(y, mg.Tensor):
        raise TypeError(f"Conv2d returned a {type(y).__name__}, not a Tensor (call Conv2d.apply(...))")
    return {"y": y.array}


def verdict_conv_forward(case, obs, ctx):
    p = case.params
    return V.compare("Conv2d: forward", obs.get("y"),
                     _conv_ref(case["x"], case["w"], case["b"], p["stride"], p["padding"]))


def observe_conv_backward(ns, case):
    return _run_op(ns, case, ("x", "w", "b"), _conv_call(ns, case))


def verdict_conv_backward(case, obs, ctx):
    p = case.params
    return _check_op("Conv2d", case, obs, lambda x, w, b: _conv_ref(x, w, b, p["stride"], p["padding"]),
                     ("x", "w", "b"))
