"""The README's inference example runs as written."""
import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_inference_example(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    block = next(b for b in re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
                 if "inference as infer" in b)
    ns = {}
    exec(compile(block, "README inference example", "exec"), ns)
    assert (tmp_path / "gpt.safetensors").exists() and (tmp_path / "gpt.onnx").exists()
    assert len(ns["ids"][0]) == 23 and [len(o.token_ids) for o in ns["outs"]] == [16, 16]
    assert "length" in capsys.readouterr().out
