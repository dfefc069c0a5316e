"""Hidden cases for a4_mixed_precision: other overflow scripts, scaler settings, gradients, shapes and seeds.
Never copied into the sandbox: the parent builds every input from these parameters and sends arrays."""
from autograder.spec import Case

_MODEL = {"seed": 7, "n": 24, "d": 10, "hidden": 16, "classes": 4, "weight": 1e-5, "scale": 2.0 ** 14}

CASES = {
    "part1/scale_loss": [{"seed": 9, "init": 1024.0}],
    "part1/scale trace on scripted overflows": [
        Case({"flags": [1, 1, 1, 0, 0, 1, 0, 0, 0, 0], "init_scale": 2.0 ** 16, "growth_interval": 1},
             label="growth_interval=1"),
        Case({"seed": 11, "n": 300, "rate": 0.05, "growth_interval": 7, "growth_factor": 1.5,
              "backoff_factor": 0.75}),
        Case({"seed": 12, "n": 2100, "rate": 0.0, "init_scale": 2.0 ** 10}, label="2100 clean steps, default interval"),
    ],
    "part2/unscale in place": [{"seed": 21, "shapes": [[3, 3, 3], [10]], "scale": 2.0 ** 20}],
    "part2/inf/NaN found": [{"seed": s, "shapes": [[40], [2, 9]], "scale": 4096.0, "bad": b}
                            for s, b in ((22, "nan"), (23, "inf"), (24, None))],
    "part2/unscaled float16 gradients match float32": [_MODEL],
    "part3/skipped step is bit-identical": [{"seed": 31, "shapes": [[6], [2, 5]], "grad_scale": 10.0, "lr": 1.0,
                                             "steps": 3, "inf": True}],
    "part3/small updates accumulate": [{"seed": 32, "shapes": [[16]], "grad_scale": 0.5, "lr": 2e-4, "steps": 120}],
    "part4/saved-activation bytes": [{**_MODEL, "n": 48, "d": 40, "hidden": 80}],
    "part4/loss and gradients": [{**_MODEL, "n": 20}],
    "part5/converges with the scaler, stalls without": [{"seed": 3, "steps": 200}],
}
