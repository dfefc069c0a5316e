"""What lectures 01-02 and the a1/a2 notebooks state about the code and the grading must be true:
the points they announce are the specs' points, a1's MatMul contract names every shape its cases use,
and every file they point at exists."""
import re
from pathlib import Path

import nbformat
import pytest

from autograder.spec import load_assignment

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ["lectures/01_autodiff.ipynb", "lectures/02_memory.ipynb", "solutions/a1_autograd.ipynb",
             "solutions/a2_memory.ipynb"]
# lectures written in parallel on other branches (course map, lectures 03-08); pointers to them are valid
PLANNED = {"03_tensors_and_views", "04_training_loop", "05_mixed_precision", "06_recomputation",
           "07_data_parallel", "08_graphs_and_fusion"}


def markdown(path):
    nb = nbformat.read(ROOT / path, as_version=4)
    return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


def part_headings(text):
    """{part number: (points in the heading, {test name: points} from its 'Tests:' line)}."""
    out = {}
    for m in re.finditer(r"^## Part (\d) [^\n]*\((\d+) points\)\n\nTests \(points\): (.*?)\.\n", text, re.M | re.S):
        tests = {name.strip(): int(p) for name, p in re.findall(r"([^,()]+) \((\d+)\)", m.group(3).replace("\n", " "))}
        out[int(m.group(1))] = (int(m.group(2)), tests)
    return out


@pytest.mark.parametrize("aid, path", [("a1", "solutions/a1_autograd.ipynb"), ("a2", "solutions/a2_memory.ipynb")])
def test_announced_points_are_the_specs(aid, path):
    spec = load_assignment(aid)
    text = markdown(path)
    headings = part_headings(text)
    assert sorted(headings) == [1, 2, 3, 4], "every part's heading says its points and lists its tests"
    for k, part in enumerate(spec.parts, 1):
        points, tests = headings[k]
        assert points == sum(t.points for t in part.tests), part.id
        assert tests == {t.name: t.points for t in part.tests}, part.id
        # the overview table's points column agrees too
        row = re.search(rf"^\| {k} \|.*\| (\d+) \|$", text, re.M)
        assert row and int(row.group(1)) == points, (part.id, row and row.group(0))


def test_a1_matmul_contract_names_every_shape_the_cases_use():
    from autograder.hidden.a1_autograd import CASES
    spec = load_assignment("a1")
    public = [c.params for p in spec.parts for t in p.tests if t.name == "MatMul" for c in t.cases]
    shapes = {(len(c["a"]), len(c["b"])) for c in public + CASES["part2/MatMul"]}
    text = markdown("solutions/a1_autograd.ipynb")
    contract = text[text.index("**`MatMul`**"):text.index("**`Reshape`**")]
    written = {"(n, k)": 2, "(k, m)": 2, "(B, n, k)": 3, "(B, k, m)": 3, "(B1, B2, n, k)": 4, "(B1, B2, k, m)": 4}
    stated = {(written[a], written[b]) for a, b in re.findall(r"`(\([^`]*\)) @ (\([^`]*\))`", contract)}
    assert shapes <= stated, f"cases use (ndim a, ndim b) {sorted(shapes - stated)} that the contract never states"


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_file_pointers_exist(path):
    nb = nbformat.read(ROOT / path, as_version=4)
    text = "\n".join(c.source for c in nb.cells)
    files = set(re.findall(r"minigrad/[\w/]+\.py|minigrad/[\w/]+/", text))
    assert files, "the notebook points at minigrad's sources"
    missing = sorted(f for f in files if not (ROOT / f).exists())
    assert not missing, f"{path} points at files that do not exist: {missing}"
    for name in re.findall(r"lectures/(\d\d_\w+)\.ipynb", text):
        assert (ROOT / "lectures" / f"{name}.ipynb").exists() or name in PLANNED, name


def test_one_definition_of_fragmentation():
    """Lecture 02 and a2 state the definition that mem.fragmentation() computes and documents."""
    import minigrad.memory as mem
    from minigrad.memory import CachingAllocator, MiB, SimulatedSource
    assert "largest free cached block / all free cached bytes" in mem.fragmentation.__doc__
    pool = CachingAllocator(SimulatedSource(), "sim")
    blocks = [pool.malloc(2 * MiB) for _ in range(6)]
    pool.free(blocks[1]), pool.free(blocks[3])                   # free: 2 + 2 MiB holes and the 8 MiB tail
    assert pool.fragmentation() == pytest.approx(1 - 8 / 12)
    for path in ("lectures/02_memory.ipynb", "solutions/a2_memory.ipynb"):
        text = markdown(path)
        assert "mem.fragmentation()" in text and "largest free" in text, path
        assert "never compacts" not in text, path
