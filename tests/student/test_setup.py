"""The course repository's own quick check: what `make test` runs in the student release (the developers'
suite, which reads solutions and hidden cases, stays with the instructors). It says that minigrad works on
this machine, that every handout is one the grader can read, and that the self-check runs."""
import numpy as np

import minigrad as mg
from autograder import check
from autograder.forbidden import forbidden_message
from autograder.notebook import load_submission
from autograder.spec import BUILTIN_SPEC_DIR, ROOT, find_spec_file, list_assignments, load_assignment


def test_minigrad_trains_a_small_model():
    rng = np.random.default_rng(0)
    x = mg.tensor(rng.standard_normal((64, 4)).astype(np.float32))
    y = mg.tensor((rng.standard_normal(64) > 0).astype(np.int64))
    model = mg.nn.Sequential(mg.nn.Linear(4, 16), mg.nn.ReLU(), mg.nn.Linear(16, 2))
    opt = mg.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for _ in range(20):
        loss = mg.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


def test_every_handout_has_its_graded_cells_and_uses_nothing_forbidden():
    names = [n for n in list_assignments() if find_spec_file(n).parent == BUILTIN_SPEC_DIR]   # the course's own
    assert names
    for name in names:
        a = load_assignment(name)
        sub = load_submission(ROOT / "assignments" / a.notebook)
        assert [c for c in a.graded_cells() if c not in sub.cells] == [], name
        for part in a.parts:
            assert forbidden_message(a.forbidden, a.preamble, [(c, sub.cells[c]) for c in part.cells]) == "", \
                (name, part.id)


def test_the_self_check_runs_on_a_fresh_handout(capsys):
    a = load_assignment("a1")
    ns = {}
    exec(a.preamble, ns)
    for cid, src in load_submission(ROOT / "assignments" / a.notebook).cells.items():
        exec(compile(src, f"<{cid}>", "exec"), ns)
    res = check("a1", "part1", namespace=ns)
    assert res.score == 0 and "not started" in capsys.readouterr().out
