"""A small float64 TinyGPT shared by the inference tests (float64: cached and recomputed logits agree to
~1e-15, so sampled tokens agree exactly)."""
import pytest

import minigrad as mg
from minigrad.examples.tiny_gpt import TinyGPT


def make_gpt(vocab=20, context=48, d_model=32, n_layer=2, n_head=4, dtype=mg.float64, device="cpu", seed=0):
    mg.manual_seed(seed)
    return TinyGPT(vocab, context, d_model=d_model, n_layer=n_layer, n_head=n_head).to(dtype=dtype,
                                                                                   device=device).eval()


@pytest.fixture(scope="module")
def gpt():
    return make_gpt()


@pytest.fixture
def gpt_factory():
    return make_gpt
