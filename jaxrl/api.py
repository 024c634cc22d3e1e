"""The public Python API, also reachable as `jaxrl.<name>` (imported on first use).

    import jaxrl

    result = jaxrl.train("ppo-toy-cpu", run_dir="runs/toy", total_env_steps=60_000)
    print(jaxrl.evaluate("runs/toy", num_episodes=16)["return_mean"])
    jaxrl.export("runs/toy")  # runs/toy/export/policy.onnx, parity-checked

`train` and `sweep` start from a preset (`jaxrl list presets`) or from `agent=` and `env=`;
keyword overrides name fields of `TrainConfig` or of the agent's config (`learning_rate=...`).
Everything here is what the `jaxrl` command calls; the command adds flags and printing.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Sequence

from jaxrl.agents import (
    CPPOConfig,
    CRLConfig,
    FastDSACConfig,
    FlowSACConfig,
    FPOConfig,
    PolicyFlowConfig,
    PPOConfig,
    PQLConfig,
    SACConfig,
    WarpSACConfig,
)
from jaxrl.configs import Preset
from jaxrl.configs import get as get_preset
from jaxrl.engine.contract import list_agents
from jaxrl.engine.contract import lookup as get_agent
from jaxrl.engine.loop import RunConfig, TrainConfig
from jaxrl.envs import list_envs
from jaxrl.envs import make as make_env
from jaxrl.run.checkpoint import LoadedRun, load_run
from jaxrl.run.pbt import PBTConfig
from jaxrl.run.runner import RunResult
from jaxrl.run.sweep import SweepResult

__all__ = ["train", "resume", "sweep", "load_run", "evaluate", "export", "render", "closed_loop",
           "make_env", "get_agent", "list_agents", "list_envs", "list_presets", "get_preset",
           "resolve", "TrainConfig", "RunConfig", "Preset", "LoadedRun", "RunResult", "SweepResult",
           "PBTConfig", "PPOConfig", "SACConfig", "WarpSACConfig", "FastDSACConfig", "PQLConfig",
           "FPOConfig", "PolicyFlowConfig", "FlowSACConfig", "CRLConfig", "CPPOConfig"]

def list_presets() -> tuple[str, ...]:
    """Names of the registered presets (`jaxrl list presets`)."""
    from jaxrl import configs

    return tuple(configs.PRESETS)


def resolve(preset: str | None = None, agent: str | None = None, env: str | None = None,
            train_config: TrainConfig | None = None, agent_config=None,
            run_config: RunConfig | None = None, **overrides):
    """`(agent, env, TrainConfig, agent config, RunConfig)` from a preset and overrides.

    Args:
        preset: a preset name; None starts from the defaults (then `agent` and `env` are needed).
        agent, env: replace the preset's (the agent config then starts from the new agent's
            defaults).
        train_config: replaces the preset's `TrainConfig` (the program: sizes, budget).
        agent_config: an agent config instance replacing the preset's.
        run_config: replaces the preset's `RunConfig` (host: seed, checkpoints, logger, ...).
        overrides: field name -> value, of `TrainConfig`, `RunConfig` or the agent config.

    Raises:
        ValueError: unknown preset, agent or field (with close matches); a name in two configs.
    """
    p = get_preset(preset) if preset else None
    agent = agent or (p.agent if p else None)
    env = env or (p.env if p else None)
    if agent is None or env is None:
        raise ValueError("name a preset, or both agent= and env=.")
    config_cls = get_agent(agent)[1]
    if agent_config is None:
        same = p is not None and p.agent == agent
        agent_config = p.agent_config if same else config_cls()
    configs = [train_config or (p.train if p else TrainConfig()), agent_config,
               run_config or (p.run if p else RunConfig())]
    names = [{f.name for f in dataclasses.fields(c)} for c in configs]
    known = sorted(set().union(*names))
    for name in overrides:
        owners = [type(c).__name__ for c, n in zip(configs, names, strict=True) if name in n]
        if len(owners) > 1:
            raise ValueError(f"{name!r} is a field of both {owners[0]} and {owners[1]}: pass "
                             "train_config=, agent_config= or run_config= instead.")
        if not owners:
            close = difflib.get_close_matches(name, known, n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise ValueError(f"unknown setting {name!r} (not a field of TrainConfig, RunConfig "
                             f"or {config_cls.__name__}).{hint}")
    cfg, agent_config, run = (dataclasses.replace(c, **{k: v for k, v in overrides.items()
                                                        if k in n})
                              for c, n in zip(configs, names, strict=True))
    return agent, env, cfg, agent_config, run


def train(preset: str | None = None, *, agent: str | None = None, env: str | None = None,
          train_config: TrainConfig | None = None, agent_config=None,
          run_config: RunConfig | None = None, run_dir: str | None = None,
          hp: dict | None = None, progress: bool = False, programs: str | None = None,
          **overrides) -> RunResult:
    """Trains `num_seeds` seeds of one agent on one env as one program (`jaxrl train`).

    Args:
        preset, agent, env, train_config, agent_config, run_config, overrides: as `resolve`.
        run_dir: folder for config.json, metrics, checkpoints and final params (None: keep
            nothing); continue it later with `resume`.
        hp: float hyperparameters overriding the agent config's, the same for every seed.
        progress: a progress bar and console lines.
        programs: a folder of stored compiled programs (`jaxrl.run.warm_start`); None compiles.

    Returns:
        RunResult: final runner, per-chunk metric records, compile and train seconds.
    """
    agent, env, cfg, agent_config, run = resolve(preset, agent, env, train_config, agent_config,
                                                 run_config, **overrides)
    from jaxrl.run import runner

    return runner.train(agent, env, cfg, agent_config, run_dir, progress, hp,
                        resolved={"preset": preset}, programs=programs, run=run)


def resume(run_dir: str, *, total_env_steps: int | None = None,
           max_train_seconds: float | None = None, progress: bool = False,
           programs: str | None = None) -> RunResult:
    """Continues a stopped run exactly from its newest readable checkpoint (`jaxrl train
    --resume`); a larger `total_env_steps` trains a finished run further."""
    from jaxrl.run import runner

    return runner.resume(run_dir, progress, programs, total_env_steps, max_train_seconds)


def sweep(preset: str | None = None, *, sweep_dir: str, grid: dict | None = None,
          random: dict | None = None, num_samples: int = 0, sample_seed: int = 0,
          seeds: Sequence[int] = (0,), agent: str | None = None, env: str | None = None,
          train_config: TrainConfig | None = None, agent_config=None,
          run_config: RunConfig | None = None, progress: bool = False,
          programs: str | None = None, pbt: PBTConfig | bool | None = None,
          **overrides) -> SweepResult:
    """Trains seeds x hyperparameter points as one program (`jaxrl sweep`).

    Args:
        grid: float hyperparameter -> values (`{"learning_rate": [1e-3, 3e-3]}`), crossed.
        random: float hyperparameter -> `("uniform" | "loguniform", low, high)`, drawn
            `num_samples` times (with `sample_seed`) for each grid point.
        seeds: every point runs each seed.
        sweep_dir: output folder (a summary and one run dir per member under `members/`).
        pbt: population-based training over the `grid` / `random` names (`jaxrl sweep
            --pbt`; `True` or `PBTConfig()` for the defaults); member i then trains with seed
            `seeds[0] + i`. The result's `lineage` and `summary["pbt"]` name the best member
            and its schedule.
        Others: as `train`.

    Raises:
        ValueError: a swept name that is not a float hyperparameter of the agent, bad ranges.
    """
    from jaxrl.run import sweep as sweeps
    from jaxrl.run import sweep_spec

    agent, env, cfg, agent_config, run = resolve(preset, agent, env, train_config, agent_config,
                                                 run_config, **overrides)
    pbt = PBTConfig() if pbt is True else (pbt or None)
    hp_fields = get_agent(agent)[0].HP_FIELDS
    fields = tuple(f.name for f in dataclasses.fields(agent_config))
    group = agent.replace("-", "_")
    for name in [*(grid or {}), *(random or {})]:
        sweep_spec.check_name(name, hp_fields, fields, group)
    items = [f"{group}.{k}={','.join(map(str, v))}" for k, v in (grid or {}).items()]
    draws = [f"{group}.{k}={d}:{lo}:{hi}" for k, (d, lo, hi) in (random or {}).items()]
    search = {"grid": sweep_spec.parse_grid(items, group, hp_fields, fields),
              "random": sweep_spec.parse_random(draws, group, hp_fields, fields)}
    points = sweep_spec.points(search["grid"], search["random"], num_samples, sample_seed)
    members = sweep_spec.members(points, list(seeds), distinct_seeds=pbt is not None)
    return sweeps.run_sweep(agent, env, cfg, agent_config, members, sweep_dir, progress,
                            preset, programs, run, search, pbt)


def _loaded(run: str | LoadedRun, chunk: int | None = None) -> LoadedRun:
    return run if isinstance(run, LoadedRun) else load_run(run, chunk)


def evaluate(run: str | LoadedRun, num_episodes: int = 16, *, seed_index: int | None = None,
             seed: int = 0, randomize: bool | None = None, chunk: int | None = None,
             deterministic: bool | None = None) -> dict[str, float]:
    """Policy returns of a run dir (or a `load_run` result), pooled over its seeds or of one
    seed (`jaxrl eval`): `return_mean`, `return_std`, `length_mean`, `num_episodes` (and
    `success_rate`, `steps_near_goal` for goal envs). `deterministic`: the policy's mode
    (True) or sampled actions (False); None follows the run's `deterministic_eval`."""
    from jaxrl.run import evaluation

    ev = evaluation.evaluate_run(_loaded(run, chunk), num_episodes, seed_index, seed, randomize,
                                 deterministic)
    return evaluation.summarize_eval(ev)


