"""One run over several devices: the `data` and `role` layouts of `loop.make_train`'s chunk.

Both go through `shard_map` on a 1-D mesh (never `pmap`); an agent chooses one with its
`layout` property, `(kind, num_devices)`:

- `single`: the chunk as it is.
- `data`: the chunk runs on every device over `num_envs / D` envs. Env states and the
  exploration carry are sharded on their env axis, an agent's env-sharded state (its replay
  buffer: `agent.data_specs`) too, everything else is replicated. The agent averages gradients
  and sums normalizer moments over `DATA_AXIS` (`lax.pmean` / `psum`); the loop sums episode
  statistics. With `emulate_devices=True` the same per-shard program runs on one device under
  `vmap` with the same axis name: this is "one device with the same global batch", the
  reference the sharded run equals up to float reassociation.
- `role` (Parallel Q-Learning's architecture, Li et al., arXiv 2307.12983, Sec. 3): device 0
  collects experience, device 1 runs the critic (V) learner and device 2 the policy (P) learner
  (with 2 devices, device 1 runs both). Inside `shard_map`, `lax.switch(axis_index)` runs only
  the device's role; the exchanges happen after it, at the iteration boundary, where every device
  takes part: the chunk of transitions from the actor and the learners' new parameters are
  broadcast (a masked `psum`), then every device adds the chunk to its copy of the replay. The
  agent must use a schedule in which the roles do not read each other's output within an
  iteration and implement `role_keys(key)`, `critic_block(state, key)`,
  `actor_block(state, key)` and `finish_roles(state, traj, critic_out, actor_out)`
  (`agents/pql.py`); every device holds the whole run state (the replay is allocated on each).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec

from jaxrl.engine.parallel import DATA_AXIS, ROLE_AXIS, data_shardings, mesh, replicated


def distribute(agent, chunk, num_envs: int, emulate_devices: bool = False):
    """`chunk` placed on the devices of `agent.layout` (unchanged for `single`)."""
    kind, num = agent.layout
    if kind == "single":
        return chunk
    if kind == "role":
        return _shard(chunk, agent, lambda runner: _replicated(runner))
    if emulate_devices:
        return _emulate(chunk, agent, num_envs, num)

    def specs(runner):
        return _data_specs(runner, agent, num_envs)

    return _shard(chunk, agent, specs)


def layout_mesh(agent):
    """The 1-D mesh of `agent.layout` (`data` or `role` axis); None for `single`."""
    kind, num = agent.layout
    if kind == "single":
        return None
    return mesh(num, DATA_AXIS if kind == "data" else ROLE_AXIS, "this run's layout")


def placement(agent, runner, num_envs: int, on):
    """`NamedSharding`s on the layout mesh `on` (`layout_mesh`) of a member-stacked runner
    (arrays or shape structs), the same placement as `distribute`'s `shard_map` specs: the
    `data` layout splits the env axis and the agent's `data_specs`
    (`parallel.data_shardings`), `role` replicates everything. A compiled chunk given these
    as its in and out shardings keeps the run where the layout puts it, chunk after chunk
    (also when loaded from the warm-start store)."""
    if agent.layout[0] == "data":
        return data_shardings(runner, agent, num_envs, on)
    return jax.tree.map(lambda _: replicated(on), runner)


def _shard(chunk, agent, specs_of):
    def run(runner):
        specs = specs_of(runner)
        on = layout_mesh(agent)
        # Env code mixes per-shard and constant values in its carries; replication of the
        # outputs is guaranteed by the collectives instead of being type-checked.
        body = jax.shard_map(chunk, mesh=on, in_specs=(specs,),
                             out_specs=(specs, PartitionSpec()), check_vma=False)
        return body(runner)

    return run


def _replicated(tree):
    return jax.tree.map(lambda _: PartitionSpec(), tree)


def _env_axis_specs(tree, num_envs: int, axis: str):
    """`P(axis)` for leaves whose leading dimension is the env axis, else `P()` (MJX keeps some
    size-0 leaves unbatched)."""
    def spec(x):
        return (PartitionSpec(axis) if jnp.ndim(x) >= 1 and x.shape[0] == num_envs
                else PartitionSpec())

    return jax.tree.map(spec, tree)


def _data_specs(runner, agent, num_envs: int):
    return runner.replace(
        agent_state=agent.data_specs(runner.agent_state, DATA_AXIS),
        env_state=_env_axis_specs(runner.env_state, num_envs, DATA_AXIS),
        explore=_env_axis_specs(runner.explore, num_envs, DATA_AXIS),
        key=PartitionSpec(), iteration=PartitionSpec())


def _emulate(chunk, agent, num_envs: int, num: int):
    """The `data` layout's per-shard program on one device: `vmap` over `num` shards."""
    def run(runner):
        specs = _data_specs(runner, agent, num_envs)
        shards = jax.tree.map(lambda x, s: _split(x, s, num), runner, specs)
        out, metrics = jax.vmap(chunk, axis_name=DATA_AXIS)(shards)
        metrics = jax.tree.map(lambda m: m[0], metrics)
        return jax.tree.map(lambda x, s: _join(x, s), out, specs), metrics

    return run


