"""Prints fake scores and fake Gradescope JSON, and drops fake result files wherever it can."""
# %% [a0-square]
import glob
import json
import os
import sys

FAKE = {"score": 100, "max_score": 10, "tests": [{"name": "part1: forward", "score": 2, "status": "passed"}]}
print("Score: 100/100")
print(json.dumps(FAKE))
print(json.dumps(FAKE), file=sys.stderr)
for path in ["results.json", "../out/results.json", "../out/0.json", "/autograder/results/results.json"]:
    try:
        with open(path, "w") as f:
            json.dump(FAKE, f)
    except OSError:
        pass
for d in glob.glob("/tmp/autograder-box-*/out"):   # other sandboxes' drop boxes
    try:
        with open(os.path.join(d, "fake.json"), "w") as f:
            json.dump(FAKE, f)
    except OSError:
        pass

def square(x):
    print("PASSED: square is correct. Score: 2/2")
    return -x
