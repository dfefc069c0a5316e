"""Run a PyTorch program on minigrad, unchanged: ``import torch`` gives minigrad.

    python -m minigrad.as_torch train.py --epochs 1        # runs train.py as __main__, torch = minigrad

Inside, ``import torch`` is ``import minigrad`` and ``import torch.X.Y`` is ``import minigrad.X.Y`` (the
very same module objects: ``torch.nn is minigrad.nn``), so ``torch.nn.functional``, ``torch.optim``,
``torch.utils.data``, ``torch.cuda.amp`` and the rest resolve to minigrad's modules of the same name, and a
missing one fails with ``No module named 'minigrad.X'``. In your own code, ``import minigrad as torch``
does the same for the top level; this runner is for programs you do not want to edit.

How: one import hook (a ``sys.meta_path`` finder, Python's documented way to serve modules under another
name), installed by ``install()``, owned by this module and nothing else. It is never installed by
importing minigrad; it refuses to install when the real PyTorch is already imported in the process.
"""
import importlib
import importlib.abc
import importlib.util
import os
import runpy
import sys

__all__ = ["install", "uninstall", "run"]


class _TorchAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``torch`` and ``torch.*`` and hands back the minigrad module of the same dotted name."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname == "torch" or fullname.startswith("torch."):
            target_name = "minigrad" + fullname[len("torch"):]
            if target_name != "minigrad" and importlib.util.find_spec(target_name) is None:
                return None                              # ModuleNotFoundError names the torch module
            return importlib.util.spec_from_loader(fullname, self, origin=target_name)
        return None

    def create_module(self, spec):
        module = importlib.import_module(spec.origin)   # minigrad's module object itself, not a copy
        spec.loader_state = module.__spec__
        return module

    def exec_module(self, module):
        # Already executed when minigrad imported it. The import system has just set the alias spec as
        # module.__spec__; give the module its own spec back.
        module.__spec__ = module.__spec__.loader_state


_finder = _TorchAlias()


def install():
    """From now on ``import torch...`` imports minigrad's modules (idempotent)."""
    real = sys.modules.get("torch")
    if real is not None and not getattr(real, "__name__", "").startswith("minigrad"):
        raise RuntimeError("as_torch: the real PyTorch is already imported in this process; alias before "
                           "anything imports torch")
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def uninstall():
    """Remove the alias and forget the ``torch*`` names it served (minigrad's modules stay imported)."""
    if _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    for name in [n for n, m in sys.modules.items() if (n == "torch" or n.startswith("torch."))
                 and getattr(m, "__name__", "").startswith("minigrad")]:
        del sys.modules[name]


def run(script, argv=()):
    """Run ``script`` as ``__main__`` with ``sys.argv = [script, *argv]`` and torch aliased to minigrad;
    the script's directory comes first on ``sys.path`` (so its sibling modules import), as with
    ``python script.py``."""
    install()
    sys.argv = [script, *argv]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m minigrad.as_torch SCRIPT [ARGS...]   (runs SCRIPT with torch = minigrad)")
        return 0 if argv else 2
    run(argv[0], argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
