"""Host driver: build env and agent, validate, compile once, run chunks, log, evaluate, save.

Seeds run vmapped (`num_seeds` members, one compile). Compile time is measured apart from
training time; `perf/sps` is the real env steps of one chunk (all seeds) over its wall time,
evaluation excluded, as Brax's `training/sps`.

With a run dir, the whole run state is checkpointed every `checkpoint_every` chunks and after
the last (`jaxrl.run.checkpoint`); `resume(run_dir)` continues from the latest checkpoint and, on
the same machine and backend, ends with the same params and metrics as an uninterrupted run.
After each chunk a NaN guard checks the loss metrics and the params: a non-finite value stops
the run with `NonFiniteError` before that state is logged or saved. SIGINT/SIGTERM between the
first and the last chunk finish the current chunk, save it and raise `TrainingInterrupted`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time

import jax
import numpy as np

from jaxrl.engine import loop, parallel
from jaxrl.engine.contract import Agent
from jaxrl.run import checkpoint, distributed, guards, restore, warm_start, watchdog
from jaxrl.run.assemble import build, build_agent, eval_key, seed_keys, stack_hp
from jaxrl.run.devices import compile_chunk, compile_init, initial_state, placement  # noqa: F401
from jaxrl.run.evaluation import (  # noqa: F401 (the runner's public evaluation API)
    evaluate_run,
    make_evaluator,
    summarize_eval,
)
from jaxrl.run.guards import NonFiniteError, TrainingInterrupted  # noqa: F401 (public here)
from jaxrl.run.logging import Logger, read_jsonl


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
) -> RunResult:
    """Trains `num_seeds` seeds of one agent on one env; see the module docstring.

    Args:
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
        agent_name, env_name, cfg, agent_config, spec, hp, resolved
    )
    if run_dir and distributed.is_primary():
        checkpoint.write_config(run_dir, resolved)
    keys, hps = seed_keys(cfg), stack_hp(hp, cfg.num_seeds)

    def cold(note, env=env):
        if env is None:  # the stored programs failed to load
            env = build(agent_name, env_name, cfg, agent_config)[1]
        init, _ = loop.make_train(agent, env, spec, cfg)
        mesh, shardings = placement(agent, env, spec, cfg, hp, note)
        with warm.compiling():
            init_compiled = compile_init(init, keys, hps, shardings)
            runner = init_compiled(keys, hps)
            compiled, evaluator = _programs(agent, env, spec, cfg, runner, mesh, shardings)
            text = _members_text(cfg, mesh)
            if warm.key is not None:
                evaluator = warm.store_programs(init_compiled, compiled, evaluator, runner, cfg,
                                                spec, text, note)
        return runner, compiled, evaluator, text, "compiled"

    if warm.meta is None:
        return _session(agent, cfg, cold, run_dir, progress, resolved)
    return _session(agent, cfg, warm.prepare(keys, hps, cold), run_dir, progress, resolved,
                    wait_text="loading the stored compiled programs (warm start) ...")


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
    resolved = checkpoint.read_config(run_dir)
    agent_name, env_name, cfg, agent_config, hp = checkpoint.parse_config(resolved)
    saved = checkpoint.existing_steps(run_dir)
    if not saved:
        raise checkpoint.CheckpointError(
            f"no checkpoint in {run_dir!r}: the run stopped before its first checkpoint, so "
            "there is nothing to resume: start it again.")
    cfg, resolved = restore.train_on(resolved, cfg, total_env_steps, max_train_seconds)
    if saved[-1] >= cfg.num_chunks:
        raise checkpoint.CheckpointError(
            f"the run in {run_dir!r} already finished (chunk {saved[-1]} of {cfg.num_chunks}); "
            f"train it on with `jaxrl train --resume {run_dir} --total-env-steps N`, N above "
            f"{cfg.real_total_env_steps:,}.")
    warm = restore.stored_programs(programs, agent_name, env_name, cfg, agent_config, hp)
    notes = []  # said once the logger is up
    stored = restore.load_stored(warm, notes.append)
    if stored is not None:
        agent, env, spec = build_agent(agent_name, cfg, agent_config, warm.meta["spec"]), None, None
    else:
        agent, env, spec = build(agent_name, env_name, cfg, agent_config)
    hp = hp or agent.default_hp()
    keys, hps = seed_keys(cfg), stack_hp(hp, cfg.num_seeds)
    if stored is not None:
        mesh, (abstract, fresh, shardings) = None, restore.stored_target(stored[0], keys, hps)
        read = functools.partial(restore.read_runner, agent=agent, abstract=abstract, fresh=fresh,
                                 shardings=shardings)
    else:
        mesh, shardings = placement(agent, env, spec, cfg, hp, notes.append)
        read = functools.partial(restore.read_built, agent=agent, env=env, spec=spec,
                                 cfg=cfg, hp=hp, shardings=shardings)
    step, meta, state = restore.newest_readable(run_dir, read, notes.append)
    records = list(meta["records"])[:step]
    if distributed.is_primary():
        _rewrite_metrics(run_dir, records)
        if total_env_steps is not None or max_train_seconds is not None:
            checkpoint.write_config(run_dir, resolved)

    def prepare(note):
        for text in notes:
            note(text)
        if stored is not None:
            return state, stored[1], stored[2], warm.meta["info"]["members"], \
                "loaded the compiled programs"
        with warm.compiling():
            compiled, evaluator = _programs(agent, env, spec, cfg, state, mesh, shardings)
            text = _members_text(cfg, mesh)
            if warm.key is not None:
                init, _ = loop.make_train(agent, env, spec, cfg)
                evaluator = warm.store_programs(compile_init(init, keys, hps, shardings),
                                                compiled, evaluator, state, cfg, spec, text, note)
        return state, compiled, evaluator, text, "compiled"

    return _session(agent, cfg, prepare, run_dir, progress, resolved, records,
                    wait_text="loading the stored compiled programs (warm start) ..."
                    if stored is not None else "compiling ...")


