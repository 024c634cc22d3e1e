"""`jaxrl sweep`: a grid or random search over float hyperparameters x seeds as one program.

All members (`sweep_spec.Member`: one seed at one point) train together: their run states are
stacked on a leading member axis, the chunk is `jit(vmap(chunk))` compiled once, and the member
axis is sharded over the devices that divide the member count (`jaxrl.engine.parallel`; with
`num_devices > 1` each member is data-parallel instead). Every member is a complete run dir,
`<sweep_dir>/members/<name>/`, written as `jaxrl train --seed SEED --<agent>.<hp> VALUE` would
write it (config.json, metrics.jsonl, TensorBoard, checkpoints, final_params, summary.json), so
`jaxrl eval | export | render | plot` work on a member, and a member's PRNG keys and evaluation
keys are those of that standalone run. `<sweep_dir>/sweep.json` holds the sweep;
`summary.{md,json,csv,png}` (`sweep_report`) compare the members at the end.

Resume: `jaxrl sweep --resume SWEEP_DIR` restores every member from the latest chunk that all of
them saved and continues; the result (and the summary) is bit-identical to an uninterrupted sweep
on the same machine.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.engine import checks, loop, parallel
from jaxrl.run import (
    checkpoint,
    distributed,
    guards,
    restore,
    runner,
    sweep_report,
    warm_start,
    watchdog,
)
from jaxrl.run.assemble import build, build_agent, eval_key
from jaxrl.run.logging import Logger
from jaxrl.run.sweep_progress import SweepProgress
from jaxrl.run.sweep_spec import Member

SWEEP_FILE = "sweep.json"
MEMBERS_DIR = "members"


@dataclasses.dataclass
class SweepResult:
    """What `run_sweep` returns: the final stacked runner, per-member records, the summary."""

    runner: loop.RunState
    records: list[list[dict]]
    summary: dict
    compile_seconds: float
    train_seconds: float


def member_configs(m: Member, cfg: loop.TrainConfig, agent_config):
    """(TrainConfig, agent config) of member `m` as a standalone `jaxrl train` run."""
    return (dataclasses.replace(cfg, seed=m.seed, num_seeds=1),
            dataclasses.replace(agent_config, **m.values))


def member_dir(sweep_dir: str, m: Member) -> str:
    return os.path.join(sweep_dir, MEMBERS_DIR, m.name)


def _sweep_cfg(cfg: loop.TrainConfig, members: list[Member]) -> loop.TrainConfig:
    return dataclasses.replace(cfg, num_seeds=len(members))


def prepare(agent_name, env_name, cfg, agent_config, members, sweep_dir, preset=None):
    """Validates every member, then writes sweep.json and each member's config.json.

    Raises:
        ValueError: bad config, a member's hyperparameter out of range, or a sweep dir that
            already holds a sweep (continue it with `--resume`); all before compiling.
    """
    if os.path.exists(os.path.join(sweep_dir, SWEEP_FILE)):
        raise checkpoint.CheckpointError(
            f"{sweep_dir!r} already holds a sweep: continue it with `jaxrl sweep --resume "
            f"{sweep_dir}` or choose another --sweep-dir.")
    if not members:
        raise ValueError("the sweep has no members.")
    if jax.process_count() > 1:  # every process checked for an old sweep.json before any writes
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices("jaxrl sweep: sweep dir checked")
    agent, env, spec = build(agent_name, env_name, _sweep_cfg(cfg, members), agent_config)
    group = agent_name.replace("-", "_")
    resolved = []
    for m in members:
        cfg_m, agent_cfg_m = member_configs(m, cfg, agent_config)
        hp = {**agent.default_hp(), **m.values}
        checks.check_hp(hp, agent.HP_RANGES, group)
        resolved.append(checkpoint.resolved_config(
            agent_name, env_name, cfg_m, agent_cfg_m, spec, hp,
            {"preset": preset, "sweep": os.path.basename(os.path.abspath(sweep_dir)),
             "member": dataclasses.asdict(m)}))
    if distributed.is_primary():
        for m, res in zip(members, resolved, strict=True):
            os.makedirs(member_dir(sweep_dir, m), exist_ok=True)
            with open(os.path.join(member_dir(sweep_dir, m), checkpoint.CONFIG_FILE), "w") as f:
                json.dump(res, f, indent=2, default=str)
        with open(os.path.join(sweep_dir, SWEEP_FILE), "w") as f:
            json.dump({"agent": agent_name, "env": env_name, "preset": preset,
                       "train": dataclasses.asdict(cfg),
                       "agent_config": dataclasses.asdict(agent_config),
                       "members": [dataclasses.asdict(m) for m in members]},
                      f, indent=2, default=str)
    return agent, env, spec, resolved


def run_sweep(agent_name, env_name, cfg, agent_config, members, sweep_dir, progress=True,
              preset=None, programs: str | None = None) -> SweepResult:
    """Trains `members` of (agent, env, cfg, agent_config) together; see the module docstring.

    Args:
        cfg: the shared TrainConfig; `seed` and `num_seeds` come from the members.
        agent_config: the shared agent config; each member replaces its swept fields.
        members: from `sweep_spec.members`.
        sweep_dir: output folder (must not hold a sweep yet).
        programs: the warm-start store (`jaxrl.run.warm_start`, kind `sweep`): a sweep of a
            config whose programs are stored loads them; otherwise it compiles and stores
            them. None: always compile, store nothing.

    Raises:
        ValueError: as `prepare` (before compiling); NonFiniteError and TrainingInterrupted as
            `runner.train`.
    """
    agent, env, spec, resolved = prepare(agent_name, env_name, cfg, agent_config, members,
                                         sweep_dir, preset)
    warm = warm_start.lookup(programs, agent_name, env_name, _sweep_cfg(cfg, members),
                             agent_config, None, kind="sweep")
    return _session(agent, env, spec, cfg, members, sweep_dir, resolved, progress, warm)


def _init_args(resolved: list[dict], members: list[Member]):
    """(keys `[S, 2]`, hps `{name: [S]}`) of the members' init, as their standalone runs'."""
    hps = {k: jnp.asarray([r["hp"][k] for r in resolved], jnp.float32) for k in resolved[0]["hp"]}
    return jnp.stack([jax.random.PRNGKey(m.seed) for m in members]), hps


def resume_sweep(sweep_dir: str, progress: bool = True, programs: str | None = None
                 ) -> SweepResult:
    """Continues the sweep in `sweep_dir` from the latest chunk every member saved. With the
    sweep's programs in the store `programs` the env is never built and nothing compiles.

    Raises:
        checkpoint.CheckpointError: no sweep.json, a member without checkpoints, no chunk that
            all members saved, or a finished sweep (before compiling).
    """
    spec_json = read_sweep(sweep_dir)
    members = [Member(**m) for m in spec_json["members"]]
    resolved = [checkpoint.read_config(member_dir(sweep_dir, m)) for m in members]
    agent_name, env_name, cfg_m, agent_cfg_m, _ = checkpoint.parse_config(resolved[0])
    cfg = checkpoint.config_from_dict(loop.TrainConfig, spec_json["train"])
    agent_config = checkpoint.config_from_dict(type(agent_cfg_m), spec_json["agent_config"])
    scfg = _sweep_cfg(cfg, members)
    step = common_chunk(sweep_dir, members, cfg.num_chunks)
    warm = warm_start.lookup(programs, agent_name, env_name, scfg, agent_config, None,
                             kind="sweep")
    notes = []
    stored = restore.load_stored(warm, notes.append)
    if stored is not None:  # the structure comes from the stored init: no env, no trace
        agent, env, spec = build_agent(agent_name, scfg, agent_config, warm.meta["spec"]), None, \
            None
        abstract = stored[0].out_info
    else:
        agent, env, spec = build(agent_name, env_name, scfg, agent_config)
        abstract = checkpoint.abstract_runner(agent, env, spec, scfg, None)[0]
    state, records = _restore_members(agent, abstract, members, sweep_dir, step)
    return _session(agent, env, spec, cfg, members, sweep_dir, resolved, progress, warm,
                    records, (state, stored, notes))


def read_sweep(sweep_dir: str) -> dict:
    path = os.path.join(sweep_dir, SWEEP_FILE)
    if not os.path.isfile(path):
        raise checkpoint.CheckpointError(f"{sweep_dir!r} holds no {SWEEP_FILE}: not a sweep dir.")
    with open(path) as f:
        return json.load(f)


def common_chunk(sweep_dir: str, members: list[Member], num_chunks: int) -> int:
    """The latest chunk saved by every member; CheckpointError when there is none or the sweep
    already finished."""
    common = None
    for m in members:
        steps = set(checkpoint.existing_steps(member_dir(sweep_dir, m)))
        common = steps if common is None else common & steps
    if not common:
        raise checkpoint.CheckpointError(
            f"no chunk of {sweep_dir!r} was saved by every member: the sweep stopped before its "
            "first checkpoint; start it again in a new --sweep-dir.")
    step = max(common)
    if step >= num_chunks:
        raise checkpoint.CheckpointError(f"the sweep in {sweep_dir!r} already finished.")
    return step


def _restore_members(agent, abstract, members, sweep_dir, step):
    """The stacked `[S]` runner of chunk `step` from the members' checkpoints (`abstract`: the
    `[S]` runner's structure), and each member's records up to it (their metrics.jsonl cut
    back to match)."""
    one = jax.tree.map(lambda a: jax.ShapeDtypeStruct((1,) + a.shape[1:], a.dtype), abstract)
    parts, records = [], []
    for m in members:
        reader = checkpoint.Checkpointer(member_dir(sweep_dir, m), read_only=True, agent=agent,
                                         local=True)
        try:
            meta = reader.restore_meta(step)
            if not meta.get("replay", True) and agent.has_replay:
                raise checkpoint.CheckpointError(
                    "a sweep resumes only from checkpoints with the replay buffer "
                    "(checkpoint_replay=True).")
            parts.append(reader.restore_state(step, one, True))
        finally:
            reader.close()
        records.append(list(meta["records"])[:step])
        if distributed.is_primary():
            runner._rewrite_metrics(member_dir(sweep_dir, m), records[-1])
    state = jax.tree.map(lambda *xs: np.concatenate([np.asarray(x) for x in xs]), *parts)
    return state, records


def _session(agent, env, spec, cfg, members, sweep_dir, resolved, progress, warm,
             records=None, resumed=None):
    """Compiles (or loads) the `[S]` program, runs the remaining chunks, writes member results
    and the summary. `resumed`: (restored state, loaded programs or None, notes) of a
    resume."""
    scfg = _sweep_cfg(cfg, members)
    records = records or [[] for _ in members]
    primary = distributed.is_primary()
    savers = []  # this process's members' (`_owners`), None for the others'; after placement
    loggers = [Logger(member_dir(sweep_dir, m) if primary else None, cfg.real_total_env_steps,
                      False, **runner._logger_options(cfg, member_dir(sweep_dir, m), res))
               for m, res in zip(members, resolved, strict=True)]
    bar = SweepProgress(members, cfg.num_chunks, progress and primary)
    try:
        with watchdog.Watchdog(cfg.watchdog_seconds, sweep_dir) as dog:
            dog.beat("compiling the sweep program")
            t0 = time.time()
            n = len(members)
            for text in resumed[2] if resumed else []:
                bar.message(text)
            stored = resumed[1] if resumed else restore.load_stored(warm, bar.message)
            bar.message(f"{'loading' if stored else 'compiling'} {n} member"
                        f"{'' if n == 1 else 's'} as one program ...")
            state, compiled, evaluator, devices = _programs(
                agent, env, spec, cfg, members, resolved, warm, stored,
                resumed[0] if resumed else None, bar.message)
            savers += _savers(state, members, sweep_dir, cfg, agent, len(records[0]))
            compile_s = time.time() - t0
            bar.message(f"{'loaded' if stored else 'compiled'} in {compile_s:.1f} s; layout "
                        f"{runner.layout_name(agent, scfg)}, members on {devices} device(s)")
            dog.beat(f"chunk {len(records[0]) + 1} of the sweep")
            with guards.StopOnSignal() as stop:
                state, train_s = _chunks(compiled, evaluator, state, cfg, members, records,
                                         loggers, savers, resolved, agent, stop, dog, bar,
                                         sweep_dir)
    except BaseException:
        _close_all(loggers, savers, bar, failing=True)
        raise
    _close_all(loggers, savers, bar, failing=False)
    params = parallel.fetch(agent.params_of(state.agent_state))  # every process takes part
    for i, m in enumerate(members):
        runner._write_final(member_dir(sweep_dir, m), _member(params, i), primary,
                            {"compile_seconds": compile_s, "train_seconds": train_s,
                             "env_steps": records[i][-1]["env_steps"] if records[i] else 0,
                             "layout": records[i][-1]["layout"] if records[i] else "",
                             "final": records[i][-1] if records[i] else {}})
    summary = sweep_report.write(sweep_dir, members, records, compile_s, train_s) if primary \
        else {}
    return SweepResult(state, records, summary, compile_s, train_s)


def _programs(agent, env, spec, cfg, members, resolved, warm, stored, restored, note):
    """(placed `[S]` state, chunk, evaluator or None, devices used) of a sweep: from the
    loaded programs `stored` (placed as their init's output), or compiled (and stored when
    `warm` has a key). `restored`: a resumed sweep's host state; None starts afresh."""
    scfg = _sweep_cfg(cfg, members)
    keys, hps = _init_args(resolved, members)
    if stored is not None:
        init, chunk, evaluator = stored
        shardings = init.output_shardings
        state = init(keys, hps) if restored is None else jax.device_put(restored, shardings)
        devices = len({d for s in jax.tree.leaves(shardings) for d in s.device_set})
        return state, chunk, evaluator, devices
    mesh, shardings = runner.placement(agent, env, spec, scfg, None, note)
    with warm.compiling():
        init = None
        if restored is None or warm.key is not None:
            init_fn, _ = loop.make_train(agent, env, spec, scfg)
            init = runner.compile_init(init_fn, keys, hps, shardings)
        state = init(keys, hps) if restored is None else (
            restored if shardings is None else jax.device_put(restored, shardings))
        chunk = runner.compile_chunk(agent, env, spec, scfg, state, mesh, shardings)
        evaluator = (runner.make_evaluator(agent, env, spec, scfg, mesh=mesh, member_keys=True)
                     if cfg.num_eval_envs else None)
        if warm.key is not None:
            evaluator = warm.store_programs(init, chunk, evaluator, state, scfg, spec, "", note,
                                            eval_keys=_eval_keys(state, members, 0))
    return state, chunk, evaluator, len(mesh.devices.flat) if mesh is not None else 1


