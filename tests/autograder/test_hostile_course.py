"""The course's hostile corpus (hostile_course/): graded in one batch with every reference solution beside it,
each hostile submission scores 0 for what it cheats on and keeps everything else, the references keep 100 %
(hidden cases included), and the batch finishes with a row for everyone. Each assignment (a1-a7, a9) has a cheat
for each of the four causes of issue 22 (the files' headers say which part exercises which cause)."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.spec import ROOT, load_assignment

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "hostile_course"
sys.path.insert(0, str(ROOT / "tests" / "course"))
from course_support import cell_overrides, solution_with  # noqa: E402

STUB = r"uses `{}` \(reached at run time\), which this assignment asks you to write yourself"
PATCH = r"your code replaced `{}`, which the grader relies on"
IMPORT = r"graded code may not import the grader's modules \({}\)"

# submission -> {part or part/test: pattern its message must match}; what is not named keeps full marks
EXPECT = {
    "a1_routes": {"part1": STUB.format(r"minigrad\.ops\.elementwise\.Mul\.forward"),
                  "part2/unbroadcast": r"unbroadcast\(grad, shape\): output has shape \(2, 3, 4\)",
                  "part3": STUB.format(r"minigrad\.autograd\.function\.AccumulateGrad\.accumulate")},
    "a1_patches": {"part1": PATCH.format(r"minigrad\.tensor\.Tensor\.backward"),
                   "part4": STUB.format(r"minigrad\.ops\.nn\.conv\.conv_padding")},
    "a2_device": {"part1": STUB.format(r"minigrad\.memory\.allocator\.round_size"),
                  "part2": r"OutOfMemoryError",
                  "part3": r"the segment log was edited: segment #1 is not where the grader's device put it",
                  "part4": r"your allocator changed the device the grader gave it \(its capacity\)"},
    "a3_routes": {"part1": STUB.format(r"minigrad\.optim\.adam\.AdamW\.__init__"),
                  "part2": IMPORT.format(r"autograder\.assignments\.a3_training_loop"),
                  "part3": PATCH.format(r"minigrad\.optim\.sgd\.SGD\.step")},          # part 4 untouched by it
    "a3_measures": {"part1": r"tracemalloc\.reset_peak\(\): the grader measures memory",
                    "part3/clipped to max_norm, direction kept": r"global norm is 11\.827, expected max_norm",
                    "part3/below max_norm: untouched": r"credited only to a clip_grad_norm_ that clips",
                    "part3/in place": r"yet the gradients did not change",
                    "part4/micro-batches equal the full batch": r"did not call optimizer\.step\(\)",
                    "part4/a non-finite step is skipped": r"credited only to an accumulate_step that takes the step",
                    "part4/returns the loss": r"did not call optimizer\.step\(\)"},
    "a4_routes": {"part1": IMPORT.format(r"autograder\.assignments\.a4_mixed_precision"),
                  "part3/skipped step is bit-identical": r"credited only to a master_step that updates",
                  "part3/small updates accumulate": r"master 0 after 50 steps",
                  "part5": STUB.format(r"minigrad\.amp\.grad_scaler\.GradScaler\.__init__")},
    "a4_measures": {"part2/unscale in place": r"returned True \(found inf/NaN\) for gradients that are all finite",
                    "part2/inf/NaN found": r"returned True for the same gradients with the inf/NaN replaced",
                    "part4/saved-activation bytes": r"bytes saved for backward"},
    "a5_routes": {"part1": STUB.format(r"minigrad\.utils\.checkpoint\.checkpoint"),
                  "part2/gradients, every segment count": r"ShapeError|differs|wrong",
                  "part2/segments": r"the counts are credited only beside a right result",
                  "part2/sqrt\\(n\\) memory budget": r"credited only to a step whose gradients are right",
                  "part3": STUB.format(r"minigrad\.memory\.planner\.plan")},
    "a5_measures": {"part1/activations are not kept": r"held outside minigrad's memory pool"},
    "a6_routes": {"part1": STUB.format(r"minigrad\.distributed\.simworld\.SimWorld\._iall_reduce"),
                  "part2": r"no all-reduce was launched|never all-reduced|launched all-reduces of \[\] elements"},
    "a6_shared": {"part1": r"cannot have computed from its input and the messages it received",
                  "part2": r"event log lists all-reduces of .* the log was written to by hand"},
    "a7_measures": {"part2": r"tracemalloc\.stop\(\): the grader measures memory"},
    "a7_routes": {"part1": STUB.format(r"minigrad\.compiler\.fusion\.find_chains"),
                  "part2/fused memory": r"credited only to a fused chain whose output is right",
                  "part3": IMPORT.format(r"autograder\.verdicts")},
    "a9_routes": {"part1": STUB.format(r"minigrad\.distributed\.tensor_parallel\.comm_ops\.CopyToParallel\.forward"),
                  "part2/forward all-gathers the shard": r"rank 0 ran no collective in forward; expected all_gather",
                  "part2/backward gathers again and reduce-scatters": r"ran no collective in backward",
                  "part2/two units train like one process": r"rank 0 ran no collective; per step",
                  "part2/the full weight is freed after forward": r"credited only to a unit that all-gathers",
                  "part3": STUB.format(r"minigrad\.distributed\.pipelining\.schedules\.one_f_one_b_order")},
    "a9_measures": {"part1": r"sent messages that are not those of the collectives it ran",
                    "part2/forward all-gathers the shard": r"FSDPLinear forward: output wrong",
                    "part2/backward gathers again and reduce-scatters": r"FSDPLinear backward: x\.grad",
                    "part2/two units train like one process": r"per step, an FSDP model of 2 units runs",
                    "part2/the full weight is freed after forward": r"credited only to a unit whose gradients are "
                                                                    r"right",
                    "part3": r"rank 0 sent 0 messages of activations to rank 1"},
}
#: the assignments graded here: every one with a reference solution (a1-a7, a9, ...)
GRADED = sorted({p.stem.split("_")[0] for p in (ROOT / "solutions").glob("a*.ipynb")})


def test_corpus_covers_every_cause_of_every_assignment():
    assert {p.stem for p in CORPUS.glob("a*.py")} == set(EXPECT)
    covered = {}
    for p in CORPUS.glob("a*.py"):
        for m in re.finditer(r"^# (part\d) \(cause (\d)\)", p.read_text(), re.M):
            covered.setdefault(p.stem.split("_")[0], set()).add(int(m.group(2)))
    assert covered == {a: {1, 2, 3, 4} for a in GRADED}, covered


def _grade_class(folder):
    """Every hostile submission and every reference solution, graded as one class (hidden cases on)."""
    for p in sorted(CORPUS.glob("a*.py")):
        sol = load_assignment(p.stem.split("_")[0]).solution_path()
        solution_with(sol, folder / f"{p.stem}.ipynb", cell_overrides(p.read_text(), sol))
    for sol in sorted((ROOT / "solutions").glob("a*.ipynb")):
        (folder / f"ref_{sol.name}").write_bytes(sol.read_bytes())
    out = folder.parent / "class.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "autograder", "grade", str(folder), "--hidden", "-j", "2", "-q",
                        "--json", str(out)], capture_output=True, text=True, timeout=1200, env=env, cwd=folder.parent)
    assert p.returncode == 0, p.stderr[-3000:]
    return {r["submission"]: r for r in json.loads(out.read_text())["submissions"]}


def _problems(name, row):
    """What is wrong with a hostile submission's row: a cheat that earned something, a message that does not
    say why, or a test it did not cheat on that lost points."""
    tests = {t["name"].replace(": ", "/", 1): t for t in row["tests"]}
    lost, out = EXPECT[name], []

    def rule_of(key):
        return next((lost[k] for k in lost if key == k or re.fullmatch(k, key) or key.startswith(k + "/")), None)
    for key, t in tests.items():
        rule = rule_of(key)
        if rule is None and t["score"] != t["max_score"]:
            out.append(f"{name} {key}: lost points it did not cheat for: {t['output'][:300]}")
        elif rule is not None and t["score"] != 0:
            out.append(f"{name} {key}: earned {t['score']} by cheating")
        elif rule is not None and not re.search(rule, t["output"]):
            out.append(f"{name} {key}: the message does not say why ({rule}): {t['output'][:300]}")
    out += [f"{name}: no test matches {k}" for k in lost if not any(rule_of(key) == lost[k] for key in tests)]
    return out


@pytest.mark.slow
def test_hostile_submissions_lose_what_they_cheat_on_and_the_references_keep_full_marks(tmp_path):
    """One test, one batch: under pytest-xdist a fixture shared by several tests would grade the class twice."""
    folder = tmp_path / "class"
    folder.mkdir()
    batch = _grade_class(folder)
    assert len(batch) == len(GRADED) + len(EXPECT), sorted(batch)            # a row for everyone: the batch went through
    problems = []
    for name, row in batch.items():
        if name.startswith("ref_"):
            if row["status"] != "ok" or row["score"] != row["max_score"]:
                lost = [(t["name"], t["output"][:300]) for t in row["tests"] if t["score"] < t["max_score"]]
                problems.append(f"{name}: {lost}")
        else:
            problems += _problems(name, row)
    assert not problems, "\n".join(problems)