def _programs(agent: Agent, env, spec, cfg, runner, mesh, shardings):
    """(compiled chunk, jitted evaluator or None) of a placed run (`placement`)."""
    compiled = compile_chunk(agent, env, spec, cfg, runner, mesh, shardings)
    evaluator = make_evaluator(agent, env, spec, cfg, mesh=mesh) if cfg.num_eval_envs else None
    return compiled, evaluator


def _rewrite_metrics(run_dir: str, records: list[dict]) -> None:
    """Keeps the first `len(records)` lines of metrics.jsonl (atomically)."""
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.exists(path) or len(read_jsonl(path)) == len(records):
        return
    with open(path) as f:
        lines = [line for line in f if line.strip()][: len(records)]
    with open(path + ".tmp", "w") as f:
        f.writelines(lines)
    os.replace(path + ".tmp", path)


def _session(agent: Agent, cfg, prepare, run_dir, progress, resolved, records=(),
             wait_text: str = "compiling ..."):
    """Compiles (`prepare(note) -> (runner, chunk, evaluator, members text, verb)`, saying
    `wait_text` first), runs the chunks after `len(records)`, saves final params and summary."""
    saver = (checkpoint.Checkpointer(run_dir, cfg.keep_checkpoints, cfg.checkpoint_replay,
                                     agent=agent) if run_dir else None)
    primary = distributed.is_primary()  # process 0 writes logs; every process checkpoints
    logger = Logger(run_dir if primary else None, cfg.real_total_env_steps * cfg.num_seeds,
                    progress and primary, **_logger_options(cfg, run_dir, resolved))
    try:
        with watchdog.Watchdog(cfg.watchdog_seconds, run_dir) as dog:
            dog.beat("compiling the training program")
            t0 = time.time()
            logger.message(wait_text)
            runner, compiled, evaluator, members, verb = prepare(logger.message)
            compile_s = time.time() - t0
            layout = layout_name(agent, cfg)
            logger.message(
                f"{verb} in {compile_s:.1f} s; {cfg.real_total_env_steps:,} env steps "
                f"per seed x {cfg.num_seeds} seed{'' if cfg.num_seeds == 1 else 's'}; "
                f"layout {layout}{members}")
            dog.beat(f"chunk {len(records) + 1}")
            with guards.StopOnSignal() as stop:
                runner, records, train_s = _run_chunks(
                    compiled, evaluator, runner, cfg, logger, saver, list(records), stop,
                    resolved, agent.params_of, layout, dog)
    except BaseException:
        _close(logger, saver, failing=True)
        raise
    _close(logger, saver, failing=False)
    steps = records[-1]["env_steps"] if records else 0  # fewer under max_train_seconds
    if run_dir:
        _write_final(run_dir, agent.params_of(runner.agent_state), primary, {
            "compile_seconds": compile_s, "train_seconds": train_s, "env_steps": steps,
            "layout": layout, "final": records[-1] if records else {}})
    return RunResult(runner, records, compile_s, train_s, steps, run_dir)


def _members_text(cfg: loop.TrainConfig, mesh) -> str:
    """`, seeds on D devices` when the member axis is placed on a `seed` mesh, else empty."""
    if cfg.num_devices > 1 or mesh is None or cfg.num_seeds == 1:
        return ""
    return f", seeds on {len(mesh.devices.flat)} {jax.default_backend()} devices"


