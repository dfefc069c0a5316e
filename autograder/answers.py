"""Does a file students receive hold an answer? Solution code found in the public specs.

The specs (``autograder/assignments/``) ship in the student release and are imported by ``check()``, so an
expected value computed by a copy of the solution (a closed form written line for line like the
student's function) hands the answer out. Expected values come from NumPy formulas, central differences
or minigrad itself, run in the parent; this check keeps it so.

Every solution region of every ``solutions/aN_*.ipynb`` is reduced to its lines of code with names and
numbers left as they are but identifiers replaced by ``N`` (so ``base * (t + 1) / (warmup + 1)`` and
``base_lr * (t + 1) / (warmup_steps + 1)`` are the same line). Three such lines in a row (of some length:
``for ...``/``if ...``/``continue`` is everyone's code) found in a spec file, in the same order, are an
answer.
"""
from __future__ import annotations

import io
import keyword
import tokenize
from pathlib import Path

WINDOW = 3          # consecutive lines
MIN_CHARS = 24      # of code in the window, spaces left out


def _normal(line: str) -> str:
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return line.strip()
    skip = (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT, tokenize.ENDMARKER, tokenize.INDENT, tokenize.DEDENT)
    return " ".join("N" if t.type == tokenize.NAME and not keyword.iskeyword(t.string) else t.string
                    for t in toks if t.type not in skip)


def _code_lines(lines) -> list[str]:
    out = []
    for ln in lines:
        s = ln.strip()
        if s and not s.startswith(("#", '"""', "'''")):
            out.append(_normal(s))
    return out


def _windows(lines):
    for i in range(len(lines) - WINDOW + 1):
        w = tuple(lines[i:i + WINDOW])
        if sum(len(x.replace(" ", "")) for x in w) >= MIN_CHARS:
            yield i, w


def solution_windows(solutions: Path) -> dict[tuple, str]:
    """{normalised window: where} for every solution region of the notebooks in `solutions`."""
    import nbformat
    from .generate import BEGIN, END
    out = {}
    for nb in sorted(solutions.glob("a*.ipynb")):
        for cell in nbformat.read(str(nb), as_version=4).cells:
            if cell.cell_type != "code":
                continue
            region, inside = [], False
            for line in cell.source.splitlines():
                if BEGIN.match(line):
                    region, inside = [], True
                elif END.match(line):
                    inside = False
                    label = cell.metadata.get("grader", {}).get("id", nb.stem)
                    for _, w in _windows(_code_lines(region)):
                        out.setdefault(w, f"{nb.name} cell '{label}'")
                elif inside:
                    region.append(line)
    return out


def answers_in(files, solutions: Path) -> list[str]:
    """'spec.py line N: solution code from <where>' for every file of `files` that holds solution code."""
    sol = solution_windows(solutions)
    found = []
    for f in files:
        lines = Path(f).read_text(encoding="utf-8", errors="replace").splitlines()
        numbered = [(n, _normal(ln.strip())) for n, ln in enumerate(lines, 1)
                    if ln.strip() and not ln.strip().startswith(("#", '"""', "'''"))]
        code = [c for _, c in numbered]
        for i, w in _windows(code):
            if w in sol:
                found.append(f"{f} line {numbered[i][0]}: solution code of {sol[w]}")
                break
    return found


def spec_answers(root: Path) -> list[str]:
    """Solution code in any spec (module or package, private helpers included) under `root`."""
    files = sorted((root / "autograder" / "assignments").rglob("*.py"))
    return answers_in(files, root / "solutions")
