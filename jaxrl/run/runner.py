"""`jaxrl train` and `--resume`: build env and agent, validate, compile once (or load the
stored programs), then the run session (`jaxrl.run.session`) with one run dir as its output.

Seeds run vmapped (`num_seeds` members, one compile). With a run dir, the whole run state is
checkpointed every `RunConfig.checkpoint_every` chunks and after the last
(`jaxrl.run.checkpoint`); `resume(run_dir)` continues from the latest checkpoint and, on the
same machine and backend, ends with the same params and metrics as an uninterrupted run. After
each chunk a NaN guard checks the loss metrics and the params: a non-finite value stops the run
with `NonFiniteError` before that state is logged or saved. SIGINT/SIGTERM between the first and
the last chunk finish the current chunk, save it and raise `TrainingInterrupted`.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import numpy as np

from jaxrl.engine import loop
from jaxrl.run import checkpoint, distributed, guards, restore, warm_start
from jaxrl.run.assemble import build, build_agent, eval_key, seed_keys, stack_hp
from jaxrl.run.devices import compile_chunk, compile_init, initial_state, placement  # noqa: F401
from jaxrl.run.evaluation import (  # noqa: F401 (the runner's public evaluation API)
    evaluate_run,
    make_evaluator,
    summarize_eval,
)
from jaxrl.run.guards import NonFiniteError, TrainingInterrupted  # noqa: F401 (public here)
from jaxrl.run.logging import Logger
from jaxrl.run.session import (  # noqa: F401 (public here too)
    Program,
    close_saver,
    layout_name,
    load_params,
    logger_options,
    rewrite_metrics,
    run_session,
    save_params,
    write_final,
)


@dataclasses.dataclass
class RunResult:
    """What `train` returns: the final runner (leading seed axis), logs, timings."""

    runner: loop.RunState
    records: list[dict]
    compile_seconds: float
    train_seconds: float
    env_steps: int
    run_dir: str | None


def train(
    agent_name: str,
    env_name: str,
    cfg: loop.TrainConfig,
    agent_config,
    run_dir: str | None = None,
    progress: bool = True,
    hp: dict | None = None,
    resolved: dict | None = None,
    programs: str | None = None,
    run: loop.RunConfig | None = None,
) -> RunResult:
    """Trains `num_seeds` seeds of one agent on one env; see the module docstring.

    Args:
        run: the host settings (first seed, checkpoints, logger, time budget, watchdog);
            default `RunConfig()`.
        run_dir: folder for config.json, metrics, checkpoints and final params; None saves
            nothing. It must not hold checkpoints already (use `resume`).
        hp: float hyperparameters (default `agent.default_hp()`), the same for every seed.
        resolved: extra keys for config.json (the CLI adds `preset`).
        programs: a warm-start store folder (`jaxrl.run.warm_start`; the CLI passes
            `<compile cache>/jaxrl-programs`): a run whose compiled programs are there loads
            them and never builds the env (the returned runner's env state then holds
            `warm_start.Opaque` nodes in place of the simulator's types); otherwise it compiles
            and stores them. None: always compile, store nothing.

    Raises:
        ValueError: bad config, or `run_dir` already holds checkpoints (before compiling).
        NonFiniteError: a loss metric or param became non-finite.
        TrainingInterrupted: SIGINT/SIGTERM; the last completed chunk was saved.
    """
    run = run or loop.RunConfig()
    run.validate()
    if run_dir and checkpoint.existing_steps(run_dir):
        raise checkpoint.CheckpointError(
            f"{run_dir!r} already holds checkpoints (chunks "
            f"{', '.join(map(str, checkpoint.existing_steps(run_dir)))}): continue it with "
            f"`jaxrl train --resume {run_dir}` or choose another --run-dir."
        )
    warm = warm_start.lookup(programs, agent_name, env_name, cfg, agent_config, hp)
    if warm.meta is not None:  # the env is not built: its programs come from the store
        spec = warm.meta["spec"]
        agent, env = build_agent(agent_name, cfg, agent_config, spec), None
    else:
        agent, env, spec = build(agent_name, env_name, cfg, agent_config)
    hp = dict(hp or agent.default_hp())
    resolved = checkpoint.resolved_config(
        agent_name, env_name, cfg, agent_config, spec, hp, resolved, run
    )
    if run_dir and distributed.is_primary():
        checkpoint.write_config(run_dir, resolved)
    keys, hps = seed_keys(cfg, run.seed), stack_hp(hp, cfg.num_seeds)

    def cold(note, env=env):
        if env is None:  # the stored programs failed to load
            env = build(agent_name, env_name, cfg, agent_config)[1]
        init, chunk = loop.make_train(agent, env)  # once per run
        mesh, shardings = placement(agent, env, hp, note, init)
        with warm.compiling():
            init_compiled = compile_init(init, keys, hps, shardings)
            runner = init_compiled(keys, hps)
            compiled, evaluator = _programs(agent, env, chunk, runner, mesh, shardings)
            text = _members_text(cfg, mesh)
            if warm.key is not None:
                evaluator = warm.store_programs(init_compiled, compiled, evaluator, runner, cfg,
                                                spec, text, note)
        return Program(runner, compiled, evaluator, text, "compiled")

    outputs = RunOutputs(agent, cfg, run, run_dir, progress, resolved)
    if warm.meta is None:
        return run_session(agent, cfg, run, cold, outputs, run_dir)
    return run_session(agent, cfg, run, warm.prepare(keys, hps, cold), outputs, run_dir,
                       "loading the stored compiled programs (warm start) ...")


def resume(run_dir: str, progress: bool = True, programs: str | None = None,
           total_env_steps: int | None = None,
           max_train_seconds: float | None = None) -> RunResult:
    """Continues the run in `run_dir` from its newest readable checkpoint with its saved config.

    Metrics records after that checkpoint (a run killed between saves) are dropped from
    `metrics.jsonl` and computed again, so the file ends as an uninterrupted run's would. A
    checkpoint that cannot be read is moved aside to `checkpoints-broken/` with a warning and
    the next older one is used (`restore.newest_readable`).

    Args:
        programs: the warm-start store (`train`'s): when it holds this config's programs the
            resume loads them (the env is never built, nothing is traced or compiled);
            otherwise it compiles and stores them. None: always compile, store nothing.
        total_env_steps: train on to this many env steps per seed (above the saved budget;
            a finished run continues; `restore.train_on` says how schedules stretch).
        max_train_seconds: a new time budget (the whole run's training time).

    Raises:
        checkpoint.CheckpointError: no run dir, config or checkpoint; no checkpoint can be
            read; the run already finished (all before compiling).
        ValueError: a budget that does not train on.
        NonFiniteError, TrainingInterrupted: as `train`.
    """
    resolved, agent_name, env_name, cfg, agent_config, hp, run = _resumable(
        run_dir, total_env_steps, max_train_seconds)
    warm = restore.stored_programs(programs, agent_name, env_name, cfg, agent_config, hp)
    notes = []  # said once the logger is up
    stored = restore.load_stored(warm, notes.append)
    if stored is not None:
        agent, env, spec = build_agent(agent_name, cfg, agent_config, warm.meta["spec"]), None, None
    else:
        agent, env, spec = build(agent_name, env_name, cfg, agent_config)
    hp = hp or agent.default_hp()
    keys, hps = seed_keys(cfg, run.seed), stack_hp(hp, cfg.num_seeds)
    if stored is not None:
        mesh, (abstract, fresh, shardings) = None, restore.stored_target(stored[0], keys, hps)
        read = functools.partial(restore.read_runner, agent=agent, abstract=abstract, fresh=fresh,
                                 shardings=shardings)
    else:
        init, chunk = loop.make_train(agent, env)  # once per run
        mesh, shardings = placement(agent, env, hp, notes.append, init)
        read = functools.partial(restore.read_built, agent=agent, env=env, hp=hp,
                                 shardings=shardings, init=init)
    step, meta, state = restore.newest_readable(run_dir, read, notes.append)
    records = list(meta["records"])[:step]
    if distributed.is_primary():
        rewrite_metrics(run_dir, records)
        if total_env_steps is not None or max_train_seconds is not None:
            checkpoint.write_config(run_dir, resolved)

    def prepare(note):
        for text in notes:
            note(text)
        if stored is not None:
            return Program(state, stored[1], stored[2], warm.meta["info"]["members"],
                           "loaded the compiled programs")
        with warm.compiling():
            compiled, evaluator = _programs(agent, env, chunk, state, mesh, shardings)
            text = _members_text(cfg, mesh)
            if warm.key is not None:
                evaluator = warm.store_programs(compile_init(init, keys, hps, shardings),
                                                compiled, evaluator, state, cfg, spec, text, note)
        return Program(state, compiled, evaluator, text, "compiled")

    outputs = RunOutputs(agent, cfg, run, run_dir, progress, resolved, records)
    return run_session(agent, cfg, run, prepare, outputs, run_dir,
                       "loading the stored compiled programs (warm start) ..."
                       if stored is not None else "compiling ...")


def _resumable(run_dir: str, total_env_steps: int | None, max_train_seconds: float | None):
    """(resolved config, agent, env, TrainConfig, agent config, hp, RunConfig) of a run that
    can resume (with the new budgets applied, `restore.train_on`); CheckpointError when it has
    no checkpoint or already finished."""
    resolved = checkpoint.read_config(run_dir)
    agent_name, env_name, cfg, agent_config, hp = checkpoint.parse_config(resolved)
    run = checkpoint.parse_run(resolved)
    saved = checkpoint.existing_steps(run_dir)
    if not saved:
        raise checkpoint.CheckpointError(
            f"no checkpoint in {run_dir!r}: the run stopped before its first checkpoint, so "
            "there is nothing to resume: start it again.")
    cfg, run, resolved = restore.train_on(resolved, cfg, run, total_env_steps,
                                          max_train_seconds)
    if saved[-1] >= cfg.num_chunks:
        raise checkpoint.CheckpointError(
            f"the run in {run_dir!r} already finished (chunk {saved[-1]} of {cfg.num_chunks}); "
            f"train it on with `jaxrl train --resume {run_dir} --total-env-steps N`, N above "
            f"{cfg.real_total_env_steps:,}.")
    return resolved, agent_name, env_name, cfg, agent_config, hp, run


def _programs(agent, env, chunk, runner, mesh, shardings):
    """(compiled `chunk`, jitted evaluator or None) of a placed run (`placement`)."""
    compiled = compile_chunk(agent, chunk, runner, mesh, shardings)
    evaluator = make_evaluator(agent, env, mesh=mesh) if agent.train.num_eval_envs else None
    return compiled, evaluator


def _members_text(cfg: loop.TrainConfig, mesh) -> str:
    """`, seeds on D devices` when the member axis is placed on a `seed` mesh, else empty."""
    if cfg.num_devices > 1 or mesh is None or cfg.num_seeds == 1:
        return ""
    return f", seeds on {len(mesh.devices.flat)} {jax.default_backend()} devices"


class RunOutputs:
    """The session's outputs of one run (`session.Outputs`): one record per chunk over all
    seeds (seed means, and each seed's eval return), one logger, one checkpointer; process 0
    writes the logs, every process checkpoints."""

    def __init__(self, agent, cfg, run, run_dir, progress, resolved, records=()):
        self.agent, self.cfg, self.run, self.run_dir = agent, cfg, run, run_dir
        self.resolved, self.records = resolved, list(records)
        self.done = len(self.records)
        self.train_seconds = float(self.records[-1]["wall_time"]) if self.records else 0.0
        self.primary = distributed.is_primary()
        self.saver = (checkpoint.Checkpointer(run_dir, run.keep_checkpoints,
                                              run.checkpoint_replay, agent=agent)
                      if run_dir else None)
        self.logger = Logger(run_dir if self.primary else None,
                             cfg.real_total_env_steps * cfg.num_seeds, progress and self.primary,
                             **logger_options(run, run_dir, resolved))
        self.layout = layout_name(agent, cfg)
        self.steps_per_chunk = cfg.iterations_per_chunk * cfg.env_steps_per_iteration * \
            cfg.num_seeds

    def message(self, text: str) -> None:
        self.logger.message(text)

    def placed(self, program, compile_s: float) -> str:
        cfg = self.cfg
        return (f"{program.verb} in {compile_s:.1f} s; {cfg.real_total_env_steps:,} env steps "
                f"per seed x {cfg.num_seeds} seed{'' if cfg.num_seeds == 1 else 's'}; "
                f"layout {self.layout}{program.text}")

    def eval_keys(self, state, chunk_index: int):
        """The eval key of chunk i (`assemble.eval_key`; a typed key of the same bits when
        the run's keys are typed), so a resumed run evaluates as the uninterrupted one did."""
        return eval_key(state.key, self.run.seed, chunk_index)

    def record(self, chunk_index: int, metrics: dict, ev: dict | None, train_s: float,
               dt: float):
        i = chunk_index
        rec = {"chunk": i + 1, "env_steps": self.steps_per_chunk * (i + 1), "wall_time": train_s,
               "perf/sps": self.steps_per_chunk / dt, "layout": self.layout}
        rec.update({k: float(np.mean(v)) for k, v in metrics.items()})
        if ev is not None:
            rec.update({k: float(np.mean(v)) for k, v in ev.items()})
            rec["eval/episode_return_per_seed"] = [float(x) for x in ev["eval/episode_return"]]
        self.logger.log(rec)
        self.records.append(rec)

    def adapt(self, chunk: int, state):
        return state

    def save(self, chunk: int, state) -> None:
        if self.saver:
            self.saver.save(chunk, state, self.records, self.resolved or {})

    def latest_saver(self):
        return self.saver

    def interrupted(self, chunk: int, signum: int) -> BaseException:
        return guards.interrupted(self.saver, chunk, self.cfg, signum)

    def close(self, failing: bool) -> None:
        self.logger.close()
        if self.saver is not None:
            close_saver(self.saver, failing)

    def finish(self, state, compile_s: float, train_s: float) -> RunResult:
        records = self.records
        steps = records[-1]["env_steps"] if records else 0  # fewer under max_train_seconds
        if self.run_dir:
            write_final(self.run_dir, self.agent.params_of(state.agent_state), self.primary, {
                "compile_seconds": compile_s, "train_seconds": train_s, "env_steps": steps,
                "layout": self.layout, "final": records[-1] if records else {}})
        return RunResult(state, records, compile_s, train_s, steps, self.run_dir)
