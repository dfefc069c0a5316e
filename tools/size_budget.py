"""The line budget `make test` keeps (as tinygrad's sz.py does): size is a design signal.

A file past a few hundred lines usually holds two ideas, and a core that keeps growing stops fitting in
a student's head. Fails (exit 1) when a Python file under minigrad/ or autograder/ is longer than
FILE_LIMIT lines, or when the core (tensor, autograd, ops, backend and the small modules beside them)
is longer than CORE_LIMIT lines in all; prints the largest files and the core's total either way.

    python -m tools.size_budget            (from the repository root)

The limits, and why (docs/ARCHITECTURE.md repeats them):
- FILE_LIMIT = 500: the largest files after the core-layout clean-up have about 480 lines.
- CORE_LIMIT = 9750: the core had about 5,900 lines after the clean-up (limit 6500 then); issue 21 added
  ~200 lines for reasons of the core's own: mixed precision is cast inside each op's dispatch
  (autograd/opmath.py, ~100 lines, replacing amp/_numpy_opmath.py's wrappers), Tensor's methods are defined
  in classes (one mixin per op family) instead of bound from a list of names, and the extension points
  have names, an order and a thread model (autograd/mode.py). Graph capture's two extension points (calls
  outside ``apply`` marked ``@outside_apply``, host reads of a tensor's values) added ~100 lines in
  extensions.py, tensor_base.py, creation.py and the ops that make tensors themselves. Issue 24 added the
  ops PyTorch programs call (sort/argsort/topk, roll, multinomial, l1/smooth_l1/huber/binary cross-entropy
  losses, channel dropout) and inference_mode, about 340 lines (limit 7300). Issue 25 (autodiff beyond first
  order) added ~1,600: each op's maths now includes its differentiable backward (``vjp``) and its forward-mode
  rule (``jvp``) beside ``forward``/``backward`` (~75 Functions, ~12 lines each, plus the companion ops conv's
  and getitem's gradients need: ConvInputGrad, ConvWeightGrad, IndexScatter, Erf), the create_graph sweep
  (autograd/higher_order.py), forward mode (autograd/forward_ad.py) and gradgradcheck. They are the core's own
  (an op's derivatives belong beside its forward), so the limit rose instead of moving them out. Issue 24's second part
  added ~180 lines of Tensor surface PyTorch programs use: PyTorch's printed form (_tensor_str.py, 59 lines,
  counted as core because tensor_base.py imports it), ``Size``, ``__format__``, the ``new_*`` factories,
  ``view_as`` and bfloat16 (the dtype, float32 arithmetic at dispatch, the "V" kind where floats are
  checked). Issue 24's third part (the tutorial idioms) added ~690 lines of ops PyTorch programs call: einsum
  and atan2 (Functions with their vjp/jvp), the ops composed from existing ones (diag, outer, addmm, lerp,
  var_mean, index_select, scatter, repeat_interleave, nonzero, unique, bincount, fill_diagonal_, interpolate,
  conv_transpose2d on conv's input-gradient op), set_printoptions, set_default_dtype and Tensor(3, 4) (limit
  9750). The headroom
  is for the next features' extension points, not for features (those live outside the core).
"""
import pathlib
import sys

FILE_LIMIT = 500
CORE_LIMIT = 9750
ROOT = pathlib.Path(__file__).resolve().parents[1]
TREES = ("minigrad", "autograder")
CORE = ("minigrad/tensor.py", "minigrad/tensor_base.py", "minigrad/errors.py", "minigrad/creation.py",
        "minigrad/random.py", "minigrad/_tensor_str.py", "minigrad/autograd", "minigrad/ops", "minigrad/backend")


def line_counts(root=ROOT):
    """{path relative to root: number of lines} of every Python file in the budgeted trees."""
    counts = {}
    for tree in TREES:
        for path in sorted((root / tree).rglob("*.py")):
            counts[path.relative_to(root).as_posix()] = len(path.read_text().splitlines())
    return counts


def core_total(counts):
    return sum(n for path, n in counts.items() if any(path == c or path.startswith(c + "/") for c in CORE))


def check(counts, file_limit=FILE_LIMIT, core_limit=CORE_LIMIT):
    """The list of problems (empty when within budget)."""
    problems = [f"{path}: {n} lines (limit {file_limit}): split it into modules that each hold one idea"
                for path, n in counts.items() if n > file_limit]
    total = core_total(counts)
    if total > core_limit:
        problems.append(f"the core has {total} lines (limit {core_limit}): move features out of it, to an "
                        f"extension point (minigrad/autograd/extensions.py)")
    return problems


def main():
    counts = line_counts()
    print(f"size budget: {len(counts)} files; largest:")
    for path, n in sorted(counts.items(), key=lambda kv: -kv[1])[:5]:
        print(f"  {n:5d}  {path}")
    print(f"  core total {core_total(counts)} lines (limit {CORE_LIMIT}); per file limit {FILE_LIMIT}")
    problems = check(counts)
    for p in problems:
        print("OVER BUDGET:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
