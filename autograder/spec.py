"""What an assignment spec declares, and how specs are found.

An assignment spec is one Python module, ``autograder/assignments/aN_<topic>.py``, that defines a single
object ``ASSIGNMENT = Assignment(...)``. It lists the notebook's graded cells by part, and for every test
its points, how the parent builds each case's inputs, what the sandboxed child *observes* (runs the
student's code and returns arrays), and how the parent turns those observations into a *verdict*.

    observe(ns, case)       -> dict[str, array]   runs in the child, on the student's code (``ns.square``)
    verdict(case, obs, ctx) -> Verdict            runs in the trusted parent, on raw arrays only

The spec module is imported in both processes, so keep its top level light (numpy and this package
only) and never put reference *solutions* in it: the reference implementation comes from the solution
notebook (``Assignment.solution``), and the parent hands the child only the reference cells of the
parts that the graded part builds on. Hidden cases live in ``autograder/hidden/aN_<topic>.py``, which
the child never receives (the parent builds their inputs and sends arrays).

This module is also copied into the sandbox (spec modules import it), so it imports only the standard
library at the top.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

#: The folder that holds the ``autograder`` package: the repository root, or the Gradescope source dir.
PACKAGE_DIR = Path(__file__).resolve().parent
ROOT = PACKAGE_DIR.parent
BUILTIN_SPEC_DIR = PACKAGE_DIR / "assignments"
SPEC_PATH_ENV = "AUTOGRADER_SPEC_PATH"


@dataclass
class Verdict:
    """The parent's judgement of one case. `message` is shown to the student when it failed."""
    passed: bool
    message: str = ""
    artifacts: list[str] = field(default_factory=list)   # files (plots) written next to the report
    reject: bool = False      # the observations show the grader's world was tampered with: the part scores 0
    metrics: dict = field(default_factory=dict)   # numbers the grader measured (a leaderboard's), kept in results

    @staticmethod
    def ok(message: str = "") -> "Verdict":
        return Verdict(True, message)

    @staticmethod
    def fail(message: str, artifacts: list[str] | None = None) -> "Verdict":
        return Verdict(False, message, list(artifacts or []))

    @staticmethod
    def rejected(message: str) -> "Verdict":
        """Evidence of tampering (a forged log, a device changed behind the grader's back): not one failed
        case but the whole part, scored 0 with `message`, as for a forbidden use."""
        return Verdict(False, message, [], True)

    def __and__(self, other: "Verdict") -> "Verdict":
        """The first failure wins; artifacts of both are kept."""
        arts, metrics = self.artifacts + other.artifacts, {**self.metrics, **other.metrics}
        if not self.passed:
            return Verdict(False, self.message, arts, self.reject, metrics)
        if not other.passed:
            return Verdict(False, other.message, arts, other.reject, metrics)
        return Verdict(True, "; ".join(m for m in (self.message, other.message) if m), arts, False, metrics)


@dataclass
class Case:
    """One set of inputs for a test. `params` must be JSON-serialisable (lists, not tuples)."""
    params: dict[str, Any]
    label: str = ""
    hidden: bool = False
    inputs: dict[str, Any] = field(default_factory=dict)   # filled by the parent (arrays)
    trivial: bool = False    # a do-nothing answer passes it (unbroadcast to the same shape): it earns credit
    #                          only when some other case of its test passes too

    def __getitem__(self, key: str):
        return self.inputs[key]

    def describe(self) -> str:
        if self.label:
            return self.label
        if not self.params:
            return "default case"
        return ", ".join(f"{k}={_short(v)}" for k, v in self.params.items())


def _short(v: Any) -> str:
    if isinstance(v, list) and all(isinstance(i, int) for i in v):
        return "(" + ", ".join(map(str, v)) + ("," if len(v) == 1 else "") + ")"
    s = json.dumps(v) if not isinstance(v, str) else v
    return s if len(s) <= 40 else s[:37] + "..."


