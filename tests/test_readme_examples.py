"""The README's Python examples run as written (the distributed lines need a launcher: tested elsewhere)."""
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_examples_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)                       # they write model.npz and trace.json
    first, features = python_blocks()[:2]
    ns = {}
    exec(compile(first, "README short example", "exec"), ns)
    assert (tmp_path / "model.npz").exists()
    runnable = "\n".join(line for line in features.splitlines() if "dist." not in line and "distributed" not in line)
    exec(compile(runnable, "README features", "exec"), ns)
    assert (tmp_path / "trace.json").exists() and ns["compiled"].stats["traces"] == 1
    out = capsys.readouterr().out
    assert "Self CPU %" in out and "# of Calls" in out          # the profiler table
    assert "Graph Count: 1" in out and "Graph Break Count: 0" in out   # explain
