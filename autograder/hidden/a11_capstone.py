"""Hidden cases for a11_capstone: other seeds, an uneven micro-batch split, a smaller micro-batch in the step's
peak, and a tighter budget for a second training run on its own freshly drawn seed (1.2 MiB: the public
run's micro-batch no longer fits, so a size hard-coded for 1.4 MiB fails). Never sent to the sandbox: the
parent builds the arrays. Students see "hidden case N"."""
from autograder.assignments.a11_capstone import MIB, STEP_BUDGET

TIGHT = {"seed": "fresh-hidden", "budget": int(1.2 * MIB)}     # "reaches" and "fits" judge the same run

CASES = {
    "part1/gradients equal the full batch's": [{"seed": 101, "batch": 512, "micro": 96}],
    "part1/the peak of a step": [{"seed": 102, "batch": 512, "micro": 32, "budget": STEP_BUDGET}],
    "part2/reaches the validation loss": [TIGHT],
    "part2/fits the budget": [TIGHT],
}
