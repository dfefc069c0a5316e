"""set_printoptions / get_printoptions (``_tensor_str.py``): PyTorch's printed strings under each option;
every test restores the defaults."""
import pytest

import minigrad as mg
from minigrad.errors import ArgumentError


@pytest.fixture(autouse=True)
def _restore():
    yield
    mg.set_printoptions(profile="default")


def test_precision_and_sci_mode():
    x = mg.tensor([1.23456, 2.5, 100.0])
    assert repr(x) == "tensor([  1.2346,   2.5000, 100.0000])"
    mg.set_printoptions(precision=2)
    assert repr(x) == "tensor([  1.23,   2.50, 100.00])"
    mg.set_printoptions(sci_mode=True)                   # precision kept, as in PyTorch
    assert repr(x) == "tensor([1.23e+00, 2.50e+00, 1.00e+02])"
    mg.set_printoptions(sci_mode=False)
    assert repr(mg.tensor([1e-6, 1.0])) == "tensor([0.00, 1.00])"
    mg.set_printoptions()                                # sci_mode back to automatic
    assert repr(mg.tensor([1e-6, 1.0])) == "tensor([1.00e-06, 1.00e+00])"


def test_threshold_edgeitems_linewidth_profiles():
    mg.set_printoptions(threshold=5, edgeitems=2)
    assert repr(mg.arange(10)) == "tensor([0, 1,  ..., 8, 9])"
    mg.set_printoptions(profile="full")
    assert "..." not in repr(mg.arange(2000))
    mg.set_printoptions(profile="short")
    assert repr(mg.tensor([1.23456])) == "tensor([1.23])"
    assert mg.get_printoptions() == dict(precision=2, threshold=1000, edgeitems=2, linewidth=80, sci_mode=None)
    mg.set_printoptions(profile="default", linewidth=30)
    assert repr(mg.arange(12.0)) == ("tensor([ 0.,  1.,  2.,  3.,\n         4.,  5.,  6.,  7.,\n"
                                     "         8.,  9., 10., 11.])")
    with pytest.raises(ArgumentError, match="profile"):
        mg.set_printoptions(profile="long")


def test_defaults_restored():
    assert mg.get_printoptions() == dict(precision=4, threshold=1000, edgeitems=3, linewidth=80, sci_mode=None)