def _seed_state(loaded: LoadedRun, seed_index: int):
    """One seed's agent state of a loaded run (`ValueError` outside its seeds)."""
    import jax

    num_seeds = jax.tree.leaves(loaded.runner.agent_state)[0].shape[0]
    if not 0 <= seed_index < num_seeds:
        raise ValueError(f"seed_index {seed_index} outside the run's {num_seeds} seed(s).")
    return jax.tree.map(lambda x: x[seed_index], loaded.runner.agent_state)


def export(run_dir: str, fmt: str = "onnx", out: str | None = None, seed_index: int = 0,
           chunk: int | None = None, batch_size: int = 1):
    """Exports one seed's deterministic policy (`jaxrl export`): ONNX or `jax.export` plus a
    JSON sidecar, parity-checked against the JAX policy (default
    `RUN_DIR/export/policy.onnx`). Returns `jaxrl.deploy.export.ExportResult`.

    Raises:
        CheckpointError: missing run dir or checkpoint. ValueError: unknown format, or
        `seed_index` outside the run's seeds. ParityError: the exported graph disagrees.
    """
    import os

    from jaxrl.deploy import export as exporting

    if fmt not in exporting.FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; choose one of "
                         f"{', '.join(exporting.FORMATS)}.")
    run = load_run(run_dir, chunk)
    state = _seed_state(run, seed_index)
    info = {"source_run_dir": os.path.abspath(run_dir), "agent": run.agent_name,
            "env": run.env_name, "seed_index": seed_index, "seed": run.run.seed + seed_index,
            "chunk": run.chunk}
    return exporting.export_policy(run.agent, state, run.env,
                                   out or exporting.default_out(run_dir, fmt), fmt,
                                   batch_size=batch_size, info=info)


