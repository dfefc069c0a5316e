"""``mg.utils.tensorboard.SummaryWriter``: PyTorch's TensorBoard logger, written by the tensorboardX package.

    from minigrad.utils.tensorboard import SummaryWriter
    writer = SummaryWriter(log_dir="runs/exp1")
    writer.add_scalar("Loss/train", loss.item(), step)     # tensors are accepted too
    writer.flush()                                         # then: tensorboard --logdir runs

The event files are TensorBoard's own format (tensorboardX writes them, as PyTorch's writer is derived
from it); minigrad only turns its tensors into NumPy arrays before handing them over. Like PyTorch's, the
writer needs an extra package: ``pip install tensorboardX`` (in ``.[tensorboard]`` and ``.[dev]``).
tensorboardX writes from a background thread, flushed every ``flush_secs`` and by ``flush()``/``close()``.
"""
try:
    import tensorboardX as _tbx
except ImportError as e:     # PyTorch's writer also fails at import without its package
    raise ImportError("minigrad.utils.tensorboard needs the tensorboardX package: pip install tensorboardX "
                      "(or pip install 'minigrad[tensorboard]')") from e

from ..tensor import Tensor

__all__ = ["SummaryWriter"]


def _host(value):
    """Tensors (also inside dicts) as NumPy arrays, everything else as given."""
    if isinstance(value, Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, dict):
        return {k: _host(v) for k, v in value.items()}
    return value


class SummaryWriter(_tbx.SummaryWriter):
    """``SummaryWriter(log_dir=None, comment='', purge_step=None, max_queue=10, flush_secs=120,
    filename_suffix='')``, PyTorch's arguments; the ``add_*`` methods accept minigrad tensors."""

    def __init__(self, log_dir=None, comment="", purge_step=None, max_queue=10, flush_secs=120,
                 filename_suffix=""):
        super().__init__(logdir=log_dir, comment=comment, purge_step=purge_step, max_queue=max_queue,
                         flush_secs=flush_secs, filename_suffix=filename_suffix)

    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None, **kwargs):
        return super().add_scalar(tag, _host(scalar_value), global_step, walltime, **kwargs)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None):
        return super().add_scalars(main_tag, _host(tag_scalar_dict), global_step, walltime)

    def add_histogram(self, tag, values, global_step=None, bins="tensorflow", walltime=None, max_bins=None):
        return super().add_histogram(tag, _host(values), global_step, bins, walltime, max_bins)

    def add_image(self, tag, img_tensor, global_step=None, walltime=None, dataformats="CHW"):
        return super().add_image(tag, _host(img_tensor), global_step, walltime, dataformats)

    def add_images(self, tag, img_tensor, global_step=None, walltime=None, dataformats="NCHW"):
        return super().add_images(tag, _host(img_tensor), global_step, walltime, dataformats)

    def add_hparams(self, hparam_dict, metric_dict, hparam_domain_discrete=None, run_name=None,
                    global_step=None):
        return super().add_hparams(_host(hparam_dict), _host(metric_dict), hparam_domain_discrete, run_name,
                                   global_step)
