"""Hidden cases for a5_recomputation: other seeds, shapes, segment counts, models and traces. Never copied
into the sandbox: the parent builds every input from these parameters and sends only arrays."""
from autograder.spec import Case


def _c(**params):
    return Case(params)


CASES = {
    "part1/gradients": [_c(seed=101, widths=[6, 9, 9, 9, 2], batch=5), _c(seed=102, widths=[2, 3], batch=1),
                        _c(seed=103, widths=[5, 4, 6], batch=2, const=True)],
    "part1/dropout: RNG replayed": [_c(seed=104, widths=[5, 7, 7, 7, 3], batch=4, p=0.4),
                                    _c(seed=105, widths=[8, 16, 4], batch=6, p=0.7)],
    "part1/activations are not kept": [_c(layers=12, width=32, batch=64), _c(layers=5, width=128, batch=16)],
    "part1/in-place change of an input": [_c(seed=107, shape=[2, 5, 3])],
    "part2/gradients, every segment count": [_c(seed=106, widths=[5, 5, 5, 5, 5, 5, 5, 2], batch=2)],
    "part2/segments": [_c(n=12), _c(n=5), _c(n=16)],
    "part2/sqrt(n) memory budget": [_c(layers=25, width=32, batch=64, segments=5),
                                    _c(layers=12, width=64, batch=32, segments=3)],
    "part3/hand-made lifetimes": [_c(kind="chain"), _c(kind="known")],
    "part3/training steps": [_c(kind="mlp", seed=1), _c(kind="gpt", seed=2), _c(kind="cnn", seed=3)],
    "part3/random lifetimes": [_c(kind="random", seed=s, n=n) for s, n in ((109, 300), (110, 40), (111, 200))],
}
