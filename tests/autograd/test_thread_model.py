"""One thread model: every mode is per thread. Two threads run different modes at the same time (autocast
on/off, different saved-tensor hooks, a profiler, grad mode, anomaly mode, memory labels) and neither sees
the other's (docs/ARCHITECTURE.md, "Thread model")."""
import threading

import numpy as np

import minigrad as mg
import minigrad.memory as mem
from minigrad.autograd import extensions
from minigrad.profiler import profile


def _run_both(a, b):
    """Run ``a`` and ``b`` in two threads that enter their modes, meet, compute, meet again and leave:
    both sets of modes are in force at once."""
    barrier = threading.Barrier(2, timeout=30)
    results, errors = {}, []

    def body(name, fn):
        try:
            results[name] = fn(barrier)
        except BaseException as e:      # reported in the main thread
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=body, args=(n, f), name=n) for n, f in (("A", a), ("B", b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results["A"], results["B"]


def test_two_threads_run_different_modes_at_once_without_seeing_each_others():
    w = mg.randn(8, 8, requires_grad=True)

    def a(barrier):
        packed = []
        with mg.autocast(device_type="cpu"), profile() as prof, \
                extensions.saved_tensors_hooks(lambda x: packed.append(x.dtype) or x, lambda x: x):
            barrier.wait()
            y = (mg.randn(4, 8) @ w).relu()
            barrier.wait()
        y.float().sum().backward()
        return y.dtype, packed, [e.name for e in prof.events()], mg.is_grad_enabled()

    def b(barrier):
        packed = []
        with mg.no_grad(), mg.autograd.detect_anomaly(), \
                extensions.saved_tensors_hooks(lambda x: packed.append("B") or x, lambda x: x):
            barrier.wait()
            y = mg.randn(4, 8) @ w                     # grad off here: nothing saved, no graph
            try:
                with np.errstate(divide="ignore"):
                    mg.tensor([1.0]).div(0.0)           # anomaly mode is on here: Inf is an error
                anomaly = None
            except mg.errors.AnomalyError as e:
                anomaly = str(e)
            barrier.wait()
        return y.dtype, y.requires_grad, packed, mg.amp.is_autocast_enabled("cpu"), anomaly

    (a_dtype, a_packed, a_events, a_grad), (b_dtype, b_grad, b_packed, b_autocast, b_anomaly) = _run_both(a, b)
    assert a_dtype == mg.float16 and b_dtype == mg.float32      # autocast in A only
    assert a_packed and set(a_packed) == {np.dtype(np.float16)}  # A's hooks saw A's (float16) saves
    assert b_packed == [] and not b_grad                         # B's hooks saw nothing: no_grad in B only
    assert a_grad and not b_autocast
    assert a_events == ["matmul", "relu"]                        # A's profile: A's ops, not B's matmul/div
    assert b_anomaly is not None and "div" in b_anomaly          # B's anomaly mode: B's div
    assert w.grad is not None and w.grad.dtype == mg.float32
    # nothing is left behind in this thread either
    assert not extensions.state.forward and not extensions.input_casts and mg.is_grad_enabled()


def test_memory_labels_and_the_pools_op_labels_are_per_thread():
    """The pool is process-wide (both threads allocate from it); what each thread labels is its own."""
    with mem.enabled("cpu"):
        mem.record_memory_history(True)
        try:
            def a(barrier):
                with mem.label("thread A"):
                    barrier.wait()
                    x = mg.randn(16, 16) * 2.0
                    barrier.wait()
                return x

            def b(barrier):
                barrier.wait()
                x = mg.randn(16, 16).exp()
                barrier.wait()
                return x

            _run_both(a, b)
            events = [e for e in mem.snapshot()["events"] if e["action"] == "alloc"]
        finally:
            mem.record_memory_history(False)
    by_op = {e["op"]: e["label"] for e in events if e["op"] in ("mul", "exp")}
    assert by_op == {"mul": "thread A", "exp": None}
