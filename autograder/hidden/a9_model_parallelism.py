"""Hidden cases for a9_model_parallelism: other world sizes (up to 4), widths, batches, shapes whose flat
vector needs padding, deeper sharded models, pipelines with fewer micro-batches than stages. Never copied into the sandbox: the parent builds every input
from these parameters."""
from autograder.spec import Case


def _tp(n, widths, batch, seed, **extra):
    return Case(dict({"world": n, "widths": list(widths), "batch": batch, "seed": seed}, **extra))


def _pipe(n, m, widths, batch, seed):
    return Case({"world": n, "micro": m, "widths": list(widths), "batch": batch, "seed": seed})


def _fsdp(n, widths, batch, seed, steps=1, lr=0.0):
    return Case({"world": n, "widths": list(widths), "batch": batch, "seed": seed, "steps": steps, "lr": lr})


CASES = {
    "part1/f: identity forward, all-reduce backward": [_tp(4, (5, 8, 3), 2, 101, op="f")],
    "part1/g: all-reduce forward, identity backward": [_tp(4, (2, 4, 3), 3, 102, op="g")],
    "part1/column-parallel layer": [_tp(3, (6, 9, 2), 4, 103, layer="column")],
    "part1/row-parallel layer": [_tp(3, (6, 9, 2), 1, 104, layer="row")],
    "part1/MLP vs one process, one all-reduce each way": [_tp(4, (3, 12, 5), 2, 105), _tp(2, (7, 2, 1), 5, 106)],
    "part2/flat padded shards": [Case({"world": 3, "shapes": [[4, 4], [4]], "seed": 107}),
                                 Case({"world": 4, "shapes": [[1], [2, 1, 3]], "seed": 108})],
    "part2/forward all-gathers the shard": [_fsdp(4, (3, 5), 1, 109)],
    "part2/backward gathers again and reduce-scatters": [_fsdp(4, (6, 2), 3, 110), _fsdp(3, (2, 7), 1, 111)],
    "part2/two units train like one process": [_fsdp(3, (3, 4, 4, 2), 2, 112, steps=2, lr=0.05)],
    "part2/the full weight is freed after forward": [_fsdp(3, (80, 72), 1, 113)],
    "part3/gradients vs one process": [_pipe(4, 3, (2, 3, 4, 3, 1), 2, 114), _pipe(2, 7, (5, 2, 3), 1, 115)],
    "part3/activations and gradients between neighbours": [_pipe(4, 5, (3, 2, 2, 2, 3), 1, 116)],
    "part3/1F1B order, at most p - rank micro-batches held": [_pipe(4, 3, (2, 2, 2, 2, 2), 1, 117),
                                                              _pipe(3, 8, (2, 3, 2, 2), 1, 118)],
    "part3/bubble (p-1)/(m+p-1)": [_pipe(3, 8, (2, 3, 2, 2), 1, 119), _pipe(4, 2, (2, 2, 2, 2, 2), 1, 120)],
}
