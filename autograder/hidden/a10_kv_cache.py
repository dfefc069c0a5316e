"""Hidden cases for a10_kv_cache: other seeds, chunk schedules, pools and request mixes for every public test
(never sent to the sandbox; the parent builds the inputs from these parameters and sends only arrays)."""
from autograder.spec import Case


def _c(label, **p):
    return Case(p, label=label)


def _req(seed, requests, blocks, block_size, seats, **extra):
    return dict(seed=seed, requests=requests, blocks=blocks, block_size=block_size, seats=seats, **extra)


CASES = {
    "part1/decoding equals recomputation": [_c("", seed=101, N=3, chunks=[2, 1, 1, 1, 1, 1, 1, 1, 1])],
    "part1/chunks after cached tokens": [_c("", seed=102, N=2, chunks=[2, 2, 7, 1, 3]),
                                         _c("", seed=103, N=1, chunks=[4, 9])],
    "part1/greedy tokens equal recomputation": [_c("", seed=104, N=3, prompt=2, new=14)],
    "part2/random traces": [_c("", seed=111, n=5, steps=200), _c("", seed=112, n=1, steps=40),
                            _c("", seed=113, n=16, steps=400)],
    "part2/a full pool and bad frees raise": [_c("", seed=114, n=7)],
    "part2/in the engine": [_c("", **_req(115, 7, 14, 2, 3, shared=True)), _c("", **_req(116, 8, 9, 3, 4, shared=True))],
    "part3/outputs equal running alone": [_c("", **_req(121, 9, 10, 2, 5))],
    "part3/the step log replays the policy": [_c("", **_req(121, 9, 10, 2, 5)), _c("", **_req(122, 6, 20, 8, 2))],
    "part3/throughput": [_c("", **_req(25, 12, 60, 4, 4, max_new=40))],
}
