"""The forbidden rules of every built-in spec are dotted names that autograder/forbidden.py reads, and they
catch what each assignment asks students to write themselves: a graded cell importing or using it loses its
part (the grader's own `_forbidden_message`), a student's own class of the same name does not."""
import pytest

from autograder.grader import _forbidden_message
from autograder.spec import list_assignments, load_assignment

# (assignment, part, a graded cell of it, a use that loses the part, the student's own name that does not)
CASES = [
    ("a3", "part1", "a3-adamw", "import minigrad as mg\nopt = mg.optim.AdamW(params, lr=1e-3)",
     "class AdamW(mg.optim.Optimizer):\n    pass\n\nopt = AdamW(params)"),
    ("a3", "part1", "a3-adamw", "from minigrad.optim.adam import adam_update", "def adam_update():\n    pass"),
    ("a3", "part1", "a3-adamw", "from minigrad.optim.lr_scheduler import warmup_cosine",
     "def warmup_cosine(step):\n    return 1.0"),
    ("a3", "part1", "a3-adamw", "n = mg.nn.utils.clip_grad_norm_(ps, 1.0)", "def clip_grad_norm_(ps, m):\n    pass"),
    ("a3", "part1", "a3-adamw", "import torch", "torch = None"),
    ("a4", "part1", "a4-scaler", "from minigrad.amp import GradScaler",
     "class GradScaler:\n    pass\n\ns = GradScaler()"),
    ("a4", "part1", "a4-scaler", "with mg.autocast('cpu'):\n    pass", "def autocast():\n    pass"),
    ("a4", "part1", "a4-scaler", "w = mg.amp.master_weights(model)", "def master_weights(m):\n    return m"),
    ("a6", "part1", "a6-ring", "import minigrad.distributed", "class DistributedDataParallel:\n    pass"),
    ("a6", "part1", "a6-ring", "import minigrad.distributed as dist\ndist.all_reduce(t)",
     "def all_reduce(t):\n    return t"),
    ("a6", "part1", "a6-ring", "from minigrad.distributed.ddp import DistributedDataParallel",
     "class DistributedDataParallel:\n    pass\n\nm = DistributedDataParallel()"),
    ("a7", "part2", "a7-fuse", "f = mg.compile(lambda x: x * 2.0)",              # the exact-name rule
     "def compile(fn):\n    return fn\n\ng = mg.compile.ir.Graph([], None)\nf = compile(g)"),
    ("a7", "part1", "a7-chains", "from minigrad.compiler import find_chains", "from minigrad.compiler import Graph"),
    ("a9", "part1", "a9-fg", "from minigrad.distributed.tensor_parallel import CopyToParallel",
     "class CopyToParallel(Function):\n    pass"),
    ("a9", "part2", "a9-fsdp", "m = mg.distributed.fsdp.FullyShardedDataParallel(model)",
     "class FullyShardedDataParallel:\n    pass"),
    ("a9", "part3", "a9-1f1b", "from minigrad.distributed.pipelining import Schedule1F1B",
     "class Schedule1F1B:\n    pass\n\ns = Schedule1F1B()"),
]


@pytest.mark.parametrize("key, part_id, cell, used, own", CASES)
def test_a_forbidden_use_loses_the_part_and_an_own_name_does_not(key, part_id, cell, used, own):
    a = load_assignment(key)
    part = a.part(part_id)
    assert cell in part.cells
    why = _forbidden_message(a, part, {cell: used})
    assert why.startswith(f"cell '{cell}' line ") and "asks you to write yourself" in why, why
    assert _forbidden_message(a, part, {cell: own}) == ""


def test_the_reference_solutions_use_nothing_forbidden():
    from autograder.notebook import load_submission
    for key in list_assignments():
        a = load_assignment(key)
        if a.solution_path() is None:
            continue
        cells = load_submission(a.solution_path()).cells
        for p in a.parts:
            assert _forbidden_message(a, p, cells) == "", (key, p.id)


def test_a_regular_expression_as_a_rule_is_refused(tmp_path):
    spec = tmp_path / "a9_regex.py"
    spec.write_text("from autograder.spec import Assignment, Part\n"
                    "ASSIGNMENT = Assignment(id='a9', name='a9_regex', title='t', parts=[],\n"
                    "                        forbidden=[r'\\bamp\\b'])\n")
    with pytest.raises(ValueError, match="not a dotted name"):
        load_assignment(str(spec))
