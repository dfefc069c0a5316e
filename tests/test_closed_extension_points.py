"""Closed extension points: no module outside ``minigrad/autograd/`` reads or writes a graph node's private
fields or an extension registry's internals, or sets the mode state directly. Features use the documented
hooks (``autograd/extensions.py``); what they need grows there, named. Read from the source (AST), so a
new violation fails here before anyone depends on it."""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PKG = ROOT / "minigrad"

NODE_PRIVATE = {"_saved", "_next", "_versions", "_unpack", "_pre_hooks", "_packed", "_raw", "_pack_hooks",
                "_compute", "_anomaly_stack"}
REGISTRY_PRIVATE = {"_thread_entries", "_process_entries", "_merged_entries", "_on_change", "_saved_hooks"}
MODE_MODULE = "minigrad.autograd.mode"


def _outside_autograd():
    return sorted(p for p in PKG.rglob("*.py") if p.relative_to(PKG).parts[0] != "autograd")


def _violations(path):
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr in NODE_PRIVATE | REGISTRY_PRIVATE:
            found.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").endswith("autograd") and \
                any(a.name == "mode" for a in node.names):
            found.append(f"line {node.lineno}: imports autograd.mode (change modes through autograd's API)")
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and MODE_MODULE in \
                [getattr(node, "module", None)] + [a.name for a in node.names]:
            found.append(f"line {node.lineno}: imports {MODE_MODULE}")
    return found


def test_no_module_outside_autograd_touches_nodes_or_registries():
    found = {str(p.relative_to(ROOT)): v for p in _outside_autograd() if (v := _violations(p))}
    assert not found, f"modules that reach into autograd's internals: {found}; add a documented hook to " \
                      f"minigrad/autograd/extensions.py instead"


def test_the_scan_catches_what_the_features_used_to_do(tmp_path):
    bad = tmp_path / "feature.py"
    bad.write_text("def f(ctx, ext):\n    ctx._saved = ()\n    return ext._saved_hooks[-1]\n"
                   "from ..autograd import mode\n")
    assert len(_violations(bad)) == 3
