"""DeviceMesh: the world's ranks laid out as an n-D grid, one process group per grid line (PyTorch's names).

    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))   # 4 ranks:  [[0, 1],
    mesh["tp"].get_group()    # rank 2: the group [2, 3]                  #            [2, 3]]
    mesh["dp"].get_group()    # rank 2: the group [0, 2]

Rank r sits at ``mesh == r``; along each dimension the ranks that differ only in that coordinate form a
group. Every rank creates every group (``new_group``'s rule), dimension by dimension, so all agree on them.
DP×TP: tensor parallel inside each row (``mesh["tp"]``), data parallel down each column (``mesh["dp"]``).
"""
import numpy as np

from ..errors import ArgumentError
from .groups import new_group
from .process_group import _group

__all__ = ["DeviceMesh", "init_device_mesh"]


class DeviceMesh:
    """``DeviceMesh(device_type, mesh, mesh_dim_names=None)``: ``mesh`` an array of global ranks holding each
    rank once. Building one creates its groups (a collective step: every rank must build the same mesh)."""

    def __init__(self, device_type, mesh, mesh_dim_names=None, _groups=None):
        world = _group()
        self.device_type = str(device_type)
        self.mesh = np.asarray(mesh, dtype=np.int64)
        names = tuple(mesh_dim_names) if mesh_dim_names is not None else None
        if names is not None and len(names) != self.mesh.ndim:
            raise ArgumentError(f"DeviceMesh: {len(names)} mesh_dim_names {names} for a {self.mesh.ndim}-D mesh")
        if names is not None and len(set(names)) != len(names):
            raise ArgumentError(f"DeviceMesh: mesh_dim_names must be distinct, got {names}")
        self.mesh_dim_names = names
        flat = sorted(self.mesh.reshape(-1).tolist())
        if _groups is None and flat != list(range(world.size)):
            raise ArgumentError(f"DeviceMesh: the mesh {self.mesh.tolist()} must hold each of the world's "
                                f"{world.size} ranks exactly once")
        where = np.argwhere(self.mesh == world.rank)
        if len(where) != 1:
            raise ArgumentError(f"DeviceMesh: rank {world.rank} is not in the mesh {self.mesh.tolist()}")
        self.coordinate = tuple(int(c) for c in where[0])
        self._groups = _groups if _groups is not None else [self._make_groups(d) for d in range(self.mesh.ndim)]

    def _make_groups(self, dim):
        """Every line of the grid along ``dim``, each made a group by every rank; returns this rank's."""
        lines = np.moveaxis(self.mesh, dim, -1).reshape(-1, self.mesh.shape[dim])
        mine = None
        for line in lines:
            g = new_group(line.tolist())
            if world_rank() in line:
                mine = g
        return mine

    def _dim(self, mesh_dim):
        if mesh_dim is None:
            if self.mesh.ndim != 1:
                raise ArgumentError(f"DeviceMesh: a {self.mesh.ndim}-D mesh needs mesh_dim (one of "
                                    f"{self.mesh_dim_names or tuple(range(self.mesh.ndim))})")
            return 0
        if isinstance(mesh_dim, str):
            if not self.mesh_dim_names or mesh_dim not in self.mesh_dim_names:
                raise ArgumentError(f"DeviceMesh: no dimension named {mesh_dim!r} (names: {self.mesh_dim_names})")
            return self.mesh_dim_names.index(mesh_dim)
        if not -self.mesh.ndim <= mesh_dim < self.mesh.ndim:
            raise ArgumentError(f"DeviceMesh: mesh_dim {mesh_dim} out of range for a {self.mesh.ndim}-D mesh")
        return mesh_dim % self.mesh.ndim

    def get_group(self, mesh_dim=None):
        """This rank's process group along ``mesh_dim`` (a name or an index)."""
        return self._groups[self._dim(mesh_dim)]

    def size(self, mesh_dim=None):
        return int(self.mesh.size if mesh_dim is None else self.mesh.shape[self._dim(mesh_dim)])

    @property
    def ndim(self):
        return self.mesh.ndim

    @property
    def shape(self):
        return tuple(self.mesh.shape)

    def get_local_rank(self, mesh_dim=None):
        """This rank's coordinate along ``mesh_dim``: its rank in that dimension's group."""
        return self.coordinate[self._dim(mesh_dim)]

    def get_coordinate(self):
        return list(self.coordinate)

    def __getitem__(self, name):
        """The 1-D mesh along dimension ``name`` that holds this rank (its group already made)."""
        d = self._dim(name)
        index = list(self.coordinate)
        index[d] = slice(None)
        sub = DeviceMesh.__new__(DeviceMesh)
        sub.device_type, sub.mesh = self.device_type, self.mesh[tuple(index)]
        sub.mesh_dim_names = (self.mesh_dim_names[d],) if self.mesh_dim_names else None
        sub.coordinate, sub._groups = (self.coordinate[d],), [self._groups[d]]
        return sub

    def __repr__(self):
        names = f", mesh_dim_names={self.mesh_dim_names}" if self.mesh_dim_names else ""
        return f"DeviceMesh('{self.device_type}', {self.mesh.tolist()}{names})"


def world_rank():
    return _group().rank


def init_device_mesh(device_type, mesh_shape, *, mesh_dim_names=None):
    """A mesh of shape ``mesh_shape`` over all ranks in order (rank r at the r-th cell, row-major)."""
    world = _group()
    shape = tuple(int(s) for s in mesh_shape)
    if int(np.prod(shape)) != world.size:
        raise ArgumentError(f"init_device_mesh: mesh_shape {shape} holds {int(np.prod(shape))} ranks, but the "
                            f"world has {world.size}")
    return DeviceMesh(device_type, np.arange(world.size).reshape(shape), mesh_dim_names=mesh_dim_names)
