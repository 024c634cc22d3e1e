"""Devices through `jit` shardings (never `pmap`): the seed axis sharded across devices.

Seeds (and hyperparameter-grid members) are independent programs stacked on a leading axis;
placing that axis on a 1-D `seed` mesh with `NamedSharding` lets XLA run each device's members
without any collective. Env-axis sharding of one big run (`shard_map` with `pmean` of gradients
and normalizer moments via `normalize.update(..., axis_name=...)`) builds on the same mesh.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec


def seed_mesh(num_members: int) -> Mesh | None:
    """A 1-D mesh over as many devices as divide `num_members`; None on one device."""
    devices = jax.devices()
    n = len(devices)
    while n > 1 and num_members % n:
        n -= 1
    return Mesh(np.asarray(devices[:n]), ("seed",)) if n > 1 else None


def shard_members(tree, mesh: Mesh | None):
    """Places every leaf's leading (member) axis on the mesh's `seed` axis."""
    if mesh is None:
        return tree
    sharded = NamedSharding(mesh, PartitionSpec("seed"))
    return jax.tree.map(lambda x: jax.device_put(x, sharded), tree)