def _member(tree, i: int):
    """Member i of a stacked tree, keeping a leading axis of 1 (a 1-seed run's layout)."""
    return jax.tree.map(lambda x: x[i : i + 1], tree)


def _owners(state) -> list[int]:
    """The process that writes each member's checkpoints: the one whose device holds the member
    (members on a `seed` mesh), else process 0 (members on one device, or data-parallel members
    spread over processes, which `_local_members` gathers first)."""
    leaves = jax.tree.leaves(state)
    num = leaves[0].shape[0]
    owners = [0] * num
    if not all(_by_member(x) for x in leaves):
        return owners
    for device, index in leaves[0].sharding.devices_indices_map(leaves[0].shape).items():
        for row in range(num)[index[0]]:
            owners[row] = device.process_index
    return owners


def _by_member(x) -> bool:
    """Whether `x` is split on its member axis only (each device holds whole members)."""
    if not isinstance(x, jax.Array) or x.is_fully_addressable:
        return False
    shard = x.addressable_shards[0]
    return all(i == slice(None) or (i.start in (0, None) and i.stop in (n, None))
               for i, n in zip(shard.index[1:], x.shape[1:], strict=True))


def _local_members(state, wanted: set[int]) -> dict[int, object]:
    """Host NumPy states `[1, ...]` of the `wanted` members, read from this process's shards (no
    collective); a state not split by member is fetched whole (every process must call it)."""
    leaves, treedef = jax.tree.flatten(state)
    if not all(_by_member(x) for x in leaves):
        full = parallel.fetch(state)
        return {i: _member(full, i) for i in wanted}
    rows = []
    for x in leaves:
        held = {}
        for shard in x.addressable_shards:
            data = np.asarray(shard.data)
            for k, row in enumerate(range(x.shape[0])[shard.index[0]]):
                held.setdefault(row, data[k : k + 1])
        rows.append(held)
    return {i: jax.tree.unflatten(treedef, [held[i] for held in rows]) for i in wanted}