@dataclass
class Test:
    """A graded test: `points` for passing every case (or a share of them when `partial`)."""
    __test__ = False   # not a pytest class
    name: str
    points: float
    observe: Callable[..., dict]                 # child: observe(ns, case) -> {name: array}
    verdict: Callable[..., Verdict]             # parent: verdict(case, obs, ctx) -> Verdict
    inputs: Callable[[dict], dict] | None = None  # parent: inputs(params) -> {name: array}
    cases: list[Any] = field(default_factory=lambda: [{}])  # dicts of params, or Case objects
    partial: bool = False
    visibility: str = "visible"                 # Gradescope: visible, hidden, after_due_date, after_published
    description: str = ""
    stubs: list[str] = field(default_factory=list)   # more of minigrad left out of this test's child than the
    #   part's (its tests run in a child of their own): what only this test's student code could misuse

    def public_cases(self) -> list[Case]:
        return [c if isinstance(c, Case) else Case(dict(c)) for c in self.cases]


@dataclass
class Part:
    """A stage of the notebook. `cells` are the graded cell ids whose code makes up this part."""
    id: str
    title: str
    cells: list[str]
    tests: list[Test]
    names: list[str] = field(default_factory=list)   # what the part defines (for messages)
    objective: str = ""
    timeout: float | None = None                       # seconds; default Assignment.timeout
    stubs: list[str] = field(default_factory=list)    # minigrad's own versions of what this part asks students
    #   to write: in this part's child they are stubs that raise (autograder/stubs.py), whatever the route

    def stub_groups(self) -> list[tuple[tuple[str, ...], list["Test"]]]:
        """The part's tests grouped by the stubs of their child (one child per group, in test order)."""
        groups: dict[tuple[str, ...], list[Test]] = {}
        for t in self.tests:
            groups.setdefault(tuple(sorted({*self.stubs, *t.stubs})), []).append(t)
        return list(groups.items())

    @property
    def points(self) -> float:
        return sum(t.points for t in self.tests)


