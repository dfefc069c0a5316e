"""``parallelize_module(model, mesh, plan)``: tensor parallelism by a plan of PyTorch's parallel styles.

    plan = {"tok_emb": RowwiseParallel(input_layouts=Replicate()),     # vocabulary-parallel embedding
            "blocks.*.attn": HeadwiseParallel(),                       # heads split over ranks
            "blocks.*.mlp.fc": ColwiseParallel(),                      # column-parallel, output sharded
            "blocks.*.mlp.proj": RowwiseParallel(),                    # row-parallel, output all-reduced
            "head": ColwiseParallel(output_layouts=Replicate())}       # or Shard(-1) + loss_parallel
    model = parallelize_module(model, mesh["tp"], plan)

Each style turns one module into its tensor-parallel version (``tensor_parallel/layers.py``); the plan's keys
are dotted names in which ``*`` matches one name segment. Every rank must hold the same full model (the
styles broadcast each weight from the group's first rank before slicing). ``HeadwiseParallel`` is
minigrad's: PyTorch applies ColwiseParallel to separate q/k/v Linears, and minigrad's MultiheadAttention
keeps them in one ``in_proj_weight`` (PyTorch's layout), which must be split per head.
"""
import abc
import fnmatch

from ...errors import ArgumentError
from ...nn.module import Module
from ...nn.modules.attention import MultiheadAttention
from ...nn.modules.embedding import Embedding
from ...nn.modules.linear import Linear
from ..device_mesh import DeviceMesh
from .layers import ColumnParallelLinear, RowParallelLinear, TensorParallelAttention, VocabParallelEmbedding

__all__ = ["Replicate", "Shard", "ParallelStyle", "ColwiseParallel", "RowwiseParallel", "HeadwiseParallel",
           "parallelize_module"]


class Replicate:
    """Placement: every rank holds the whole tensor."""

    def __eq__(self, other):
        return isinstance(other, Replicate)

    def __repr__(self):
        return "Replicate()"


class Shard:
    """Placement: the tensor is split along ``dim`` over the ranks."""

    def __init__(self, dim):
        self.dim = dim

    def __eq__(self, other):
        return isinstance(other, Shard) and other.dim == self.dim

    def __repr__(self):
        return f"Shard({self.dim})"


class ParallelStyle(abc.ABC):
    """How one module is parallelized: ``apply(module, group) -> the new module``."""

    supported = ()

    @abc.abstractmethod
    def apply(self, module, group):
        """The parallel module that replaces ``module`` on this rank of ``group``."""

    def _refuse(self, module):
        names = ", ".join(c.__name__ for c in self.supported)
        raise ArgumentError(f"{type(self).__name__}: cannot parallelize a {type(module).__name__} (supported: "
                            f"{names})")


class ColwiseParallel(ParallelStyle):
    """Linear split by output features; input Replicate, output Shard(-1) (or Replicate: all-gathered)."""
    supported = (Linear,)

    def __init__(self, *, input_layouts=None, output_layouts=None, use_local_output=True):
        self.input_layouts = input_layouts or Replicate()
        self.output_layouts = output_layouts or Shard(-1)
        if self.input_layouts != Replicate() or self.output_layouts not in (Shard(-1), Replicate()):
            raise ArgumentError(f"ColwiseParallel: input_layouts must be Replicate() and output_layouts Shard(-1) "
                                f"or Replicate(), got {self.input_layouts} and {self.output_layouts}")

    def apply(self, module, group):
        if not isinstance(module, Linear):
            self._refuse(module)
        return ColumnParallelLinear.from_linear(module, group, gather_output=self.output_layouts == Replicate())


class RowwiseParallel(ParallelStyle):
    """Linear split by input features (input Shard(-1), or Replicate: split here), output all-reduced; an
    Embedding split by vocabulary rows (input ids Replicate)."""
    supported = (Linear, Embedding)

    def __init__(self, *, input_layouts=None, output_layouts=None, use_local_output=True):
        self.input_layouts = input_layouts
        self.output_layouts = output_layouts or Replicate()
        if self.output_layouts != Replicate():
            raise ArgumentError(f"RowwiseParallel: output_layouts must be Replicate(), got {self.output_layouts}")

    def apply(self, module, group):
        if isinstance(module, Embedding):
            return VocabParallelEmbedding.from_embedding(module, group)
        if not isinstance(module, Linear):
            self._refuse(module)
        parallel_input = (self.input_layouts or Shard(-1)) == Shard(-1)
        return RowParallelLinear.from_linear(module, group, input_is_parallel=parallel_input)


class HeadwiseParallel(ParallelStyle):
    """MultiheadAttention with its heads split over ranks (q/k/v column-parallel, out_proj row-parallel)."""
    supported = (MultiheadAttention,)

    def apply(self, module, group):
        if not isinstance(module, MultiheadAttention):
            self._refuse(module)
        return TensorParallelAttention.from_attention(module, group)


def _group_of(device_mesh):
    if isinstance(device_mesh, DeviceMesh):
        if device_mesh.ndim != 1:
            raise ArgumentError(f"parallelize_module: needs a 1-D mesh (e.g. mesh['tp']), got {device_mesh}")
        return device_mesh.get_group()
    return device_mesh  # a process group, or None for the world


def _matches(pattern, name):
    parts, names = pattern.split("."), name.split(".")
    return len(parts) == len(names) and all(fnmatch.fnmatchcase(n, p) for p, n in zip(parts, names))


def parallelize_module(module, device_mesh=None, parallelize_plan=None):
    """Apply ``parallelize_plan`` (a ParallelStyle, or {dotted name pattern: style}) over ``device_mesh`` (a
    1-D DeviceMesh, a process group, or None: the world). Returns the module (a new one if the plan is a style)."""
    group = _group_of(device_mesh)
    if isinstance(parallelize_plan, ParallelStyle):
        return parallelize_plan.apply(module, group)
    if not isinstance(parallelize_plan, dict) or not isinstance(module, Module):
        raise ArgumentError("parallelize_module: needs a Module and a plan (a ParallelStyle or a dict of them)")
    names = [n for n, _ in module.named_modules() if n]
    for pattern, style in parallelize_plan.items():
        hits = [n for n in names if _matches(pattern, n)]
        if not hits:
            raise ArgumentError(f"parallelize_module: plan entry {pattern!r} matches no submodule")
        for name in hits:
            parent_name, _, child = name.rpartition(".")
            parent = module.get_submodule(parent_name) if parent_name else module
            setattr(parent, child, style.apply(getattr(parent, child), group))
    return module
