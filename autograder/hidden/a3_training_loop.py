"""Hidden cases for a3_training_loop: other seeds, shapes, hyper-parameters and micro-batch layouts for every
public test (never sent to the sandbox: the parent builds the arrays). Students see "hidden case N"."""
from autograder.assignments.a3_training_loop import _adam

CASES = {
    "part1/first step": [_adam(101, [(7,), (2, 2)], 1, lr=0.3, wd=0.0)],
    "part1/closed-form trajectory": [
        _adam(102, [(3, 1, 4), (1,)], 10, betas=(0.5, 0.9), eps=1e-3, wd=0.05),
        _adam(103, [(16, 8)], 7, lr=1e-3, lrs=[1e-4, 2e-4, 3e-4, 1e-3, 5e-4, 1e-4, 0.0], grad_scale=100.0)],
    "part1/decoupled weight decay": [_adam(104, [(5, 2)], 5, wd=1.0, lr=0.05)],
    "part1/a parameter without gradient": [_adam(105, [(3, 2), (3, 2)], 1)],
    "part1/optimizer memory": [_adam(106, [(384, 384), (64, 384), (10,)], 2)],
    "part2/closed form at every step": [{"base": 5e-2, "warmup": 1, "total": 9, "min_lr": 5e-3},
                                        {"base": 1e-3, "warmup": 40, "total": 41, "min_lr": 0.0}],
    "part2/the scheduler drives the optimizer": [{"bases": [1e-2, 5e-3, 1e-1], "warmup": 4, "total": 20,
                                                  "min_lr": 1e-4}],
    "part3/returns the global norm": [{"seed": 110, "shapes": [[100], [7, 7], [1]], "max_norm": 2.0,
                                       "check": "norm"}],
    "part3/clipped to max_norm, direction kept": [{"seed": 111, "shapes": [[3, 3, 3], [2]], "max_norm": 0.01},
                                                  {"seed": 112, "shapes": [[1000]], "max_norm": 5.0}],
    "part3/below max_norm: untouched": [{"seed": 113, "shapes": [[4, 4]], "max_norm": 100.0}],
    "part3/in place": [{"seed": 114, "shapes": [[2], [3, 3]], "max_norm": 0.5, "check": "in place"}],
    "part4/micro-batches equal the full batch": [{"seed": 120, "sizes": [1, 7, 3, 5, 16], "d": 6},
                                                 {"seed": 121, "sizes": [32], "d": 4}],
    "part4/a non-finite step is skipped": [{"seed": 122, "sizes": [3, 3, 3, 3], "d": 2, "poison": 3},
                                           {"seed": 123, "sizes": [8, 2], "d": 5, "poison": 1, "value": "inf"}],
    "part4/returns the loss": [{"seed": 124, "sizes": [3, 3, 3], "d": 2, "check_loss": True}],
}