@dataclass
class Assignment:
    id: str                        # "a1"; the short name used on the command line and in check()
    name: str                      # "a1_autograd"; the module / notebook stem
    title: str
    parts: list[Part]
    notebook: str = ""             # the student notebook's file name, "a1_autograd.ipynb"
    solution: str = ""             # solution notebook, relative to the spec root or the repository root
    preamble: str = "import numpy as np\n"   # run in the child before any cell (imports the cells assume)
    timeout: float = 10.0          # wall-clock seconds per part (one child process per part)
    memory_mb: int = 2048          # address-space limit of the child
    run_student_dependencies: bool = False  # also run the student's cells of earlier parts (guarded) when
    #   a reference exists. Off: a later part runs on the reference alone, so nothing a student's earlier cell
    #   planted (a patch, a hook) is live while it is graded. Without a reference they always run.
    forbidden: list[str] = field(default_factory=list)   # dotted names a graded cell may not use: its
    #   part scores 0 (e.g. "minigrad.ops" when students rewrite minigrad's ops). Checked on the cell's syntax
    #   tree (autograder/forbidden.py): imports and attribute uses, not comments or the student's own names.
    summary: str = ""              # what each part is graded on, in a sentence or two: autograder/README.md's
    #                                assignment table is generated from it (python -m autograder generate)
    requirements: list[str] = field(default_factory=list)   # distributions grading needs besides numpy,
    #   nbformat and tqdm that no import of the spec shows (a4: "scikit-learn", reached via minigrad.datasets);
    #   the Gradescope bundle pins them with what the spec's own imports need (autograder/bundle.py)
    # filled by the loader
    module_name: str = ""
    spec_file: str = ""            # the spec module, or the folder of a spec package
    hidden_file: str = ""

    def spec_paths(self) -> list[Path]:
        """The spec (module or package) and its private sibling packages ``_aN_<topic>/`` (helpers of a
        single-file spec): everything of this assignment that the sandbox and the bundle must copy."""
        spec = Path(self.spec_file)
        prefix = "_" + spec.stem.split("_", 1)[0] + "_"
        private = [d for d in sorted(spec.parent.glob(prefix + "*"))
                   if d.is_dir() and (d / "__init__.py").is_file()]
        return [spec, *private]

    def child_imports(self) -> list[str]:
        """The minigrad modules the spec's child-side code imports (at its top or inside functions): the child
        imports them before any student code, so the integrity guard watches them from the start."""
        import ast
        spec = Path(self.spec_file)
        files = sorted(spec.rglob("*.py")) if spec.is_dir() else [spec]
        out: list[str] = []
        for f in files:
            for node in ast.walk(ast.parse(f.read_text())):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module, *(f"{node.module}.{a.name}" for a in node.names)] \
                    if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
                out += [n for n in names if n.split(".")[0] == "minigrad" and n not in out]
        return out

    @property
    def max_score(self) -> float:
        return sum(p.points for p in self.parts)

    def part(self, part_id: str) -> Part:
        for p in self.parts:
            if p.id == part_id:
                return p
        raise KeyError(f"{self.id} has no part {part_id!r} (parts: {', '.join(p.id for p in self.parts)})")

    def graded_cells(self) -> list[str]:
        return [c for p in self.parts for c in p.cells]

    # ---- paths -----------------------------------------------------------------------------------
    def spec_root(self) -> Path:
        """The folder above the spec's folder (``autograder/`` for built-in specs)."""
        return Path(self.spec_file).resolve().parent.parent

    def solution_path(self) -> Path | None:
        if not self.solution:
            return None
        for base in (self.spec_root(), ROOT):
            p = base / self.solution
            if p.exists():
                return p
        return None

    # ---- hidden cases ------------------------------------------------------------------------------
    def hidden_cases(self) -> dict[tuple[str, str], list[Case]]:
        """{(part id, test name): [Case]} from the hidden module (empty when there is none)."""
        mod = _load_hidden(self)
        out: dict[tuple[str, str], list[Case]] = {}
        if mod is None:
            return out
        for key, cases in getattr(mod, "CASES", {}).items():
            part_id, _, test_name = key.partition("/")
            self.part(part_id)   # validate
            lst = []
            for i, c in enumerate(cases, 1):
                case = c if isinstance(c, Case) else Case(dict(c))
                case = dataclasses.replace(case, hidden=True, label=case.label or f"hidden case {i}")
                lst.append(case)
            out[(part_id, test_name)] = lst
        return out

    def hidden_tests(self) -> dict[str, list[Test]]:
        """{part id: [Test]} extra tests defined only in the hidden module."""
        mod = _load_hidden(self)
        tests = dict(getattr(mod, "TESTS", {})) if mod is not None else {}
        for part_id, lst in tests.items():
            self.part(part_id)
            for t in lst:
                _check_observe(self, t)
        return tests


def _load_hidden(a: Assignment):
    if not a.hidden_file or not Path(a.hidden_file).exists():
        return None
    name = f"autograder_hidden_{a.name}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, a.hidden_file)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


_RULE = re.compile(r"^(\*\.|=)?[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")     # what autograder/forbidden.py reads


def _check_observe(a: Assignment, t: Test) -> None:
    mod = sys.modules.get(a.module_name)
    fn = t.observe
    if mod is None or getattr(mod, getattr(fn, "__name__", ""), None) is not fn:
        raise ValueError(f"{a.name}: test {t.name!r}: observe function {fn!r} must be a top-level function "
                         f"of the spec module {a.module_name} (the child looks it up there by name)")


# ---- finding specs ---------------------------------------------------------------------------------
def spec_dirs(extra: list[str | Path] | None = None) -> list[Path]:
    dirs = [Path(d) for d in (extra or [])]
    dirs += [Path(d) for d in os.environ.get(SPEC_PATH_ENV, "").split(os.pathsep) if d]
    dirs.append(BUILTIN_SPEC_DIR)
    return [d.resolve() for d in dirs if d.is_dir()]


