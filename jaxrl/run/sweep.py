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

With `pbt` (`jaxrl sweep --pbt`, `jaxrl.run.pbt`) the members form a population: every few
chunks the worst copy the state of the best and perturb their searched hyperparameters, on the
devices, between two chunks of the same program; `<sweep_dir>/pbt.jsonl` keeps the lineage and
the summary names the best final member with its schedule.

Resume: `jaxrl sweep --resume SWEEP_DIR` restores every member from the latest chunk that all of
them saved and continues; the result (and the summary, and a PBT sweep's lineage) is
bit-identical to an uninterrupted sweep on the same machine.
"""

from __future__ import annotations

import dataclasses
import json
import os

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.engine import checks, loop, parallel
from jaxrl.run import (
    checkpoint,
    distributed,
    guards,
    member_state,
    pbt,
    restore,
    session,
    sweep_report,
    warm_start,
)
from jaxrl.run.assemble import build, build_agent, eval_key
from jaxrl.run.devices import compile_chunk, compile_init, placement
from jaxrl.run.evaluation import make_evaluator
from jaxrl.run.logging import Logger
from jaxrl.run.member_state import MEMBERS_DIR, member_dir  # noqa: F401  (the sweep's names)
from jaxrl.run.run_config import write_json
from jaxrl.run.session import Program
from jaxrl.run.sweep_progress import SweepProgress
from jaxrl.run.sweep_spec import Member

SWEEP_FILE = "sweep.json"


@dataclasses.dataclass
class SweepResult:
    """What `run_sweep` returns: the final stacked runner, per-member records, the summary."""

    runner: loop.RunState
    records: list[list[dict]]
    summary: dict
    compile_seconds: float
    train_seconds: float
    lineage: list[dict] = dataclasses.field(default_factory=list)
    """A PBT sweep's `pbt.jsonl` rows (`jaxrl.run.pbt.Lineage`); empty otherwise."""


def member_configs(m: Member, cfg: loop.TrainConfig, agent_config, run: loop.RunConfig):
    """(TrainConfig, agent config, RunConfig) of member `m` as a standalone `jaxrl train`
    run."""
    return (dataclasses.replace(cfg, num_seeds=1), dataclasses.replace(agent_config, **m.values),
            dataclasses.replace(run, seed=m.seed))


def _sweep_cfg(cfg: loop.TrainConfig, members: list[Member]) -> loop.TrainConfig:
    return dataclasses.replace(cfg, num_seeds=len(members))


def prepare(agent_name, env_name, cfg, agent_config, members, sweep_dir, preset=None,
            run: loop.RunConfig | None = None, search: dict | None = None,
            pbt_config: pbt.PBTConfig | None = None):
    """Validates every member (and the PBT settings), then writes sweep.json, each member's
    config.json and a PBT sweep's first lineage rows.

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
    run = run or loop.RunConfig()
    run.validate()
    search = {"grid": dict((search or {}).get("grid", {})),
              "random": dict((search or {}).get("random", {}))}
    if pbt_config is not None:
        pbt.search_space_of(agent_name, cfg, run, members, search, pbt_config)
    if jax.process_count() > 1:  # every process checked for an old sweep.json before any writes
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices("jaxrl sweep: sweep dir checked")
    agent, env, spec = build(agent_name, env_name, _sweep_cfg(cfg, members), agent_config)
    group = agent_name.replace("-", "_")
    resolved = []
    for m in members:
        cfg_m, agent_cfg_m, run_m = member_configs(m, cfg, agent_config, run)
        hp = {**agent.default_hp(), **m.values}
        checks.check_hp(hp, agent.HP_RANGES, group)
        resolved.append(checkpoint.resolved_config(
            agent_name, env_name, cfg_m, agent_cfg_m, spec, hp,
            {"preset": preset, "sweep": os.path.basename(os.path.abspath(sweep_dir)),
             "member": dataclasses.asdict(m)}, run_m))
    if distributed.is_primary():
        for m, res in zip(members, resolved, strict=True):
            os.makedirs(member_dir(sweep_dir, m), exist_ok=True)
            with open(os.path.join(member_dir(sweep_dir, m), checkpoint.CONFIG_FILE), "w") as f:
                json.dump(res, f, indent=2, default=str)
        write_json(os.path.join(sweep_dir, SWEEP_FILE), {
            "agent": agent_name, "env": env_name, "preset": preset,
            "train": dataclasses.asdict(cfg), "run": dataclasses.asdict(run),
            "agent_config": dataclasses.asdict(agent_config),
            "members": [dataclasses.asdict(m) for m in members], "search": search,
            "pbt": dataclasses.asdict(pbt_config) if pbt_config else None})
        if pbt_config is not None:
            pbt.Lineage(sweep_dir).write_start(members)
    return agent, env, spec, resolved


def run_sweep(agent_name, env_name, cfg, agent_config, members, sweep_dir, progress=True,
              preset=None, programs: str | None = None,
              run: loop.RunConfig | None = None, search: dict | None = None,
              pbt_config: pbt.PBTConfig | None = None) -> SweepResult:
    """Trains `members` of (agent, env, cfg, agent_config) together; see the module docstring.

    Args:
        cfg: the shared TrainConfig; `seed` and `num_seeds` come from the members.
        agent_config: the shared agent config; each member replaces its swept fields.
        members: from `sweep_spec.members` (each brings its seed: `run.seed` is not used).
        sweep_dir: output folder (must not hold a sweep yet).
        programs: the warm-start store (`jaxrl.run.warm_start`, kind `sweep`): a sweep of a
            config whose programs are stored loads them; otherwise it compiles and stores
            them. None: always compile, store nothing.
        run: the host settings shared by the members (checkpoints, logger, time budget).
        search: `{"grid": {name: values}, "random": {name: (dist, low, high)}}` the members
            came from (kept in sweep.json; PBT's search space).
        pbt_config: population-based training between chunks (`jaxrl.run.pbt`); None: a
            plain grid / random search.

    Raises:
        ValueError: as `prepare` (before compiling); NonFiniteError and TrainingInterrupted as
            `runner.train`.
    """
    run = run or loop.RunConfig()
    agent, env, _, resolved = prepare(agent_name, env_name, cfg, agent_config, members,
                                         sweep_dir, preset, run, search, pbt_config)
    warm = warm_start.lookup(programs, agent_name, env_name, _sweep_cfg(cfg, members),
                             agent_config, None, kind="sweep")
    population = pbt.population(agent, agent_name, cfg, run, members, sweep_dir, pbt_config,
                                search)
    return _session(agent, env, cfg, run, members, sweep_dir, resolved, progress, warm,
                    population=population)


def _init_args(resolved: list[dict], members: list[Member]):
    """(keys `[S, 2]`, hps `{name: [S]}`) of the members' init, as their standalone runs'."""
    hps = {k: jnp.asarray([r["hp"][k] for r in resolved], jnp.float32) for k in resolved[0]["hp"]}
    return jnp.stack([jax.random.PRNGKey(m.seed) for m in members]), hps


def resume_sweep(sweep_dir: str, progress: bool = True, programs: str | None = None,
                 max_train_seconds: float | None = None) -> SweepResult:
    """Continues the sweep in `sweep_dir` from the latest chunk every member saved. With the
    sweep's programs in the store `programs` the env is never built and nothing compiles.
    `max_train_seconds` replaces the saved time budget (the whole sweep's training time, as
    `jaxrl train --resume`'s), kept in sweep.json.

    Raises:
        checkpoint.CheckpointError: no sweep.json, a member without checkpoints, no chunk that
            all members saved, or a finished sweep (before compiling).
    """
    spec_json = read_sweep(sweep_dir)
    members = [Member(**m) for m in spec_json["members"]]
    resolved = [checkpoint.read_config(member_dir(sweep_dir, m)) for m in members]
    agent_name, env_name, cfg_m, agent_cfg_m, _ = checkpoint.parse_config(resolved[0])
    train = {k: v for k, v in spec_json["train"].items() if k not in loop.RUN_FIELDS}
    cfg = checkpoint.config_from_dict(loop.TrainConfig, train)
    run = checkpoint.parse_run(spec_json)
    if max_train_seconds is not None:
        run = dataclasses.replace(run, max_train_seconds=max_train_seconds)
        run.validate()
        if distributed.is_primary():
            write_json(os.path.join(sweep_dir, SWEEP_FILE),
                        dict(spec_json, run=dataclasses.asdict(run)))
    agent_config = checkpoint.config_from_dict(type(agent_cfg_m), spec_json["agent_config"])
    scfg = _sweep_cfg(cfg, members)
    step = common_chunk(sweep_dir, members, cfg.num_chunks)
    warm = warm_start.lookup(programs, agent_name, env_name, scfg, agent_config, None,
                             kind="sweep")
    notes = []
    stored = restore.load_stored(warm, notes.append)
    if stored is not None:  # the structure comes from the stored init: no env, no trace
        agent, env = build_agent(agent_name, scfg, agent_config, warm.meta["spec"]), None
        abstract, made = stored[0].out_info, None
    else:
        agent, env, _ = build(agent_name, env_name, scfg, agent_config)
        made = loop.make_train(agent, env)  # once per sweep
        abstract = checkpoint.abstract_runner(agent, env, None, init=made[0])[0]
    state, records = _restore_members(agent, abstract, members, sweep_dir, step)
    population = pbt.population(agent, agent_name, cfg, run, members, sweep_dir,
                                pbt.saved_config(spec_json), spec_json.get("search"))
    if population is not None:
        population.lineage.cut(step)
    return _session(agent, env, cfg, run, members, sweep_dir, resolved, progress, warm,
                    records, (state, stored, notes, made), population)


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
            session.rewrite_metrics(member_dir(sweep_dir, m), records[-1])
    state = jax.tree.map(lambda *xs: np.concatenate([np.asarray(x) for x in xs]), *parts)
    return state, records


def _session(agent, env, cfg, run, members, sweep_dir, resolved, progress, warm,
             records=None, resumed=None, population=None):
    """The run session (`session.run_session`) of the `[S]` program with one run dir per
    member. `resumed`: (restored state, loaded programs or None, notes, (init, chunk) or None)
    of a resume; `population`: a PBT sweep's rounds."""
    outputs = MemberOutputs(agent, cfg, run, members, sweep_dir, resolved, progress, records,
                            population)

    def prepare(note):
        for text in resumed[2] if resumed else []:
            note(text)
        stored = resumed[1] if resumed else restore.load_stored(warm, note)
        n = len(members)
        note(f"{'loading' if stored else 'compiling'} {n} member{'' if n == 1 else 's'} as one "
             "program ...")
        program = _programs(agent, env, cfg, members, resolved, warm, stored,
                            resumed[0] if resumed else None, note,
                            resumed[3] if resumed else None)
        if population is not None:
            population.compile(program.state)
        return program

    per_member = cfg.iterations_per_chunk * cfg.env_steps_per_iteration
    return session.run_session(agent, _sweep_cfg(cfg, members), run, prepare, outputs,
                               sweep_dir, "", per_member * len(members))


def _programs(agent, env, cfg, members, resolved, warm, stored, restored, note, made=None):
    """The `session.Program` of a sweep (its text: the devices the members are on): from the
    loaded programs `stored` (placed as their init's output), or compiled (and stored when
    `warm` has a key). `restored`: a resumed sweep's host state; None starts afresh. `made`:
    the sweep's `(init, chunk)` when already made."""
    scfg = _sweep_cfg(cfg, members)
    keys, hps = _init_args(resolved, members)
    if stored is not None:
        init, chunk, evaluator = stored
        shardings = init.output_shardings
        state = init(keys, hps) if restored is None else jax.device_put(restored, shardings)
        devices = len({d for s in jax.tree.leaves(shardings) for d in s.device_set})
        return Program(state, chunk, evaluator, f"members on {devices} device(s)", "loaded")
    init_fn, chunk_fn = made or loop.make_train(agent, env)  # once per sweep
    mesh, shardings = placement(agent, env, None, note, init_fn)
    with warm.compiling():
        init = None
        if restored is None or warm.key is not None:
            init = compile_init(init_fn, keys, hps, shardings)
        state = init(keys, hps) if restored is None else (
            restored if shardings is None else jax.device_put(restored, shardings))
        chunk = compile_chunk(agent, chunk_fn, state, mesh, shardings)
        evaluator = (make_evaluator(agent, env, mesh=mesh, member_keys=True)
                     if cfg.num_eval_envs else None)
        if warm.key is not None:
            evaluator = warm.store_programs(init, chunk, evaluator, state, scfg, agent.spec, "",
                                            note,
                                            eval_keys=_eval_keys(state, members, 0))
    devices = len(mesh.devices.flat) if mesh is not None else 1
    return Program(state, chunk, evaluator, f"members on {devices} device(s)", "compiled")


def _eval_keys(state, members, chunk_index: int):
    """Member i's eval key at chunk c (`assemble.eval_key`), as its standalone run uses."""
    return jnp.stack([eval_key(state.key, m.seed, chunk_index) for m in members])


class MemberOutputs:
    """The session's outputs of a sweep (`session.Outputs`): per member a run dir with its own
    records, logger and checkpointer (the members this process holds), one progress bar for
    all, and the sweep's summary at the end."""

    def __init__(self, agent, cfg, run, members, sweep_dir, resolved, progress, records=None,
                 population: pbt.Population | None = None):
        self.agent, self.cfg, self.run, self.members = agent, cfg, run, members
        self.population = population
        self.sweep_dir, self.resolved = sweep_dir, resolved
        self.records = records or [[] for _ in members]
        self.done = len(self.records[0])
        self.train_seconds = float(self.records[0][-1]["wall_time"]) if self.done else 0.0
        self.primary = distributed.is_primary()
        self.savers = []  # this process's members' (`member_state.owners`), None for others
        self.loggers = [Logger(member_dir(sweep_dir, m) if self.primary else None,
                               cfg.real_total_env_steps, False,
                               **session.logger_options(run, member_dir(sweep_dir, m), res))
                        for m, res in zip(members, resolved, strict=True)]
        self.bar = SweepProgress(members, cfg.num_chunks, progress and self.primary)
        self.layout = session.layout_name(agent, _sweep_cfg(cfg, members))
        self.per_member = cfg.iterations_per_chunk * cfg.env_steps_per_iteration

    def message(self, text: str) -> None:
        self.bar.message(text)

    def placed(self, program, compile_s: float) -> str:
        self.savers += member_state.savers(program.state, self.members, self.sweep_dir, self.run,
                               self.agent, self.done)
        return f"{program.verb} in {compile_s:.1f} s; layout {self.layout}, {program.text}"

    def eval_keys(self, state, chunk_index: int):
        return _eval_keys(state, self.members, chunk_index)

    def record(self, chunk_index: int, metrics: dict, ev: dict | None, train_s: float,
               dt: float):
        c = chunk_index
        for i in range(len(self.members)):
            rec = {"chunk": c + 1, "env_steps": self.per_member * (c + 1), "wall_time": train_s,
                   "perf/sps": self.per_member / dt, "layout": self.layout}
            rec.update({k: float(np.asarray(v)[i]) for k, v in metrics.items()})
            if ev is not None:
                rec.update({k: float(np.asarray(v)[i]) for k, v in ev.items()})
                rec["eval/episode_return_per_seed"] = [rec["eval/episode_return"]]
            self.loggers[i].log(rec)
            self.records[i].append(rec)
        # The run's SPS as `jaxrl train` says it (`logging.run_sps`): since the sweep began.
        self.bar.update(c + 1, [r[-1] for r in self.records],
                        self.per_member * len(self.members) * (c + 1) / max(train_s, 1e-9))

    def adapt(self, chunk: int, state):
        """A PBT round after `chunk` when one is due (`pbt.Population`), else `state`."""
        if self.population is None or not self.population.due(chunk, self.cfg.num_chunks):
            return state
        state, line = self.population.step(state, self.records, chunk, self.per_member * chunk)
        self.bar.message(line)
        return state

    def save(self, chunk: int, state) -> None:
        mine = member_state.local_members(
            state, {i for i, s in enumerate(self.savers) if s is not None})
        for i, part in sorted(mine.items()):
            self.savers[i].save(chunk, part, self.records[i], self.resolved[i])

    def latest_saver(self):
        return None

    def interrupted(self, chunk: int, signum: int) -> BaseException:
        for saver in filter(None, self.savers):
            saver.wait()
        return guards.TrainingInterrupted(
            f"interrupted after chunk {chunk} of {self.cfg.num_chunks}; every member saved it. "
            f"Resume with: jaxrl sweep --resume {self.sweep_dir}", self.sweep_dir, chunk, signum)

    def close(self, failing: bool) -> None:
        self.bar.close()
        for logger in self.loggers:
            logger.close()
        for saver in filter(None, self.savers):
            session.close_saver(saver, failing)

    def finish(self, state, compile_s: float, train_s: float) -> SweepResult:
        records = self.records
        params = parallel.fetch(self.agent.params_of(state.agent_state))  # every process
        hp = parallel.fetch(state.agent_state.hp) if self.population else None
        for i, m in enumerate(self.members):
            extra = {"hp": {k: float(v[i]) for k, v in sorted(hp.items())}} if hp else {}
            session.write_final(member_dir(self.sweep_dir, m), member_state.member(params, i),
                                self.primary,
                                {"compile_seconds": compile_s, "train_seconds": train_s,
                                 "env_steps": records[i][-1]["env_steps"] if records[i] else 0,
                                 "layout": records[i][-1]["layout"] if records[i] else "",
                                 "final": records[i][-1] if records[i] else {}, **extra})
        lineage = pbt.read_lineage(self.sweep_dir) if self.population and self.primary else []
        metric = self.population.cfg.metric if self.population else None
        summary = (sweep_report.write(self.sweep_dir, self.members, records, compile_s, train_s,
                                      lineage, metric) if self.primary else {})
        return SweepResult(state, records, summary, compile_s, train_s, lineage)
