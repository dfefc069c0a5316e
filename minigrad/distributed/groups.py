"""Process subgroups: ``new_group(ranks)``, PyTorch's name, so TP, PP and DP can each talk among their own ranks.

    tp = dist.new_group([0, 1]); dp = dist.new_group([0, 2])   # every rank calls new_group for every group,
    dist.all_reduce(t, group=tp)                                # in the same order (PyTorch's rule)

A subgroup is a ``ProcessGroup`` of its own: its rank is the rank *in the group*, ``ranks`` lists the members'
global ranks, and it has its own communicator (MPI_Comm_create_group over the members; on NCCL a
communicator with its own unique id) and its own collective counter. The members meet at the world's store
first, with the world's deadline, so a member that died is named instead of waited for; a rank that asks for
a group with other members than its peers did gets an error naming both lists. Non-members get
``GroupMember.NON_GROUP_MEMBER``, which every collective refuses.
"""
import json
import time

from ..errors import ArgumentError, DistTimeoutError, DistributedError
from .process_group import ProcessGroup, _group, _seconds

__all__ = ["new_group", "GroupMember", "get_group_rank", "get_global_rank", "get_process_group_ranks"]


class _NonMember:
    rank = size = -1  # what get_rank / get_world_size answer outside the group, as PyTorch's

    def __repr__(self):
        return "GroupMember.NON_GROUP_MEMBER"


class GroupMember:
    """``GroupMember.WORLD`` is None (the default group); ``NON_GROUP_MEMBER`` is what ``new_group`` returns on
    ranks outside the group."""
    WORLD = None
    NON_GROUP_MEMBER = _NonMember()


def new_group(ranks=None, timeout=None, backend=None):
    """A group of the global ``ranks`` (all of them if None). Every rank of the world must call it for every
    group, in the same order, members or not."""
    world = _group()
    ranks = list(range(world.size)) if ranks is None else [int(r) for r in ranks]
    if not ranks or len(set(ranks)) != len(ranks) or not all(0 <= r < world.size for r in ranks):
        raise ArgumentError(f"new_group: ranks must be distinct ranks of this world of size {world.size}, got "
                            f"{ranks}")
    if backend is not None and str(backend).lower() != world.backend_name:
        raise ArgumentError(f"new_group: backend {backend!r} differs from the world's {world.backend_name!r}")
    world.groups_made += 1
    name = f"group{world.groups_made}"
    seconds = world.timeout if timeout is None else _seconds(timeout)
    if world.rank not in ranks:
        return GroupMember.NON_GROUP_MEMBER
    group = ProcessGroup(world.backend_name, ranks.index(world.rank), len(ranks), world.store, seconds,
                         ranks=ranks, name=name, world=world)
    _meet(group, f"{world.prefix}{name}/")
    group.backend = world.backend.new_subgroup(group)
    world.subgroups[name] = group
    return group


def _meet(group, prefix):
    """The members say hello at the store and compare member lists; wait for all, or name who is missing."""
    store, me = group.store, group.global_rank
    store.set(f"{prefix}ranks/{me}", json.dumps(group.ranks))
    deadline, delay = time.monotonic() + group.timeout, 0.001
    for r in group.ranks:
        while True:
            theirs = store.try_get(f"{prefix}ranks/{r}", 0)
            if theirs is not None:
                break
            if time.monotonic() > deadline:
                missing = [q for q in group.ranks if store.try_get(f"{prefix}ranks/{q}", 0) is None]
                raise DistTimeoutError(f"new_group({group.ranks}) ({group.name}): rank {me} waited "
                                       f"{group.timeout:g} s, but rank(s) {missing} never created it (did they "
                                       f"die, or call new_group a different number of times?)")
            time.sleep(delay)
            delay = min(2 * delay, 0.05)
        if json.loads(theirs) != group.ranks:
            raise DistributedError(f"new_group: rank {me} made {group.name} with ranks {group.ranks}, but rank {r} "
                                   f"made it with ranks {json.loads(theirs)}: every rank must call new_group for "
                                   f"every group, in the same order")


def _member(group, what):
    if group is None:
        return _group()
    if not isinstance(group, ProcessGroup):
        raise ArgumentError(f"{what}: this rank is not a member of {group!r}")
    return group


def get_process_group_ranks(group):
    """The global ranks of ``group`` (None: the world)."""
    return list(_member(group, "get_process_group_ranks").ranks)


def get_group_rank(group, global_rank):
    g = _member(group, "get_group_rank")
    if global_rank not in g.ranks:
        raise ArgumentError(f"get_group_rank: global rank {global_rank} is not in {g.name} (ranks {g.ranks})")
    return g.ranks.index(global_rank)


def get_global_rank(group, group_rank):
    g = _member(group, "get_global_rank")
    if not 0 <= group_rank < g.size:
        raise ArgumentError(f"get_global_rank: {g.name} has ranks 0..{g.size - 1}, got {group_rank}")
    return g.ranks[group_rank]
