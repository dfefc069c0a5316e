"""The pool under real tensors: factories, ops, backward, and the cuda emulator."""
import gc

import numpy as np
import pytest

import minigrad as mg
import minigrad.memory as mem
from minigrad.backend import cuda as backend_cuda, device, get_backend
from minigrad.memory import CachingAllocator, CPUSource, round_size, views_pool_block


def test_tensors_forward_and_backward_live_in_the_pool_and_leave_nothing_behind(fresh_cpu_pool):
    x = mg.randn(64, 32)
    w = mg.randn(32, 16, requires_grad=True)
    assert views_pool_block(x.array) and views_pool_block(w.array)
    assert mem.memory_allocated() == round_size(64 * 32 * 4) + round_size(32 * 16 * 4)
    loss = (x @ w).relu().sum()
    loss.backward()
    assert views_pool_block(loss.array) and views_pool_block(w.grad.array)
    assert mem.max_memory_allocated() > mem.memory_allocated()      # activations came and went
    del x, w, loss
    gc.collect()
    assert mem.memory_allocated() == 0                              # no block leaked
    assert mem.memory_reserved() > 0                                # ...but the cache is kept


emulated = pytest.mark.skipif(backend_cuda.probe()[0] != "emulated",
                              reason="needs the cuda emulator (MINIGRAD_EMULATE_CUDA=1, as make test sets)")


@emulated
def test_emulated_cuda_device_has_its_own_pool_and_statistics():
    dev = device("cuda")
    be = get_backend(dev)
    cpu_before = mem.memory_allocated("cpu")
    with mem.enabled("cuda", allocator=CachingAllocator(CPUSource(), "cuda:0")) as alloc:
        x = be.empty((1000,), np.float32)
        assert views_pool_block(x) and alloc.allocated_bytes() == 4096
        assert mem.memory_allocated("cuda") == mem.memory_allocated("cuda:0") == 4096
        assert mem.memory_allocated("cpu") == cpu_before
        assert mem.snapshot("cuda")["device"] == "cuda:0"
        mem.set_memory_limit(2 * mem.MiB, "cuda")
        with pytest.raises(mg.OutOfMemoryError, match="cuda:0: out of memory"):
            be.empty((2**20,), np.float32)
        assert mem.memory_stats("cuda")["num_ooms"] == 1
        t = mg.ones(8, 8, device="cuda")
        assert views_pool_block(t.array) and mem.memory_allocated("cuda") == 4096 + 512
        del x, t
        assert mem.memory_allocated("cuda") == 0
    assert get_backend(dev).allocator is None
