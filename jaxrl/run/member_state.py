"""Where a sweep's members live and who writes them: member i of the member-stacked state
(`member`), the process that holds each (`owners`), the host copies of this process's members
(`local_members`, no collective when the state is split by member) and one checkpointer per
member this process holds (`savers`). `jaxrl.run.sweep` uses them.
"""

from __future__ import annotations

import os

import jax
import numpy as np

from jaxrl.engine import parallel
from jaxrl.run import checkpoint

MEMBERS_DIR = "members"


def member_dir(sweep_dir: str, m) -> str:
    """`<sweep_dir>/members/<name>`: member `m`'s run dir (`sweep_spec.Member`)."""
    return os.path.join(sweep_dir, MEMBERS_DIR, m.name)


def member(tree, i: int):
    """Member i of a stacked tree, keeping a leading axis of 1 (a 1-seed run's layout)."""
    return jax.tree.map(lambda x: x[i : i + 1], tree)


def owners(state) -> list[int]:
    """The process that writes each member's checkpoints: the one whose device holds the member
    (members on a `seed` mesh), else process 0 (members on one device, or data-parallel members
    spread over processes, which `local_members` gathers first)."""
    leaves = jax.tree.leaves(state)
    num = leaves[0].shape[0]
    owners = [0] * num
    if not all(_bymember(x) for x in leaves):
        return owners
    for device, index in leaves[0].sharding.devices_indices_map(leaves[0].shape).items():
        for row in range(num)[index[0]]:
            owners[row] = device.process_index
    return owners


def _bymember(x) -> bool:
    """Whether `x` is split on its member axis only (each device holds whole members)."""
    if not isinstance(x, jax.Array) or x.is_fully_addressable:
        return False
    shard = x.addressable_shards[0]
    return all(i == slice(None) or (i.start in (0, None) and i.stop in (n, None))
               for i, n in zip(shard.index[1:], x.shape[1:], strict=True))


def local_members(state, wanted: set[int]) -> dict[int, object]:
    """Host NumPy states `[1, ...]` of the `wanted` members, read from this process's shards (no
    collective); a state not split by member is fetched whole (every process must call it)."""
    leaves, treedef = jax.tree.flatten(state)
    if not all(_bymember(x) for x in leaves):
        full = parallel.fetch(state)
        return {i: member(full, i) for i in wanted}
    rows = []
    for x in leaves:
        held = {}
        for shard in x.addressable_shards:
            data = np.asarray(shard.data)
            for k, row in enumerate(range(x.shape[0])[shard.index[0]]):
                held.setdefault(row, data[k : k + 1])
        rows.append(held)
    return {i: jax.tree.unflatten(treedef, [held[i] for held in rows]) for i in wanted}


def savers(state, members, sweep_dir, run, agent, resumed_at: int) -> list:
    """One `Checkpointer` per member this process holds (`owners`), None for the others; each
    writes with this process alone, so processes never wait on each other's member saves. On
    resume, a member's chunks after `resumed_at` (saved before its peers') are deleted."""
    me, out = jax.process_index(), []
    for m, owner in zip(members, owners(state), strict=True):
        saver = None
        if owner == me:
            saver = checkpoint.Checkpointer(member_dir(sweep_dir, m), run.keep_checkpoints,
                                            run.checkpoint_replay, agent=agent, local=True)
            if resumed_at:
                saver.delete_after(resumed_at)
        out.append(saver)
    return out
