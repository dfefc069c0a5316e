"""The forbidden-use check reads a graded cell's syntax tree: real imports and attribute uses (direct or
through importlib, __import__, getattr, sys.modules) count; the student's own names, comments and strings
do not."""
import pytest

from autograder.forbidden import COMPUTED, forbidden_uses
from ag_support import FULL, get_test, scores

RULES = ["minigrad.memory", "*.get_allocator", "F.conv2d", "*.softmax"]
PREAMBLE = "import numpy as np\nimport minigrad as mg\n"


def uses(src):
    return [(u.line, u.written, u.rule) for u in forbidden_uses(src, RULES, PREAMBLE)]


@pytest.mark.parametrize("src, written", [
    ("from minigrad.memory.allocator import CachingAllocator", "minigrad.memory"),
    ("from minigrad import memory", "minigrad.memory"),
    ("import minigrad.memory as mem", "minigrad.memory"),
    ("a = mg.memory.enable", "mg.memory"),
    ("m = mg\nm.memory.enable()", "m.memory"),                       # an alias of an alias
    ("import importlib\nm = importlib.import_module('minigrad.memory.allocator')", "minigrad.memory"),
    ("m = __import__('minigrad.memory')", "minigrad.memory"),
    ("m = getattr(mg, 'memory')", "minigrad.memory"),
    ("import sys\nm = sys.modules['minigrad.memory']", "minigrad.memory"),
    ("y = F.conv2d(x, w)", "F.conv2d"),                              # F never bound by the cell
    ("p = logits.softmax(1)", "logits.softmax"),
    ("x = pool.get_allocator('cpu')", "pool.get_allocator"),
])
def test_real_uses_are_found(src, written):
    found = uses(src)
    assert found and found[0][1] == written, found


@pytest.mark.parametrize("src, written", [
    ("import importlib\nm = importlib.import_module(name)", "importlib.import_module(...)"),
    ("m = getattr(mg, 'mem' + 'ory')", "getattr(mg, ...)"),
    ("import sys\nm = sys.modules[key]", "sys.modules[...]"),
    ("m = vars(mg)['memory']", "vars(mg)"),
    ("m = mg.__dict__['memory']", "mg.__dict__"),
])
def test_computed_names_on_a_forbidden_package_are_uses(src, written):
    assert uses(src)[:1] == [(src.count("\n") + 1, written, COMPUTED)]


@pytest.mark.parametrize("src", [
    "class CachingAllocator:\n    pass\n\nx = CachingAllocator()",          # the student's own class
    "def get_allocator():\n    return 1",
    "# not minigrad.memory's CachingAllocator, nor mg.memory.get_allocator\nx = 1",
    "doc = 'uses CachingAllocator and minigrad.memory'",
    "x = getattr(self, 'memory')",                                         # not a forbidden package
    "import importlib\nimport sys",
    "raise mg.OutOfMemoryError('full')",
    "F = 3\ny = F.conv2d",                                                 # F is the cell's own
    "def f(:\n",                                                           # does not parse: fails on its own
])
def test_own_names_comments_and_strings_are_not_uses(src):
    assert uses(src) == []



EXACT = ["=minigrad.compile", "minigrad.memory"]


def exact_uses(src):
    return [(u.line, u.written, u.rule) for u in forbidden_uses(src, EXACT, PREAMBLE)]


@pytest.mark.parametrize("src, written", [
    ("f = mg.compile(fn)", "mg.compile"),
    ("@mg.compile\ndef f(x):\n    return x", "mg.compile"),
    ("c = mg.compile\nf = c(fn)", "mg.compile"),
    ("import minigrad\nf = minigrad.compile(fn)", "minigrad.compile"),
    ("from minigrad import compile\nf = compile(fn)", "compile"),                # the import binds, the call uses
    ("import minigrad.compile as mc\nf = mc(fn)", "mc"),
    ("f = getattr(mg, 'compile')(fn)", "minigrad.compile"),
    ("import importlib\nf = importlib.import_module('minigrad.compile')(fn)", "minigrad.compile"),
])
def test_an_exact_rule_finds_the_name_itself(src, written):
    found = exact_uses(src)
    assert found and found[0][1:] == (written, "=minigrad.compile"), found


@pytest.mark.parametrize("src", [
    "g = mg.compile.ir.Graph(nodes, out)",                                  # the names under it stay allowed
    "from minigrad.compile import Graph, Node\nfrom minigrad.compile.fusion import fusible",
    "import minigrad.compile.ir as ir\ng = ir.Graph(nodes, out)",
    "import minigrad.compile as mc\ng = mc.Node('call_op', op)",             # binding the name is no use
    "from minigrad import compile",
    "fn = graph.compile()",                                                 # the student's own object
    "def compile(x):\n    return x\n\ny = compile(1)",
])
def test_an_exact_rule_leaves_the_names_under_it_alone(src):
    assert exact_uses(src) == []


def test_an_exact_rule_sits_beside_prefix_rules():
    assert exact_uses("from minigrad.memory import allocator")[0][2] == "minigrad.memory"
    assert exact_uses("x = mg.compile.explain(fn)") == []

def test_lines_are_the_cells(make_sub, grade):
    src = "import numpy as np\n# np.square would be borrowing\n\ndef square(x):\n    return np.square(x)\n"
    t = get_test(grade(make_sub({"a0-square": src})), "part1/forward")
    assert t.score == 0 and "cell 'a0-square' line 5 uses `np.square`" in t.message


def test_a_comment_and_an_own_function_named_like_the_forbidden_one_score(make_sub, grade):
    src = ("import numpy as np\n\n\ndef square(x):   # np.square would be borrowing\n    return x * x\n\n\n"
           "class numpy_square:\n    pass\n")
    assert scores(grade(make_sub({"a0-square": src}))) == FULL


def test_a_reason_shared_by_a_parts_tests_is_said_once(make_sub, grade):
    from autograder.results import SubmissionResult, TestResult, format_report
    why = "cell 'c' line 1 uses `mg.memory`, which this assignment asks you to write yourself"
    r = SubmissionResult("s", "s.ipynb", "a9", tests=[TestResult("part1", "one", 2, 0, why),
                                                      TestResult("part1", "two", 3, 0, why),
                                                      TestResult("part2", "three", 1, 0, "other")])
    report = format_report(r)
    assert report.count("uses `mg.memory`") == 1 and "* part1: one, two" in report and "* part2: three" in report