def render(run_dir: str, out: str | None = None, num_steps: int | None = None,
           seed_index: int = 0, chunk: int | None = None, **kwargs):
    """Renders one seed's deterministic rollout to a video (`jaxrl render`; default
    `RUN_DIR/videos/rollout.mp4`); `kwargs` (width, height, camera, seed) go to
    `jaxrl.deploy.render.render_policy`. Returns its `RenderResult`."""
    import os

    from jaxrl.deploy import render as rendering

    rendering.setup_gl()  # before load_run imports mujoco through the env registry
    run = load_run(run_dir, chunk)
    state = _seed_state(run, seed_index)
    out = out or os.path.join(run_dir, "videos", "rollout.mp4")
    return rendering.render_policy(run.agent, state, run.env, out, num_steps, **kwargs)


def closed_loop(run_dir: str, num_episodes: int = 16, seed: int = 0, env: str | None = None,
                seed_index: int | None = None, chunk: int | None = None,
                model: str | None = None, num_steps: int | None = None):
    """The exported ONNX policy and the JAX policy from the same initial states (`jaxrl eval
    --policy onnx`). Returns (ClosedLoopResult, the LoadedRun, the model path, the sidecar).

    Raises:
        NotExportedError: the run was never exported (before anything is built or compiled).
        ValueError: `seed_index` / `chunk` other than the exported ones, bad sizes, missing run.
        ImportError: no onnxruntime.
    """
    from jaxrl.deploy import closed_loop as loop_check
    from jaxrl.run import checkpoint

    checkpoint.read_config(run_dir)  # a missing run dir is named as such, before the export
    path, meta = loop_check.read_export(run_dir, model)
    loop_check.check_selection(meta, seed_index, chunk, run_dir)
    loaded = load_run(run_dir, meta.get("chunk"), env)
    result = loop_check.closed_loop_eval(loaded, path, meta, num_episodes, seed, num_steps)
    return result, loaded, path, meta
