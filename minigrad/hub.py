"""``minigrad.hub``: PyTorch's ``torch.hub`` names, for a machine without a model hub.

minigrad never reaches the network, so nothing is downloaded: ``load`` / ``list`` / ``help`` work on a
local directory that holds a ``hubconf.py`` (``source='local'``, as in PyTorch), and refuse a GitHub
repository with an error that says what to do instead; ``load_state_dict_from_url`` and
``download_url_to_file`` refuse, naming the local-file alternative (``mg.load``).
"""
import importlib.util
import os
import sys

from .errors import ArgumentError, UnavailableError

_NO_HUB = ("minigrad has no network model hub and downloads nothing: clone or download {what} yourself, then "
           "{instead}")


def _hubconf(repo_or_dir, source):
    if source != "local" or not os.path.isdir(repo_or_dir):
        raise UnavailableError(_NO_HUB.format(
            what=f"the repository {repo_or_dir!r}",
            instead="call hub.load(path_to_the_folder, model, source='local') on the folder with its hubconf.py"))
    path = os.path.join(repo_or_dir, "hubconf.py")
    if not os.path.isfile(path):
        raise ArgumentError(f"hub: {repo_or_dir!r} has no hubconf.py")
    spec = importlib.util.spec_from_file_location("hubconf", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, repo_or_dir)      # hubconf.py imports its repository's modules, as in PyTorch
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(repo_or_dir)
    return module


def _entry(module, model):
    fn = getattr(module, model, None)
    if not callable(fn) or model.startswith("_"):
        raise ArgumentError(f"hub: no callable entrypoint {model!r} in hubconf.py (there are "
                            f"{_entrypoints(module)})")
    return fn


def _entrypoints(module):
    return [n for n in dir(module) if callable(getattr(module, n)) and not n.startswith("_")]


def list(github, force_reload=False, skip_validation=False, trust_repo=None, verbose=True, source="github"):  # noqa: A001
    """The entrypoints of a local hubconf.py (``source='local'``)."""
    return _entrypoints(_hubconf(github, source))


def help(github, model, force_reload=False, skip_validation=False, trust_repo=None, source="github"):  # noqa: A001
    """The docstring of an entrypoint of a local hubconf.py."""
    return _entry(_hubconf(github, source), model).__doc__


def load(repo_or_dir, model, *args, source="github", trust_repo=None, force_reload=False, verbose=True,
         skip_validation=False, **kwargs):
    """``model(*args, **kwargs)`` from the hubconf.py of a local folder (``source='local'``)."""
    return _entry(_hubconf(repo_or_dir, source), model)(*args, **kwargs)


def load_state_dict_from_url(url, model_dir=None, map_location=None, progress=True, check_hash=False,
                             file_name=None, weights_only=False):
    raise UnavailableError(_NO_HUB.format(what=f"{url!r}", instead="load it with mg.load(path) "
                                          "(minigrad's checkpoints; PyTorch .pt files: see docs/PYTORCH_DIFFERENCES.md)"))


def download_url_to_file(url, dst, hash_prefix=None, progress=True):
    raise UnavailableError(_NO_HUB.format(what=f"{url!r}", instead=f"save it as {dst!r}"))


_dir = os.path.join(os.path.expanduser("~"), ".cache", "minigrad", "hub")


def get_dir():
    """Where PyTorch would cache hub downloads (minigrad downloads nothing; kept for programs that print it)."""
    return _dir


def set_dir(d):
    global _dir
    _dir = os.path.expanduser(d)
