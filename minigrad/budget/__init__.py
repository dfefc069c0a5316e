"""minigrad.budget: a memory budget as a setting -- training that fits by itself.

``plan_training(model, optimizer, loss_fn, x, y, budget)`` predicts the peak memory of one training step
for every combination of the tools the course teaches -- autocast (lecture 05), recomputation of segments
(lecture 06), micro-batches with gradient accumulation (lecture 04), the optimizer in backward, bfloat16
optimizer state -- on the pool's tight mode (``set_memory_limit(budget, tight=True)``) and returns a ``BudgetPlan`` with
the fastest combination that fits; ``plan.step()`` runs it and ``plan.explain()`` says why, in lecture
02's categories (parameters, optimizer state, gradients, batch, activations per segment, workspace),
predicted beside measured. A budget nothing fits raises ``BudgetError`` saying how much is missing and
where. Read in this order:

    step.py    Choice (the three knobs) and TrainStep (one optimizer step run as a Choice says)
    trace.py   the prediction: two tiny recorded steps, sizes extrapolated per tensor, replayed through
               the caching allocator; the categories
    plan.py    the search, the time model, the explanation, the error

Lecture 13 (``lectures/13_the_8gb_card.ipynb``) walks through it; ``benchmarks/eight_gb.py`` compares it
with PyTorch.
"""
from .plan import BudgetError, BudgetPlan, Candidate, Measurement, plan_training
from .step import Choice, TrainStep, default_segments
from .trace import CATEGORIES, ProbeMismatch

__all__ = ["BudgetError", "BudgetPlan", "CATEGORIES", "Candidate", "Choice", "Measurement", "ProbeMismatch",
           "TrainStep", "default_segments", "plan_training"]
