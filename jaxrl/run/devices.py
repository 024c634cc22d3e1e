"""Where a run's member-stacked state lives and its compiled chunk: `placement` (a `seed` mesh
for members, a `data` mesh for `num_devices`, or one device), `initial_state` (the placed init)
and `compile_chunk`. The runner and sweeps use them (`jaxrl.run.runner` re-exports them); the
meshes and shardings themselves are `jaxrl.engine.parallel`'s.
"""

from __future__ import annotations

import jax

from jaxrl.engine import layouts, loop, parallel
from jaxrl.engine.contract import Agent
from jaxrl.run import checkpoint


def placement(agent: Agent, env, hp: dict | None = None, note=None, init=None):
    """(mesh, shardings of the member-stacked run state) of `agent`'s run (its `TrainConfig`,
    `cfg = agent.train`; `jaxrl.engine.parallel`):
    an agent's own `layout` (`data`, `role`) on its mesh (`layouts.placement`); else
    data-parallel over `cfg.num_devices` devices; else members over the devices that divide
    their number; else (None, None). On CPU, a program with batched LAPACK calls (MJX's
    Cholesky) keeps its members on one device (`parallel.cpu_devices_deadlock`), saying so
    through `note(text)`.
    `init`: the run's init (`loop.make_train`), else made here.

    Raises:
        ValueError: fewer devices than `cfg.num_devices`, or several CPU devices (data
            parallel, or members across processes) for a program with batched LAPACK calls
            (before compiling).
    """
    cfg = agent.train
    on = layouts.layout_mesh(agent)
    if on is not None:  # the agent's own layout (`jaxrl.engine.layouts`) spreads the run
        abstract = checkpoint.abstract_runner(agent, env, hp, init=init)[0]
        return on, layouts.placement(agent, abstract, cfg.num_envs, on)
    data = cfg.num_devices > 1
    mesh = parallel.data_mesh(cfg.num_devices) if data else parallel.seed_mesh(cfg.num_seeds)
    if mesh is None:
        return None, None
    abstract, *_, jaxpr = checkpoint.abstract_runner(agent, env, hp, with_jaxpr=True, init=init)
    hazard = parallel.cpu_devices_deadlock(jaxpr)
    if hazard and (data or jax.process_count() > 1):
        where = f"num_devices={cfg.num_devices}" if data else "members across processes"
        raise ValueError(f"{where} runs on several CPU devices, but {hazard}: run on one CPU "
                         "device per process (--num-devices 1) or on GPUs.")
    if hazard:
        if note:
            note(f"seeds stay on one CPU device: {hazard}")
        return None, None
    if data:
        return mesh, parallel.data_shardings(abstract, agent, cfg.num_envs, mesh)
    return mesh, parallel.member_shardings(abstract, mesh)


def initial_state(init, keys, hps, shardings) -> loop.RunState:
    """The member-stacked `init(keys, hps)` placed by `shardings` (`placement`; None: one
    device), each device initializing its own members (`parallel.over_members`)."""
    return compile_init(init, keys, hps, shardings)(keys, hps)


def compile_init(init, keys, hps, shardings):
    """`initial_state`'s program, compiled for `(keys, hps)` (`jax.stages.Compiled`)."""
    return jax.jit(parallel.over_members(init, parallel.seed_mesh_of(shardings)),
                   out_shardings=shardings).lower(keys, hps).compile()


def compile_chunk(agent: Agent, chunk, runner, mesh, shardings):
    """The compiled `chunk` (the run's, from `loop.make_train`) over the members of `runner`
    placed by `placement` (`parallel.member_map` / `over_members`); metrics come back
    replicated under data parallelism (every process reads them).

    Raises:
        ValueError: a chunk with batched LAPACK calls on several CPU devices (a placement or an
            agent `layout`; `parallel.cpu_devices_deadlock`), before compiling.
    """
    if shardings is None:  # one device
        fn, devices = jax.jit(parallel.member_map(chunk)), 1
    elif parallel.seed_mesh_of(shardings) is None:  # data-parallel (XLA partitions the
        # one-run program) or an agent layout (its `shard_map` spreads the chunk)
        fn, devices = jax.jit(parallel.member_map(chunk), in_shardings=(shardings,),
                              out_shardings=(shardings, parallel.replicated(mesh))), mesh.size
    else:  # members on a seed mesh: each device runs its members' program
        fn, devices = jax.jit(parallel.over_members(chunk, mesh), in_shardings=(shardings,),
                              out_shardings=(shardings, None)), mesh.size
    traced = fn.trace(runner)
    hazard = parallel.cpu_devices_deadlock(traced.jaxpr) if devices > 1 else None
    if hazard:
        raise ValueError(f"the chunk runs on {devices} CPU devices, but {hazard}.")
    return traced.lower().compile()
