"""``python -m autograder``: start, grade, generate, release, gradescope-bundle, gradescope-run, list,
sandbox-info."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from . import results as R
from .spec import SPEC_PATH_ENV, list_assignments, load_assignment


def _spec_dirs(args) -> None:
    """--spec-dir is passed on to grader subprocesses through the environment."""
    if getattr(args, "spec_dir", None):
        old = os.environ.get(SPEC_PATH_ENV, "")
        os.environ[SPEC_PATH_ENV] = os.pathsep.join([*map(str, map(Path.resolve, map(Path, args.spec_dir))),
                                                     *filter(None, [old])])


def _artifacts_dir(args) -> Path:
    """Plots go next to the report; without a report, under results/ (git-ignored)."""
    if args.artifacts:
        return Path(args.artifacts)
    for report in (args.json, args.csv):
        if report:
            p = Path(report)
            return p.parent / f"{p.stem}-artifacts"
    return Path("results") / "artifacts" / (Path(args.path).stem if Path(args.path).is_file() else "")


def cmd_grade(args) -> int:
    from .grader import GradeOptions, grade_notebook
    from .notebook import infer_assignment
    if args.path is None:               # the student's own copy in work/ (make grade A=a1)
        from .workcopy import WorkCopyError, find_work
        if not args.assignment:
            print("autograder: grade what? pass a notebook, or --assignment aN for your copy in work/",
                  file=sys.stderr)
            return 2
        try:
            own, others = find_work(load_assignment(args.assignment))
        except (LookupError, WorkCopyError) as e:
            print(f"autograder: {e}", file=sys.stderr)
            return 2
        if others:
            print(f"grading {own} (left alone: {', '.join(map(str, others))}; NB=path grades another)",
                  file=sys.stderr)
        args.path = str(own)
    path = Path(args.path)
    if not path.exists():
        print(f"autograder: {path}: no such file or folder", file=sys.stderr)
        return 2
    if path.is_dir():
        return _grade_batch(args, path)
    key = args.assignment or infer_assignment(path)
    if not key:
        print(f"autograder: cannot tell which assignment {path.name} is; pass --assignment aN", file=sys.stderr)
        return 2
    try:
        a = load_assignment(key)
    except LookupError as e:
        print(f"autograder: {e}", file=sys.stderr)
        return 2
    opts = GradeOptions(hidden=args.hidden, timeout=args.timeout, artifacts_dir=_artifacts_dir(args))
    res = grade_notebook(path, a, opts, name=args.name)
    if args.result_file:
        Path(args.result_file).write_text(json.dumps(res.to_dict()))
    if args.json:
        R.write_json([res], args.json)
    if args.csv:
        R.write_csv([res], args.csv)
    if not args.quiet:
        print(R.format_report(res))
    return 0


def _grade_batch(args, folder: Path) -> int:
    from .batch import grade_folder
    expected = None
    passthrough = []
    if args.assignment:
        a = load_assignment(args.assignment)
        expected = a.notebook
        passthrough += ["--assignment", args.assignment]
        parts_timeout = sum((args.timeout or p.timeout or a.timeout) for p in a.parts)
    else:
        parts_timeout = 10 * 60
    if args.hidden:
        passthrough.append("--hidden")
    if args.timeout:
        passthrough += ["--timeout", str(args.timeout)]
    wall = 3 * parts_timeout + 60         # restarts included, plus start-up
    jobs = args.jobs or os.cpu_count() or 1
    results = grade_folder(folder, args=passthrough, jobs=jobs, wall_s=wall, expected_name=expected,
                           artifacts=_artifacts_dir(args), progress=not args.quiet)
    if args.json:
        R.write_json(results, args.json)
    if args.csv:
        R.write_csv(results, args.csv)
    if not args.quiet:
        for r in results:
            print(R.format_report(r, details=args.details))
            print()
        w = max([len(r.submission) for r in results] + [10])
        print(f"{'submission'.ljust(w)}  {'score':>11}  status")
        for r in results:
            print(f"{r.submission.ljust(w)}  {f'{r.score:g} / {r.max_score:g}':>11}  {r.status}")
    if args.assignment:                   # a spec with a LEADERBOARD: re-run its top entries (leaderboard.py)
        from .leaderboard import board_of, for_class, format_board
        rows = for_class(a, results, top=args.leaderboard_top, repeats=args.leaderboard_repeats, timeout=args.timeout,
                         csv_path=args.csv, json_path=args.json, log=lambda m: None if args.quiet else print(m))
        if rows is not None and not args.quiet:
            print(format_board(rows, board_of(a)))
    return 0


def cmd_bundle(args) -> int:
    from .bundle import build_bundle
    a = load_assignment(args.assignment)
    path = build_bundle(a, Path(args.out))
    print(path)
    return 0


def cmd_gradescope_run(args) -> int:
    from .bundle import gradescope_run
    return gradescope_run(args.assignment, Path(args.submission), Path(args.results))


def cmd_generate(args) -> int:
    from .generate import main as gen_main
    return gen_main(src=Path(args.src), dst=Path(args.dst), check=args.check, force=args.force)


def cmd_start(args) -> int:
    from .workcopy import WorkCopyError, start
    try:
        dst = start(load_assignment(args.assignment))
    except (LookupError, WorkCopyError) as e:
        print(f"autograder: {e}", file=sys.stderr)
        return 2
    print(f"your copy: {dst} (work in it; no generator ever writes to work/). Self-check from its cells, "
          f"grade it with `make grade A={args.assignment}`.")
    return 0


def cmd_release(args) -> int:
    from .release import ReleaseError, build_release, untracked_files
    try:
        out = build_release(Path(args.out), force=args.force)
    except ReleaseError as e:
        print(f"autograder: {e}", file=sys.stderr)
        return 2
    left = untracked_files()
    if left:
        shown = ", ".join(left[:5]) + (f" and {len(left) - 5} more" if len(left) > 5 else "")
        print(f"autograder: left out {len(left)} file(s) git does not track: {shown} (the release ships tracked "
              f"files only; commit what students should get)", file=sys.stderr)
    print(f"student release written to {out}")
    return 0


def cmd_list(args) -> int:
    for name in list_assignments():
        a = load_assignment(name)
        print(f"{a.id:5} {a.name:20} {a.max_score:g} points, {len(a.parts)} parts: {a.title}")
    return 0


def cmd_sandbox_info(args) -> int:
    from .sandbox import capabilities
    print(capabilities().describe())
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m autograder", description=__doc__)
    p.add_argument("--spec-dir", action="append", help="extra folder of assignment specs (repeatable)")
    sub = p.add_subparsers(dest="command", required=True)

    g = sub.add_parser("grade", help="grade a notebook, or a folder of submissions")
    g.add_argument("path", nargs="?", help="a notebook, or a folder with one notebook (or one subfolder) per "
                                           "submission (default: your copy work/aN_*.ipynb of --assignment)")
    g.add_argument("--assignment", "-a", help="a0, a1_autograd, ... (default: from the notebook metadata)")
    g.add_argument("--json", help="write Gradescope's results.json schema here")
    g.add_argument("--csv", help="write a gradebook CSV here")
    g.add_argument("--jobs", "-j", type=int, default=0, help="submissions graded at once (default: CPU count)")
    g.add_argument("--timeout", type=float, help="wall-clock seconds per part (default: the spec's)")
    g.add_argument("--hidden", action="store_true", help="also run the hidden cases (instructors)")
    g.add_argument("--artifacts", help="folder for plots (default: next to the --json/--csv report, "
                                       "else results/artifacts/)")
    g.add_argument("--details", action="store_true", help="batch: print every submission's feedback")
    g.add_argument("--leaderboard-top", type=int, help="batch: entries of the leaderboard the grader re-runs "
                                                       "(default: the spec's; 0: none)")
    g.add_argument("--leaderboard-repeats", type=int, help="batch: re-runs per entry (default: the spec's)")
    g.add_argument("--quiet", "-q", action="store_true")
    g.add_argument("--name", help=argparse.SUPPRESS)           # used by batch workers
    g.add_argument("--result-file", help=argparse.SUPPRESS)    # used by batch workers
    g.set_defaults(func=cmd_grade)

    b = sub.add_parser("gradescope-bundle", help="write the Gradescope autograder zip")
    b.add_argument("assignment")
    b.add_argument("--out", default="dist", help="output folder (default: dist/)")
    b.set_defaults(func=cmd_bundle)

    r = sub.add_parser("gradescope-run", help="(used by run_autograder inside Gradescope)")
    r.add_argument("--assignment", required=True)
    r.add_argument("--submission", default="/autograder/submission")
    r.add_argument("--results", default="/autograder/results/results.json")
    r.set_defaults(func=cmd_gradescope_run)

    n = sub.add_parser("generate", help="make assignments/ from solutions/")
    n.add_argument("--check", action="store_true", help="exit 1 if assignments/ is not what would be generated "
                                                        "(writes nothing)")
    n.add_argument("--force", action="store_true", help="overwrite handouts that were edited by hand")
    n.add_argument("--src", default="solutions")
    n.add_argument("--dst", default="assignments")
    n.set_defaults(func=cmd_generate)

    st = sub.add_parser("start", help="copy an assignment's handout to work/ (your copy, never overwritten)")
    st.add_argument("assignment")
    st.set_defaults(func=cmd_start)

    rl = sub.add_parser("release", help="write the repository students clone (no solutions, no hidden cases)")
    rl.add_argument("--out", required=True, help="folder to write (must not exist, or be a previous release)")
    rl.add_argument("--force", action="store_true", help="replace a previous release in --out")
    rl.set_defaults(func=cmd_release)

    sub.add_parser("list", help="list the assignments").set_defaults(func=cmd_list)
    sub.add_parser("sandbox-info", help="what the sandbox can enforce on this machine").set_defaults(
        func=cmd_sandbox_info)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _spec_dirs(args)
    return args.func(args)
