"""What a student reads about a part: errors raised by their code, the words for a rejected part, one error
said once. Split out of grader.py, which decides what runs; this decides how its outcome is said."""
from __future__ import annotations

import re

from .results import TestResult

NOT_IMPLEMENTED = "not implemented yet"
NO_REFERENCE = ("note: this copy of the course has no reference solutions (they stay with the instructors), so "
                "each part ran after your own earlier parts: a mistake in an earlier part can fail tests here that "
                "pass on Gradescope, where every part runs after the reference of the parts before it")


def _relevant_cell_error(cell_errors: list, test_name: str) -> str:
    """The error of the graded cell this test most likely depends on: a cell whose id ends with a word of
    the test's name (cell 'a1-div' for test 'Div'), else the first cell that failed."""
    words = {w for w in re.split(r"[^a-z0-9]+", test_name.lower()) if w}
    for cell_id, msg in cell_errors:
        if cell_id.lower().rsplit("-", 1)[-1] in words:
            return msg
    return cell_errors[0][1]


def _student_error_message(err: dict, where: str = "") -> str:
    etype = err.get("type", "Exception")
    if etype == "NotImplementedError":
        tb = err.get("traceback", "")
        cell = ""
        for line in tb.splitlines():
            if '"<cell ' in line:
                cell = line.split('"<cell ', 1)[1].split('>"', 1)[0]
        loc = f" (NotImplementedError raised in cell '{cell}')" if cell else ""
        return f"{NOT_IMPLEMENTED}{loc}"
    if etype in ("SystemExit", "KeyboardInterrupt"):
        return (f"your code raised {etype}{where}: grading continues, but this test fails. Remove calls to "
                f"sys.exit()/exit()/quit() and do not raise {etype}.")
    head = f"{etype}{where}: {err.get('message', '')}"
    if "File too large" in head:
        head += " (your code wrote more output than the sandbox allows)"
    if err.get("in_student_code"):     # otherwise the traceback is only the exception line again
        return f"{head}\n{err.get('traceback', '').rstrip()}"
    return head

#: errors that mean "this part used what it must not, or patched the grader": the part scores 0
REJECTED = {"StudentWrittenError", "IntegrityError", "MeasurementError"}


def _rejection(err: dict, cell: str = "") -> str:
    """The message for a part that reached a stub or patched the grader (the static scan's words)."""
    where = _where(err.get("traceback", "")) or (f"cell '{cell}'" if cell else "your code")
    msg = err.get("message", "")
    if err.get("type") == "StudentWrittenError":
        name = msg.split("`")[1] if msg.count("`") >= 2 else "a stubbed name"
        return (f"{where} uses `{name}` (reached at run time), which this assignment asks you to write "
                f"yourself: the part scores 0")
    return f"{where}: {msg}; the part scores 0" if where != "your code" else f"{msg}; the part scores 0"


def _where(tb: str) -> str:
    """'cell 'a3-adamw' line 12' from a child traceback: the last frame in a student's cell."""
    found = ""
    for m in re.finditer(r'File "<cell ([^>]+)>", line (\d+)', tb):
        found = f"cell '{m.group(1)}' line {m.group(2)}"
    return found

def _one_error_said_once(results: list[TestResult], per_test: dict) -> None:
    """Tests that all failed on the same exception raised by the student's code (a ZeroDivisionError in the
    one function the part's tests call) get the same message, without their case labels, so the report
    explains it once for all of them instead of once per test."""
    first = {}
    for r in results:
        jobs = per_test.get(r.name, [])
        errs = [j.message for j in jobs if j.outcome == "error"]
        if not r.passed and errs and len(errs) == len([j for j in jobs if j.outcome != "ok"]):
            first[r.name] = errs[0]
    counts: dict[str, int] = {}
    for m in first.values():
        counts[m] = counts.get(m, 0) + 1
    for r in results:
        m = first.get(r.name)
        if m is not None and counts[m] > 1 and not m.startswith(NOT_IMPLEMENTED):
            r.message = f"{m}\n(every failing case of these tests raised it)"


def own_helper_hint(message: str, earlier_cells: list[tuple[str, str, str]]) -> str:
    """`message` with a hint when it is a NameError for a name the student defined in a graded cell of an
    earlier part (`earlier_cells`: [(part id, cell id, source)]): later parts run after the reference of the
    earlier ones, not after the student's own cells."""
    import ast
    m = re.search(r"NameError: name '(\w+)' is not defined", message)
    if not m:
        return message
    for part_id, cid, src in earlier_cells:
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue
        names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        names |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
        if m.group(1) in names:
            return (f"{message}\n(`{m.group(1)}` is defined in your cell '{cid}' of {part_id}: each part is graded "
                    f"after the reference solution of the parts before it, not after your cells, so a helper a "
                    f"later part uses must be defined in that part's own cell)")
    return message
