"""PyTorch's names that programs reach for outside the op library: top-level activations, inference_mode,
mg.cuda seeding, mg.backends, mg.accelerator, nn.parallel, and the deprecated mg.cuda.amp spellings."""
import threading
import warnings

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn


def test_top_level_activations_are_the_functional_ones():
    x = mg.randn(2, 3)
    for name in ("tanh", "sigmoid", "relu"):
        np.testing.assert_array_equal(getattr(mg, name)(x).numpy(), getattr(nn.functional, name)(x).numpy())
    np.testing.assert_array_equal(mg.softmax(x, 1).numpy(), nn.functional.softmax(x, dim=1).numpy())
    np.testing.assert_array_equal(mg.log_softmax(x, -1).numpy(), nn.functional.log_softmax(x, dim=-1).numpy())


def test_inference_mode_as_context_manager_and_decorator_per_thread():
    x = mg.ones(2, requires_grad=True)

    @mg.inference_mode
    def bare(t):
        return t * 2, mg.is_inference_mode_enabled()

    @mg.inference_mode()
    def called(t):
        return t * 2

    y, inside = bare(x)
    assert inside and not y.requires_grad and not called(x).requires_grad
    assert mg.is_grad_enabled() and not mg.is_inference_mode_enabled()
    with mg.inference_mode():
        assert not (x * 2).requires_grad and not mg.is_grad_enabled()
        with mg.inference_mode(False):                        # as in PyTorch: grad mode back on
            assert (x * 2).requires_grad and not mg.is_inference_mode_enabled()
        seen = []
        t = threading.Thread(target=lambda: seen.append((mg.is_inference_mode_enabled(), mg.is_grad_enabled())))
        t.start()
        t.join()
        assert seen == [(False, True)]                        # another thread is unaffected
    assert mg.is_grad_enabled() and mg.autograd.inference_mode is mg.inference_mode


def test_cuda_seeding_seeds_the_one_generator_every_device_draws_from():
    mg.cuda.manual_seed(5)
    a = mg.randn(3)
    mg.cuda.manual_seed_all(5)
    np.testing.assert_array_equal(a.numpy(), mg.randn(3).numpy())
    mg.manual_seed(5)
    np.testing.assert_array_equal(a.numpy(), mg.randn(3).numpy())
    assert mg.cuda.is_bf16_supported() is False


def test_backends_and_accelerator():
    assert mg.backends.mps.is_available() is False and mg.backends.mps.is_built() is False
    import minigrad.backends.cudnn as cudnn
    saved = mg.backends.cuda.matmul.allow_tf32, cudnn.benchmark
    try:
        mg.backends.cuda.matmul.allow_tf32 = True
        cudnn.benchmark = True
        assert mg.backends.cuda.matmul.allow_tf32 is True and mg.backends.cudnn.benchmark is True
    finally:
        mg.backends.cuda.matmul.allow_tf32, cudnn.benchmark = saved
    available = mg.cuda.is_available()
    assert mg.accelerator.is_available() == available
    assert mg.accelerator.current_accelerator() == (mg.device("cuda") if available else None)
    assert mg.accelerator.device_count() == mg.cuda.device_count()


def test_nn_parallel_ddp_is_the_distributed_class():
    from minigrad.nn.parallel import DistributedDataParallel
    assert DistributedDataParallel is mg.distributed.DistributedDataParallel
    assert mg.nn.parallel.DistributedDataParallel is DistributedDataParallel


def test_deprecated_cuda_amp_spellings_and_the_scaler_without_a_gpu(monkeypatch):
    from minigrad.backend import cuda as backend_cuda
    monkeypatch.setattr(backend_cuda, "probe", lambda: (None, 0))          # a machine without a GPU
    with pytest.warns(FutureWarning, match="torch.amp.GradScaler\\('cuda'"):
        with pytest.warns(UserWarning, match="CUDA is not available.  Disabling"):
            scaler = mg.cuda.amp.GradScaler(enabled=True)
    assert not scaler.is_enabled() and scaler.get_scale() == 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert mg.amp.GradScaler().is_enabled()                      # device=None: any device's gradients
        assert mg.amp.GradScaler("cpu").is_enabled()
        assert not mg.amp.GradScaler("cuda", enabled=False).is_enabled()
    model = nn.Linear(3, 1)
    opt = mg.optim.SGD(model.parameters(), lr=0.1)
    before = model.weight.detach().numpy().copy()
    scaler.scale(model(mg.ones(2, 3)).sum()).backward()
    scaler.step(opt)                                                  # disabled: a plain optimizer step
    scaler.update()
    assert not np.allclose(model.weight.detach().numpy(), before)
    with pytest.warns(FutureWarning, match="torch.amp.autocast\\('cuda'"):
        ctx = mg.cuda.amp.autocast()
    assert ctx.device_type == "cuda"
    from minigrad.cuda.amp import GradScaler  # noqa: F401  (importable, as torch.cuda.amp)


def test_legacy_variable_and_typed_constructors():
    from minigrad.autograd import Variable
    x = mg.ones(2)
    v = Variable(x, requires_grad=True)
    assert v.requires_grad and v is not x and isinstance(v, Variable) and isinstance(x, Variable)
    assert not isinstance(np.ones(2), Variable)
    with pytest.raises(TypeError, match="has to be a tensor"):
        Variable([1.0])
    idx = mg.LongTensor([3, 1])
    assert idx.dtype == mg.int64 and idx.tolist() == [3, 1] and isinstance(idx, mg.LongTensor)
    assert not isinstance(idx, mg.FloatTensor) and not isinstance(mg.ones(2), mg.LongTensor)
    sized = mg.FloatTensor(2, 3)
    assert tuple(sized.shape) == (2, 3) and sized.dtype == mg.float32
    assert mg.LongTensor(6).zero_().view(-1, 2).tolist() == [[0, 0]] * 3     # word_language_model's export
    assert mg.ByteTensor([1, 0]).dtype == mg.uint8 and mg.DoubleTensor([1]).dtype == mg.float64
