"""minigrad.hub (local hubconf.py folders; the network refused with what to do instead) and minigrad.jit
(TorchScript's decorators return what they decorate)."""
import warnings

import pytest

import minigrad as mg
from minigrad.errors import ArgumentError, UnavailableError


def test_hub_refuses_the_network_and_says_what_to_do():
    with pytest.raises(UnavailableError, match="no network model hub.*source='local'"):
        mg.hub.load("pytorch/vision", "resnet18", pretrained=True)
    with pytest.raises(UnavailableError, match="mg.load"):
        mg.hub.load_state_dict_from_url("https://download.pytorch.org/models/resnet18.pth")
    with pytest.raises(UnavailableError):
        mg.hub.list("pytorch/vision")
    with pytest.raises(UnavailableError):
        mg.hub.download_url_to_file("https://example.com/x", "x")


def test_hub_loads_from_a_local_folder(tmp_path):
    (tmp_path / "hubconf.py").write_text(
        "import minigrad as torch\n"
        "def tiny(n=2):\n    '''A tiny linear model.'''\n    return torch.nn.Linear(n, 1)\n"
        "def _private():\n    pass\n")
    assert mg.hub.list(str(tmp_path), source="local") == ["tiny"]
    assert mg.hub.help(str(tmp_path), "tiny", source="local") == "A tiny linear model."
    model = mg.hub.load(str(tmp_path), "tiny", 3, source="local")
    assert model.weight.shape == (1, 3)
    with pytest.raises(ArgumentError, match="no callable entrypoint 'big'"):
        mg.hub.load(str(tmp_path), "big", source="local")
    before = mg.hub.get_dir()
    mg.hub.set_dir(str(tmp_path))
    assert mg.hub.get_dir() == str(tmp_path)
    mg.hub.set_dir(before)


def test_jit_decorators_return_what_they_decorate():
    def f(x):
        return x * 2

    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert mg.jit.script(f) is f
        m = mg.nn.Linear(2, 2)
        assert mg.jit.trace(m, mg.ones(1, 2)) is m

    class M(mg.nn.Module):
        x: mg.jit.Final[int]

        @mg.jit.ignore
        def a(self):
            return 1

        @mg.jit.unused
        def b(self):
            return 2

        @mg.jit.ignore(drop=True)
        def c(self):
            return 3

        @mg.jit.export
        def d(self):
            return 4

    m = M()
    assert (m.a(), m.b(), m.c(), m.d()) == (1, 2, 3, 4)
    assert not mg.jit.is_scripting() and not mg.jit.is_tracing() and mg.jit.annotate(int, 5) == 5
    with pytest.raises(UnavailableError, match="state_dict"):
        mg.jit.save(m, "m.pt")
    with pytest.raises(UnavailableError, match="load_state_dict"):
        mg.jit.load("m.pt")