def _logger_options(cfg, run_dir, resolved) -> dict:
    """Keyword arguments of `Logger` for the extra sinks `cfg.logger` names."""
    if cfg.logger != "wandb" or not run_dir:
        return {}
    name = os.path.basename(os.path.abspath(run_dir))
    return {"wandb": {"name": name, "group": (resolved or {}).get("sweep"),
                      "config": resolved or {}, "project": None}}


def _write_final(run_dir: str, params, primary: bool, summary: dict) -> None:
    """final_params (every process takes part in the orbax write) and summary.json."""
    save_params(os.path.join(run_dir, "final_params"), parallel.fetch(params))
    if primary:
        with open(os.path.join(run_dir, "summary.json"), "w") as f:
            json.dump(summary, f, indent=2)


def layout_name(agent: Agent, cfg: loop.TrainConfig | None = None) -> str:
    """How the run is laid out over devices, as every record and summary names it: `single`
    (one device per seed), `data:D` (`TrainConfig.num_devices`, or an agent's own `data`
    layout) or `role:D` (`jaxrl.engine.layouts`, D devices)."""
    if cfg is not None and cfg.num_devices > 1:
        return f"data:{cfg.num_devices}"
    kind, devices = agent.layout
    return kind if kind == "single" else f"{kind}:{devices}"


def _close(logger, saver, failing: bool) -> None:
    """Closes the logger and waits for pending checkpoint writes; a write error is raised
    unless another exception is already on its way out (`failing`)."""
    logger.close()
    if saver is not None:
        _close_saver(saver, failing)


def _close_saver(saver, failing: bool) -> None:
    try:
        saver.wait()
    except checkpoint.CheckpointError:
        if not failing:
            raise
    finally:
        saver.close()


def _run_chunks(
    compiled, evaluator, runner, cfg, logger, saver=None, records=None, stop=None, resolved=None,
    params_of=lambda agent_state: agent_state.params, layout: str = "single", dog=None,
):
    """Runs chunks `len(records) + 1 .. num_chunks`; returns (runner, records, train seconds).

    The eval key of chunk i is `assemble.eval_key` (a typed key of the same bits when the
    run's keys are typed), so a resumed run evaluates as the uninterrupted one did.
    Every record names the `layout` (`layout_name`) that produced its numbers.
    """
    records = list(records or [])
    train_s = float(records[-1]["wall_time"]) if records else 0.0
    steps_per_chunk = cfg.iterations_per_chunk * cfg.env_steps_per_iteration * cfg.num_seeds
    for i in range(len(records), cfg.num_chunks):
        t = time.time()
        new, metrics = compiled(runner)
        metrics = parallel.fetch(metrics)
        dt = time.time() - t
        guards.check_finite(metrics, params_of(new.agent_state), i + 1, cfg, steps_per_chunk,
                            saver)
        runner, train_s = new, train_s + dt
        rec = {
            "chunk": i + 1,
            "env_steps": steps_per_chunk * (i + 1),
            "wall_time": train_s,
            "perf/sps": steps_per_chunk / dt,
            "layout": layout,
        }
        rec.update({k: float(np.mean(v)) for k, v in metrics.items()})
        out_of_time = cfg.max_train_seconds is not None and train_s >= cfg.max_train_seconds
        last = i + 1 == cfg.num_chunks or out_of_time
        if evaluator is not None and ((i + 1) % cfg.eval_every == 0 or last):
            ev = parallel.fetch(evaluator(runner.agent_state, eval_key(runner.key, cfg.seed, i)))
            rec.update({k: float(np.mean(v)) for k, v in ev.items()})
            rec["eval/episode_return_per_seed"] = [float(x) for x in ev["eval/episode_return"]]
        logger.log(rec)
        records.append(rec)
        interrupted = stop is not None and stop.signum is not None and not last
        if saver and ((i + 1) % cfg.checkpoint_every == 0 or last or interrupted):
            saver.save(i + 1, runner, records, resolved or {})
        if dog is not None:
            dog.beat(f"chunk {i + 2}")
        if interrupted:
            raise guards.interrupted(saver, i + 1, cfg, stop.signum)
        if out_of_time:
            logger.message(f"max_train_seconds ({cfg.max_train_seconds:g} s) reached after "
                           f"chunk {i + 1} of {cfg.num_chunks}.")
            break
    return runner, records, train_s


def save_params(path: str, params) -> None:
    """Saves a params pytree with orbax (overwrites `path`)."""
    import orbax.checkpoint as ocp

    ckpt = ocp.StandardCheckpointer()
    ckpt.save(os.path.abspath(path), jax.device_get(params), force=True)
    ckpt.wait_until_finished()


def load_params(path: str):
    """Loads a params pytree saved by `save_params`."""
    import orbax.checkpoint as ocp

    return ocp.StandardCheckpointer().restore(os.path.abspath(path))
