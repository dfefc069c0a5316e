"""Hidden cases for a7_fusion: other seeds and shapes for every public test (never sent to the sandbox;
the parent builds the inputs from these parameters and sends only arrays)."""


def _prog(program, seed, rows=3, cols=4, **extra):
    return {"program": program, "seed": seed, "rows": rows, "cols": cols, **extra}


def _att(seed, B, L, S, E, Ev, causal, block, **extra):
    return {"seed": seed, "B": B, "L": L, "S": S, "E": E, "Ev": Ev, "causal": causal, "block": block, **extra}


CASES = {
    "part1/find_chains": [_prog("gelu_norm", 101, rows=2, cols=7), _prog("reduction", 102, rows=5, cols=2),
                          _prog("diamond", 103, rows=1, cols=6)],
    "part2/fused values": [_prog("gelu_norm", 110, rows=9, cols=3, block=2),
                           _prog("reduction", 111, rows=2, cols=8, block=100)],
    "part2/fused gradients": [_prog("gelu_norm", 112, rows=2, cols=3, block=1, grad=True)],
    "part2/fused memory": [_prog("gelu_norm", 113, rows=256, cols=1024, block=8192)],
    "part3/attention forward": [_att(120, 3, 11, 5, 2, 3, False, 4), _att(121, 2, 9, 9, 3, 2, True, 2),
                                _att(122, 1, 4, 13, 5, 1, False, 5, scale=6.0)],
    "part3/attention backward": [_att(123, 1, 6, 4, 2, 3, False, 3), _att(124, 2, 5, 5, 2, 2, True, 2)],
    "part3/attention memory": [_att(125, 1, 1536, 2048, 8, 8, False, 96)],
}
