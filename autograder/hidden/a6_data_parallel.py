"""Hidden cases for a6_data_parallel: other world sizes, sizes that leave empty chunks, other caps and
models. Never copied into the sandbox: the parent builds every input from these parameters."""
from autograder.spec import Case


def _ring(n, size, seed):
    return Case({"world": n, "size": size, "seed": seed})


def _model(n, cap, seed, steps=1, widths=(4, 6, 3), batch=3):
    return Case({"world": n, "cap": cap, "widths": list(widths), "batch": batch, "seed": seed, "steps": steps})


CASES = {
    "part1/sum on every rank": [_ring(5, 15, 101), _ring(6, 30, 102), _ring(3, 2, 103)],
    "part1/bytes and neighbours": [_ring(5, 20, 104), _ring(2, 2, 105)],
    "part1/sizes that do not divide": [_ring(5, 17, 106), _ring(4, 3, 107), _ring(6, 13, 108)],
    "part2/buckets": [_model(2, 50, 109), _model(3, 200, 110), _model(2, 1, 111)],
    "part2/averaged gradients": [_model(4, 120, 112), _model(5, 10_000, 113, batch=2)],
    "part2/launched during backward": [_model(4, 70, 114), _model(2, 1, 115)],
    "part2/training": [_model(3, 90, 116, steps=4)],
}