def _is_spec(f: Path) -> bool:
    """A spec is a module ``aN_<topic>.py`` or a package ``aN_<topic>/`` (a long spec split by topic)."""
    return f.suffix == ".py" if f.is_file() else (f / "__init__.py").is_file()


def _candidates(extra=None):
    seen = set()
    for d in spec_dirs(extra):
        for f in sorted(d.iterdir()):
            if f.stem not in seen and re.match(r"^a\d+", f.stem) and _is_spec(f):
                seen.add(f.stem)
                yield f


def find_spec_file(key: str, extra=None) -> Path:
    """`key` is an id ("a1"), a name ("a1_autograd") or a path to a spec module or package."""
    p = Path(key)
    if (p.suffix == ".py" or p.is_dir()) and p.exists() and _is_spec(p):
        return p.resolve()
    for f in _candidates(extra):
        if f.stem == key or f.stem.split("_", 1)[0] == key:
            return f
    known = ", ".join(f.stem for f in _candidates(extra)) or "none"
    raise LookupError(f"no assignment spec named {key!r} (known: {known})")


def list_assignments(extra=None) -> list[str]:
    return [f.stem for f in _candidates(extra)]


def load_assignment(key: str, extra=None) -> Assignment:
    f = find_spec_file(key, extra)
    name = f"autograder.assignments.{f.stem}"
    mod = sys.modules.get(name)
    entry = f / "__init__.py" if f.is_dir() else f
    if mod is None or Path(getattr(mod, "__file__", "")).resolve() != entry:
        for sub in [m for m in sys.modules if m.startswith(name + ".")]:
            del sys.modules[sub]         # a package's modules from another spec folder of the same name
        spec = importlib.util.spec_from_file_location(
            name, entry, submodule_search_locations=[str(f)] if f.is_dir() else None)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        try:
            spec.loader.exec_module(mod)
        except BaseException:
            del sys.modules[name]
            raise
    a = getattr(mod, "ASSIGNMENT", None)
    if not isinstance(a, Assignment):
        raise TypeError(f"{f}: a spec module must define ASSIGNMENT = Assignment(...)")
    a.module_name = name
    a.spec_file = str(f)
    a.hidden_file = str(f.parent.parent / "hidden" / f"{f.stem}.py")
    for rule in a.forbidden:
        if not _RULE.match(rule):
            raise ValueError(f"{a.name}: forbidden rule {rule!r} is not a dotted name ('minigrad.memory', "
                             f"'F.conv2d', '*.softmax', '=minigrad.compile'): rules are matched on the cell's syntax "
                             f"tree, not as regular expressions (autograder/forbidden.py)")
    ids = set()
    for p in a.parts:
        if p.id in ids:
            raise ValueError(f"{a.name}: duplicate part id {p.id!r}")
        ids.add(p.id)
        names = set()
        for t in p.tests:
            if t.name in names:
                raise ValueError(f"{a.name}: duplicate test {p.id}/{t.name}")
            names.add(t.name)
            _check_observe(a, t)
    return a


def assignment_key_from_filename(path: str | Path) -> str | None:
    m = re.match(r"^(a\d+)(?:[_\-.]|$)", Path(path).stem)
    return m.group(1) if m else None


class Namespace:
    """The student's definitions, seen by observe functions as attributes (``ns.square``).

    A missing name raises an AttributeError that says so in words a student can act on."""

    def __init__(self, mapping: dict, where: str = "your notebook"):
        object.__setattr__(self, "_mapping", mapping)
        object.__setattr__(self, "_where", where)

    def __getattr__(self, name: str):
        try:
            return self._mapping[name]
        except KeyError:
            raise AttributeError(f"{self._where} does not define `{name}` (check the spelling, and that "
                                 f"its cell ran without errors)") from None

    def __contains__(self, name: str) -> bool:
        return name in self._mapping