def _sharded_axis(spec: PartitionSpec) -> int | None:
    return next((i for i, a in enumerate(spec) if a is not None), None)


def _split(x, spec: PartitionSpec, num: int):
    """`[..., n, ...]` -> `[num, ..., n / num, ...]` on the sharded axis; replicated: stacked."""
    axis = _sharded_axis(spec)
    if axis is None:
        return jnp.stack([x] * num)
    shape = x.shape[:axis] + (num, x.shape[axis] // num) + x.shape[axis + 1:]
    return jnp.moveaxis(x.reshape(shape), axis, 0)


def _join(x, spec: PartitionSpec):
    axis = _sharded_axis(spec)
    if axis is None:
        return x[0]
    x = jnp.moveaxis(x, 0, axis)
    return x.reshape(x.shape[:axis] + (-1,) + x.shape[axis + 2:])


# --- the role layout -------------------------------------------------------------------------


def broadcast_from(tree, source: int, axis: str = ROLE_AXIS):
    """Every device gets `source`'s value of `tree` (a masked `psum`; PRNG keys and booleans
    travel as their integer data)."""
    me = jax.lax.axis_index(axis)

    def one(x):
        if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
            return jax.random.wrap_key_data(one(jax.random.key_data(x)),
                                            impl=jax.random.key_impl(x))
        if x.dtype == jnp.bool_:
            return one(x.astype(jnp.int32)).astype(jnp.bool_)
        return jax.lax.psum(jnp.where(me == source, x, jnp.zeros_like(x)), axis)

    return jax.tree.map(one, tree)


def role_iteration(agent, collect, episode_sums):
    """The loop iteration of the `role` layout (same keys and numerics as the agent's
    `pipelined` update on one device).

    Args:
        collect: `(runner, key) -> (env_state, explore, traj)` (the loop's collection).
        episode_sums: `traj -> episode totals` (the loop's).
    """
    _, num = agent.layout
    p_device = num - 1

    def iteration(runner, _):
        key, key_roll, key_update = jax.random.split(runner.key, 3)
        k_critic, k_actor = agent.role_keys(key_update)
        state = runner.agent_state
        shapes = (jax.eval_shape(collect, runner, key_roll),
                  jax.eval_shape(agent.critic_block, state, k_critic),
                  jax.eval_shape(agent.actor_block, state, k_actor))
        zeros = [jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), t) for t in shapes[1:]]
        idle = (runner.env_state, runner.explore,  # what non-actor devices return
                jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes[0][2]))

        def actor_role(_):
            return collect(runner, key_roll), zeros[0], zeros[1]

        def v_role(_):
            p_out = agent.actor_block(state, k_actor) if p_device == 1 else zeros[1]
            return idle, agent.critic_block(state, k_critic), p_out

        def p_role(_):
            return idle, zeros[0], agent.actor_block(state, k_actor)

        branches = [actor_role, v_role] + ([p_role] if num == 3 else [])
        collected, critic_out, actor_out = jax.lax.switch(
            jax.lax.axis_index(ROLE_AXIS), branches, None)
        env_state, explore, traj = broadcast_from(collected, 0)
        critic_out = broadcast_from(critic_out, 1)
        actor_out = broadcast_from(actor_out, p_device)
        agent_state, metrics = agent.finish_roles(state, traj, critic_out, actor_out)
        metrics = dict(metrics, **episode_sums(traj))
        return runner.replace(agent_state=agent_state, env_state=env_state, key=key,
                              iteration=runner.iteration + 1, explore=explore), metrics

    return iteration