def _savers(state, members, sweep_dir, cfg, agent, resumed_at: int) -> list:
    """One `Checkpointer` per member this process holds (`_owners`), None for the others; each
    writes with this process alone, so processes never wait on each other's member saves. On
    resume, a member's chunks after `resumed_at` (saved before its peers') are deleted."""
    me, out = jax.process_index(), []
    for m, owner in zip(members, _owners(state), strict=True):
        saver = None
        if owner == me:
            saver = checkpoint.Checkpointer(member_dir(sweep_dir, m), cfg.keep_checkpoints,
                                            cfg.checkpoint_replay, agent=agent, local=True)
            if resumed_at:
                saver.delete_after(resumed_at)
        out.append(saver)
    return out


def _eval_keys(state, members, chunk_index: int):
    """Member i's eval key at chunk c (`assemble.eval_key`), as its standalone run uses."""
    return jnp.stack([eval_key(state.key, m.seed, chunk_index) for m in members])


def _chunks(compiled, evaluator, state, cfg, members, records, loggers, savers, resolved,
            agent, stop, dog, bar, sweep_dir):
    """Runs chunks `len(records[0]) + 1 .. num_chunks`; returns (state, training seconds)."""
    done = len(records[0])
    train_s = float(records[0][-1]["wall_time"]) if done else 0.0
    per_member = cfg.iterations_per_chunk * cfg.env_steps_per_iteration
    layout = runner.layout_name(agent, cfg)
    for c in range(done, cfg.num_chunks):
        t = time.time()
        new, metrics = compiled(state)
        metrics = parallel.fetch(metrics)
        dt = time.time() - t
        guards.check_finite(metrics, agent.params_of(new.agent_state), c + 1, cfg,
                            per_member * len(members), None)
        state, train_s = new, train_s + dt
        out_of_time = cfg.max_train_seconds is not None and train_s >= cfg.max_train_seconds
        last = c + 1 == cfg.num_chunks or out_of_time
        ev = None
        if evaluator is not None and ((c + 1) % cfg.eval_every == 0 or last):
            ev = parallel.fetch(evaluator(state.agent_state, _eval_keys(state, members, c)))
        for i in range(len(members)):
            rec = {"chunk": c + 1, "env_steps": per_member * (c + 1), "wall_time": train_s,
                   "perf/sps": per_member / dt, "layout": layout}
            rec.update({k: float(np.asarray(v)[i]) for k, v in metrics.items()})
            if ev is not None:
                rec.update({k: float(np.asarray(v)[i]) for k, v in ev.items()})
                rec["eval/episode_return_per_seed"] = [rec["eval/episode_return"]]
            loggers[i].log(rec)
            records[i].append(rec)
        # The run's SPS as `jaxrl train` says it (`logging.run_sps`): since the sweep began.
        bar.update(c + 1, [r[-1] for r in records],
                   per_member * len(members) * (c + 1) / max(train_s, 1e-9))
        interrupted = stop.signum is not None and not last
        if (c + 1) % cfg.checkpoint_every == 0 or last or interrupted:
            mine = _local_members(state, {i for i, s in enumerate(savers) if s is not None})
            for i, part in sorted(mine.items()):
                savers[i].save(c + 1, part, records[i], resolved[i])
        dog.beat(f"chunk {c + 2} of the sweep")
        if interrupted:
            for saver in filter(None, savers):
                saver.wait()
            raise guards.TrainingInterrupted(
                f"interrupted after chunk {c + 1} of {cfg.num_chunks}; every member saved it. "
                f"Resume with: jaxrl sweep --resume {sweep_dir}", sweep_dir, c + 1, stop.signum)
        if out_of_time:
            bar.message(f"max_train_seconds ({cfg.max_train_seconds:g} s) reached after chunk "
                        f"{c + 1} of {cfg.num_chunks}.")
            break
    return state, train_s


def _close_all(loggers, savers, bar, failing: bool) -> None:
    bar.close()
    for logger in loggers:
        logger.close()
    for saver in filter(None, savers):
        runner._close_saver(saver, failing)
