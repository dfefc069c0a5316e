"""Hidden cases for a1_autograd: other seeds and shapes for every public test (never sent to the
sandbox; the parent builds the inputs from these parameters and sends only arrays). Students see a
failure here as "hidden case N", with the same op / input / index / analytic-vs-numeric message."""


def _op(op, seed, **shapes):
    return {"op": op, "seed": seed, **shapes}


def _conv(seed, x, k, stride, padding, **extra):
    return {"seed": seed, "x": x, "k": k, "stride": stride, "padding": padding, **extra}


CASES = {
    # part 1: higher ranks, broadcasting on both sides, size-1 axes
    "part1/Mul": [_op("Mul", 101, a=[2, 1, 4], b=[3, 1]), _op("Mul", 102, a=[], b=[2, 2])],
    "part1/Div": [_op("Div", 103, a=[4], b=[3, 4]), _op("Div", 104, a=[2, 3, 2], b=[2, 3, 2])],
    "part1/Exp": [_op("Exp", 105, x=[1, 4, 1])],
    "part1/Log": [_op("Log", 106, x=[2, 2, 3])],
    "part1/ReLU": [_op("ReLU", 107, x=[4, 1, 3])],
    # part 2: other dims, negative dims, 4-D, batched broadcasting, a wider cross-entropy
    "part2/unbroadcast": [{"seed": 108, "grad": [2, 3, 1, 5], "shape": [3, 1, 1]},
                          {"seed": 109, "grad": [4, 1], "shape": [1, 1]}],
    "part2/Sum": [_op("Sum", 110, x=[2, 3, 4, 2], dim=[-1, 1], keepdim=True),
                  _op("Sum", 111, x=[4, 4], dim=0, keepdim=False),
                  _op("Sum", 112, x=[2, 3], dim=None, keepdim=True)],
    "part2/MatMul": [_op("MatMul", 113, a=[3, 2, 5, 4], b=[3, 2, 4, 3]), _op("MatMul", 114, a=[5, 4], b=[2, 4, 3])],
    "part2/Reshape": [_op("Reshape", 115, x=[2, 2, 3], shape=[-1])],
    "part2/Transpose": [_op("Transpose", 116, x=[2, 3, 4, 5], dim0=-1, dim1=1)],
    "part2/Softmax": [_op("Softmax", 117, x=[2, 3, 4], dim=1), _op("Softmax", 118, x=[3, 6], dim=-1, scale=-800.0)],
    "part2/LogSoftmax": [_op("LogSoftmax", 119, x=[5, 2], dim=0, scale=500.0)],
    "part2/cross_entropy": [_op("cross_entropy", 120, logits=[16, 10], scale=2.0),
                            _op("cross_entropy", 121, logits=[3, 7], scale=300.0)],
    # part 3: other graphs' shapes, a longer chain, 2-D accumulation, another function
    "part3/engine: diamond": [{"graph": "diamond", "seed": 122, "x": [3, 1], "w": [3, 2], "scale": 0.5}],
    "part3/engine: reuse": [{"graph": "reuse", "seed": 123, "x": [2, 3]}],
    "part3/engine: broadcasting": [{"graph": "broadcast", "seed": 124, "x": [2, 5, 3], "b": [1, 3], "c": [5, 1],
                                    "s": [1]}],
    "part3/engine: deep chain": [{"graph": "chain", "seed": 125, "x": [2, 2], "n": 2500}],
    "part3/engine: non-scalar output": [{"graph": "nonscalar", "seed": 126, "x": [3, 2, 4], "w": [4],
                                         "upstream": True}],
    "part3/engine: accumulation": [{"seed": 127, "x": [3, 1]}],
    "part3/numerical_grad": [{"seed": 128, "x": [2, 3, 2], "f": "logsumexp", "dtype": "float32"},
                             {"seed": 129, "x": [6], "f": "sin(x)*x^2", "eps": 1e-5}],
    # part 4: non-square inputs, stride 3, padding 2, 1x1 kernels
    "part4/im2col": [_conv(130, [2, 2, 6, 7], [2, 3], 3, 2), _conv(131, [1, 3, 4, 4], [1, 1], 1, 0)],
    "part4/col2im": [_conv(132, [2, 2, 6, 7], [2, 3], 3, 2), _conv(133, [1, 1, 5, 5], [3, 3], 1, 2)],
    "part4/Conv2d forward": [_conv(134, [3, 2, 6, 5], [3, 3], 2, 2, O=5)],
    "part4/Conv2d backward": [_conv(135, [2, 2, 6, 5], [2, 3], 2, 1, O=2), _conv(136, [1, 3, 4, 4], [1, 1], 1, 0, O=4)],
}
