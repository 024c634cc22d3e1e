"""Devices through `jit` shardings (never `pmap`): where a run's stacked state lives.

A run state has a leading member axis `S` (seeds and hyperparameter-grid members, vmapped).
Two placements, both plain `NamedSharding`s given to `jit`:

- **members** (`seed_mesh`): the member axis on a 1-D `seed` mesh. Members are independent
  programs: `over_members` runs each device's members under `jax.shard_map` (with one member
  per device, the single-run program), with no collective.
- **data-parallel** (`data_mesh`, `TrainConfig.num_devices`): one run's envs on a 1-D `data`
  mesh. Env states and exploration carries are split on their env axis, an agent's env-sharded
  state (its replay buffer, `agent.data_specs`) too; everything else (params, optimizer and
  normalizer state, keys) is replicated. The program is the one-device program: losses are
  means over the global batch, so the partitioned gradients are the global batch's gradients
  (averaged across devices by XLA's all-reduce) and normalizer statistics count every env
  exactly; results equal one device's up to float reassociation of those sums. XLA's SPMD
  partitioner writes the per-device program and its collectives.

Both work across processes: the meshes take `jax.devices()`, every device of every host after
`jax.distributed.initialize` (`jaxrl.run.distributed`), and `fetch` reads results that are
spread over processes.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

DATA_AXIS = "data"
"""The env axis of one run split over devices (`TrainConfig.num_devices`, PQL's `data` layout)."""
ROLE_AXIS = "role"
"""PQL's `role` layout: actor | V learner | P learner (`jaxrl.engine.layouts`)."""
SEED_AXIS = "seed"
MEMBER_AXIS = "member"
"""Name of the members' vmap axis (`member_map`): per-member predicates are reduced over it
(`wrappers.reset_done`) so that `lax.cond`s stay branches under the vmap."""


def member_map(f, in_axes=0):
    """`jax.vmap(f, in_axes)` over the leading member axis `S`, except that one member
    (`S == 1`) runs `f` unbatched, its axis dropped on the way in and added back on the way
    out. Same outputs and shapes, but the trace skips batching every op of the program (MJX's
    solver loops included), which took about a third of a warm start's tracing on a 2-core CPU.
    The vmap's axis is named `MEMBER_AXIS`.

    `in_axes`: 0 or None per positional argument, as `jax.vmap` takes it; outputs are stacked
    on axis 0.
    """
    vmapped = jax.vmap(f, in_axes=in_axes, axis_name=MEMBER_AXIS)

    def call(*args):
        axes = _per_arg(in_axes, len(args))
        sizes = {leaf.shape[0] for a, ax in zip(args, axes, strict=True) if ax is not None
                 for leaf in jax.tree.leaves(a)}
        if sizes != {1}:
            return vmapped(*args)
        args = [a if ax is None else jax.tree.map(lambda x: x[0], a)
                for a, ax in zip(args, axes, strict=True)]
        return jax.tree.map(lambda x: x[None], f(*args))

    return call


def _per_arg(in_axes, num_args: int) -> tuple:
    """`jax.vmap`-style `in_axes` (one value, or one per argument) as one per argument."""
    return tuple(in_axes) if isinstance(in_axes, (tuple, list)) else (in_axes,) * num_args


def over_members(f, mesh: Mesh | None, in_axes=0):
    """`member_map(f, in_axes)` run by each device of a `seed` mesh on its own members
    (`jax.shard_map`); with `mesh` None, `member_map(f, in_axes)` itself.

    With as many devices as members, every device runs one member's unbatched program: the
    same program as a single run, so a member's `lax.cond`s stay branches (under `vmap` a
    per-member predicate turns them into `select`s that run both sides) and its gathers and
    dots keep their unbatched kernels. Members are independent, so nothing crosses devices.
    Arguments with axis 0 are split on `seed`, those with None are copied to every device;
    outputs are split on `seed`.
    """
    mapped = member_map(f, in_axes)
    if mesh is None:
        return mapped

    def call(*args):
        specs = tuple(PartitionSpec(SEED_AXIS) if ax == 0 else PartitionSpec()
                      for ax in _per_arg(in_axes, len(args)))
        return jax.shard_map(mapped, mesh=mesh, in_specs=specs, out_specs=PartitionSpec(SEED_AXIS),
                             check_vma=False)(*args)

    return call


def seed_mesh_of(shardings) -> Mesh | None:
    """The `seed` mesh that `shardings` (from `member_shardings`) place members on, else None
    (no shardings, or a data-parallel placement)."""
    leaves = jax.tree.leaves(shardings, is_leaf=lambda s: isinstance(s, NamedSharding))
    if not leaves or not isinstance(leaves[0], NamedSharding):
        return None
    return leaves[0].mesh if SEED_AXIS in leaves[0].mesh.axis_names else None


def seed_mesh(num_members: int) -> Mesh | None:
    """A 1-D `seed` mesh over as many devices as divide `num_members`; None on one device."""
    devices = jax.devices()
    n = len(devices)
    while n > 1 and num_members % n:
        n -= 1
    return Mesh(np.asarray(devices[:n]), (SEED_AXIS,)) if n > 1 else None


def shard_members(tree, mesh: Mesh | None):
    """Places every leaf's leading (member) axis on the mesh's `seed` axis."""
    if mesh is None:
        return tree
    sharded = NamedSharding(mesh, PartitionSpec(SEED_AXIS))
    return jax.tree.map(lambda x: jax.device_put(x, sharded), tree)


def member_shardings(tree, mesh: Mesh):
    """`NamedSharding`s placing every leaf's leading (member) axis on `mesh`'s `seed` axis."""
    return jax.tree.map(lambda _: NamedSharding(mesh, PartitionSpec(SEED_AXIS)), tree)


def mesh(num: int, axis: str, what: str | None = None) -> Mesh:
    """The 1-D mesh `axis` over the first `num` devices (of all processes): the one mesh
    builder of one run's devices (`data_mesh`, `jaxrl.engine.layouts`).

    Raises:
        ValueError: fewer devices are visible (on CPU the message names the XLA flag that
            simulates host devices); `what` names the setting that asked for them.
    """
    devices = jax.devices()
    if len(devices) < num:
        raise ValueError(
            f"{what or 'this run'} needs {num} devices on its {axis!r} axis; {len(devices)} "
            f"visible ({jax.default_backend()}); on CPU simulate them with "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={num}.")
    return Mesh(np.asarray(devices[:num]), (axis,))


def data_mesh(num_devices: int) -> Mesh:
    """The `data` mesh of `TrainConfig.num_devices` (`mesh`)."""
    return mesh(num_devices, DATA_AXIS, f"num_devices={num_devices}")


# Linear-algebra primitives (`jax.lax.linalg`) that XLA:CPU runs as jaxlib's LAPACK kernels.
# Below this batch x n^3 a call was never seen to split (2 CPU devices, 50 calls each, jaxlib
# 0.10.2): 65,536 x 2^3, 4,096 x 4^3, 1,500 x 8^3, 64 x 18^3 ran; 12,000 x 4^3, 2,000 x 8^3,
# 1,000 x 10^3 and 1,024 x 18^3 hung. A third of the smallest hang, so MJX's 2 x 2 Cholesky of
# CartpoleBalance (256 envs: 2,048 per member) splits members over devices, Go1's 18 x 18 not.
LAPACK_SPLIT_WORK = 1 << 18
LAPACK_PRIMITIVES = frozenset({
    "cholesky", "eig", "eigh", "geqp3", "geqrf", "hessenberg", "householder_product", "lu",
    "ormqr", "qr", "schur", "svd", "triangular_solve", "tridiagonal", "tridiagonal_solve"})


def batched_lapack_calls(jaxpr) -> dict[str, tuple[int, ...]]:
    """The LAPACK-backed calls with a batch in a traced program, sub-programs included.

    Args:
        jaxpr: a `ClosedJaxpr` or `Jaxpr` (`jax.jit(f).trace(...).jaxpr`, `jax.make_jaxpr`).

    Returns:
        `{primitive name: shape of its first operand}` (the last shape seen per name) for each
        `LAPACK_PRIMITIVES` call whose operand has a batch: more than one matrix in its leading
        dimensions (e.g. MJX's `cholesky` `[num_envs, nv, nv]` of the mass matrix).
    """
    found: dict[str, tuple[int, ...]] = {}
    stack = [getattr(jaxpr, "jaxpr", jaxpr)]
    while stack:
        for eqn in stack.pop().eqns:
            if eqn.primitive.name in LAPACK_PRIMITIVES:
                shape = tuple(getattr(eqn.invars[0].aval, "shape", ()))
                if int(np.prod(shape[:-2])) > 1:
                    found[eqn.primitive.name] = shape
            stack.extend(_sub_jaxprs(eqn.params.values()))
    return found


def _sub_jaxprs(values):
    for v in values:
        if isinstance(v, (list, tuple)):
            yield from _sub_jaxprs(v)
        elif hasattr(v, "eqns"):
            yield v
        elif hasattr(getattr(v, "jaxpr", None), "eqns"):
            yield v.jaxpr


def cpu_devices_deadlock(jaxpr) -> str | None:
    """Why several CPU devices of this process must not run `jaxpr`'s program at once, or None.

    jaxlib's CPU LAPACK kernels (0.10) split a large enough batch of matrices over XLA's
    intra-op thread pool and block the pool thread that runs the kernel until the pieces are
    done. When as many such kernels run at the same time as the pool has threads (its size is
    the process's CPU count), every thread waits for work queued behind it: the process hangs
    with all threads in futex waits. Devices of one process share that pool, so members on a
    `seed` mesh or a data-parallel run over CPU devices hang as soon as two devices factorize
    at once; `jaxrl train --preset ppo-go1-flat-cpu --num-seeds 2` (MJX's batched Cholesky of
    Go1's mass matrix, 2 CPU devices on 2 cores) hung in its first chunk. One device runs the
    calls one after another and does not hang. `benchmarks/lapack_deadlock.py` reproduces it
    without jaxrl.

    Returns:
        A sentence naming the calls when the backend is CPU and the program has batched
        LAPACK calls (`batched_lapack_calls`) of at least `LAPACK_SPLIT_WORK` batch x n^3
        (the whole program's batch: members and envs, an overestimate per device); None
        otherwise (GPUs use cuSOLVER).
    """
    if jax.default_backend() != "cpu":
        return None
    calls = {name: shape for name, shape in batched_lapack_calls(jaxpr).items()
             if np.prod(shape[:-2]) * shape[-1] ** 3 >= LAPACK_SPLIT_WORK}
    if not calls:
        return None
    named = ", ".join(f"{name} {list(shape)}" for name, shape in sorted(calls.items()))
    return (f"the program has batched LAPACK calls ({named}), and jaxlib's CPU kernels for them "
            "deadlock when several CPU devices run them at once")


def _with_member_axis(spec: PartitionSpec) -> PartitionSpec:
    return PartitionSpec(None, *spec)


def data_shardings(runner, agent, num_envs: int, mesh: Mesh):
    """`NamedSharding`s of a member-stacked `loop.RunState` (arrays or shape structs) for the
    data-parallel placement: leaves `[S, N, ...]` of the env state and exploration carry split
    on N, the agent state as `agent.data_specs` says (per member), the rest replicated."""
    def env_axis(x):
        split = len(x.shape) >= 2 and x.shape[1] == num_envs
        return PartitionSpec(None, DATA_AXIS) if split else PartitionSpec()

    agent_specs = jax.tree.map(_with_member_axis, agent.data_specs(runner.agent_state, DATA_AXIS),
                               is_leaf=lambda s: isinstance(s, PartitionSpec))
    specs = runner.replace(
        agent_state=agent_specs,
        env_state=jax.tree.map(env_axis, runner.env_state),
        explore=jax.tree.map(env_axis, runner.explore),
        key=PartitionSpec(), iteration=PartitionSpec())
    return jax.tree.map(lambda s: NamedSharding(mesh, s), specs,
                        is_leaf=lambda s: isinstance(s, PartitionSpec))


def replicated(mesh: Mesh | None):
    """A sharding that copies a value to every device of `mesh` (None without a mesh)."""
    return None if mesh is None else NamedSharding(mesh, PartitionSpec())


def fetch(tree):
    """`jax.device_get` that also works for arrays spread over several processes: a value
    not held whole by this process is gathered from all of them first."""
    def get(x):
        if isinstance(x, jax.Array) and not x.is_fully_addressable and not x.is_fully_replicated:
            from jax.experimental import multihost_utils

            return np.asarray(multihost_utils.process_allgather(x, tiled=True))
        return jax.device_get(x)

    return jax.tree.map(get, tree)
