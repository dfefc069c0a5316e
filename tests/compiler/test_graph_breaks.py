"""Graph breaks: counted exactly on scripted examples, reasons with their source lines, fullgraph errors."""
import numpy as np
import pytest

import minigrad as mg
from minigrad.compiler import GraphBreakError


def branchy(x):
    y = x * 2
    if y.sum() > 0:                 # break 1: bool(tensor)
        y = y + 1
    s = y.mean().item()             # break 2: .item()
    arr = (y * s).numpy()           # break 3: .numpy()
    print("value:", y[0])           # break 4: printing a tensor
    return y.relu() + float(arr.sum())


def no_breaks(x):
    h = (x * 2).tanh()
    return h - h.mean(), h.shape[0]   # shapes are static under the guards: no break


def inplace(x):
    y = x * 2
    y.add_(1)                        # changes y after the graph recorded it
    return y * 3


@pytest.mark.parametrize("fn, graphs, breaks", [(branchy, 5, 4), (no_breaks, 1, 0), (inplace, 2, 1)])
def test_break_counts(fn, graphs, breaks, capsys):
    e = mg.compile.explain(fn, mg.randn(3, 4))
    assert (e.graph_count, e.graph_break_count) == (graphs, breaks)
    assert e.op_count == sum(len(g) for g in e.graphs)


def test_break_reasons_name_the_source_lines(capsys):
    e = mg.compile.explain(branchy, mg.ones(3, 4))
    reasons = [b.reason.split(":")[0] for b in e.break_reasons]
    assert reasons == ["bool(tensor)", "Tensor.item()", "Tensor.numpy()", "printing a tensor (repr)"]
    lines = [b.line for b in e.break_reasons]
    assert lines == ["if y.sum() > 0:                 # break 1: bool(tensor)",
                     "s = y.mean().item()             # break 2: .item()",
                     "arr = (y * s).numpy()           # break 3: .numpy()",
                     'print("value:", y[0])           # break 4: printing a tensor']
    assert all(b.where.startswith("test_graph_breaks.py:") and b.where.endswith("in branchy")
               for b in e.break_reasons)
    text = str(e)
    assert "Graph Break Count: 4" in text and "y.mean().item()" in text
    # the first graph ends at the comparison whose truth value Python needed
    assert e.graphs[0].op_counts() == {"mul": 1, "sum": 1, "greater": 1}   # x > 0 is ops.gt, named greater
    assert "value:" in capsys.readouterr().out   # explain ran the function once, eagerly


def test_compiled_function_with_breaks_stays_correct_on_both_branches(capsys):
    c = mg.compile(branchy)
    for x in (mg.ones(3, 4), -mg.ones(3, 4), 0.5 * mg.ones(3, 4)):
        np.testing.assert_allclose(c(x).numpy(), branchy(x).numpy(), rtol=1e-6)
    # later calls replay piecewise; the branch the trace did not see deoptimises (continues eagerly)
    assert c.stats == {"traces": 1, "replays": 0, "eager": 0, "piecewise": 2, "deopts": 1}


def test_fullgraph_turns_a_break_into_an_error_naming_the_line():
    c = mg.compile(branchy, fullgraph=True)
    with pytest.raises(GraphBreakError, match=r"bool\(tensor\).*test_graph_breaks.py:\d+ in branchy: "
                                              r"if y.sum\(\) > 0:"):
        c(mg.randn(3, 4))
    ok = mg.compile(no_breaks, fullgraph=True)
    out, n = ok(mg.randn(3, 4))
    assert n == 3 and ok.stats["traces"] == 1


def test_in_place_change_of_an_input_is_a_break_and_runs_eagerly():
    def step(p):
        with mg.no_grad():
            p.sub_(0.5)
        return p * 1
    c = mg.compile(step)
    p = mg.zeros(2)
    c(p), c(p)
    np.testing.assert_array_equal(p.numpy(), [-1.0, -1.0])   # both calls really changed p
    assert c.stats["eager"] == 1 and "in-place" in next(iter(c.cache.values())).why_eager
    e = mg.compile.explain(step, mg.zeros(2))
    assert e.graph_break_count == 1 and "in-place" in e.break_reasons[0].reason


def test_an_in_place_change_after_the_last_op_is_found_when_the_function_returns():
    def f(x):
        y = x * 2
        with mg.no_grad():
            x.add_(1.0)                  # nothing reads x afterwards: found by the version check at the end
        return y
    e = mg.compile.explain(f, mg.zeros(2))
    assert e.graph_break_count == 1 and e.break_reasons[0].where == "(found when the function returned)"
    assert "in-place change of x (an input or parameter)" in e.break_reasons[0].reason
    c, x = mg.compile(f), mg.zeros(2)
    c(x), c(x)
    np.testing.assert_array_equal(x.numpy(), [2.0, 2.0])
