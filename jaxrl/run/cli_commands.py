"""`jaxrl eval | export | plot | render`: the commands that read a finished (or running) run dir.

Each parses its own dataclass with tyro (`jaxrl eval --help`); errors a user can fix are one
`error: ...` line and exit status 1.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Annotated, Literal

import tyro

COMMANDS = {"train": "Train an agent on an env (default: PPO on CartpoleBalance, CPU preset).",
            "eval": "Evaluate a run's latest checkpoint (the policy's mode, or sampled actions).",
            "export": "Export a run's policy to ONNX or jax.export for deployment.",
            "plot": "Plot learning curves of one or more runs to a PNG.",
            "render": "Render a video of a run's deterministic policy.",
            "sweep": "Train a grid or random search of hyperparameters x seeds as one program.",
            "list": "List registered envs, agents or presets."}

@dataclasses.dataclass(frozen=True)
class EvalArgs:
    run_dir: Annotated[str, tyro.conf.Positional]
    """Run folder written by `jaxrl train`."""
    episodes: int = 128
    """Episodes per seed (one per parallel eval env)."""
    env: str | None = None
    """Evaluate on this env instead of the training env (same observation and action sizes)."""
    seed_index: int | None = None
    """Evaluate only this seed of the run (0-based); default: every seed."""
    chunk: int | None = None
    """Checkpoint to load (chunks completed); default: the latest (a finished run's final one)."""
    seed: int = 0
    """PRNG seed of the evaluation episodes (initial states)."""
    actions: Literal["mode", "sample"] | None = None
    """`mode`: the policy's deterministic action (e.g. `tanh(mu)`); `sample`: actions drawn
    from the policy, as in training; default: the run's `deterministic_eval` (mode unless the
    run set it to False)."""
    policy: Literal["jax", "onnx"] = "jax"
    """`jax`: the checkpoint's policy. `onnx`: drive the env with RUN_DIR/export/policy.onnx
    (from `jaxrl export RUN_DIR`) in onnxruntime and compare return and per-step actions with
    the JAX policy of the exported seed and chunk, from the same initial states."""


def eval_cmd(argv: list[str]) -> None:
    """`jaxrl eval RUN_DIR`: the policy's return, length and success rate (its mode unless
    `--actions sample` or the run's `deterministic_eval` says otherwise)."""
    from jaxrl.envs import EnvAssetError
    from jaxrl.run import checkpoint, runner

    args = tyro.cli(EvalArgs, args=argv, prog="jaxrl eval", description=COMMANDS["eval"])
    if args.policy == "onnx":
        return _eval_onnx(args)
    try:
        _, _, cfg, _, _ = checkpoint.parse_config(checkpoint.read_config(args.run_dir))
        if args.episodes <= 0:
            raise ValueError(f"--episodes must be positive, got {args.episodes}.")
        if args.seed_index is not None and not 0 <= args.seed_index < cfg.num_seeds:
            raise ValueError(f"--seed-index {args.seed_index} is out of range: the run has "
                             f"{cfg.num_seeds} seed(s) (0..{cfg.num_seeds - 1}).")
        loaded = checkpoint.load_run(args.run_dir, args.chunk, args.env)
        deterministic = cfg.deterministic_eval if args.actions is None else args.actions == "mode"
        ev = runner.evaluate_run(loaded, args.episodes, args.seed_index, args.seed,
                                 deterministic=deterministic)
    except (ValueError, EnvAssetError) as err:
        sys.exit(f"error: {err}")
    seeds = [args.seed_index] if args.seed_index is not None else range(cfg.num_seeds)
    mode = "deterministic policy" if deterministic else "sampled actions"
    print(f"{loaded.agent_name} on {loaded.env_name}, checkpoint of chunk {loaded.chunk} of "
          f"{cfg.num_chunks} in {args.run_dir}; {mode}, {args.episodes} episodes per seed")
    for row, s in enumerate(seeds):
        print(f"seed {s}: " + _eval_line(runner.summarize_eval(ev, row)))
    print("all:    " + _eval_line(runner.summarize_eval(ev)))


def _eval_onnx(args: EvalArgs) -> None:
    """`jaxrl eval RUN_DIR --policy onnx`: closed-loop ONNX vs JAX (`jaxrl.deploy.closed_loop`)."""
    from jaxrl import api
    from jaxrl.deploy import closed_loop
    from jaxrl.envs import EnvAssetError

    try:
        if args.episodes <= 0:
            raise ValueError(f"--episodes must be positive, got {args.episodes}.")
        res, loaded, path, meta = api.closed_loop(
            args.run_dir, args.episodes, args.seed, args.env, args.seed_index, args.chunk)
    except (ValueError, ImportError, EnvAssetError) as err:
        sys.exit(f"error: {err}")
    print("\n".join(closed_loop.report(res, loaded, path, meta, args.seed)))


def _eval_line(summary: dict) -> str:
    line = (f"return {summary['return_mean']:.3f} +- {summary['return_std']:.3f} (mean +- std "
            f"over {summary['num_episodes']:.0f} episodes), length {summary['length_mean']:.1f}")
    if "success_rate" in summary:
        line += f", success rate {summary['success_rate']:.3f}"
    if "steps_near_goal" in summary:
        line += f", {summary['steps_near_goal']:.1f} steps near goal"
    return line


@dataclasses.dataclass(frozen=True)
class ExportArgs:
    run_dir: Annotated[str, tyro.conf.Positional]
    """Run folder written by `jaxrl train`."""
    format: str = "onnx"
    """`onnx` (onnxruntime-checked ONNX model) or `jax` (serialized StableHLO, `jax.export`)."""
    out: str | None = None
    """Output file; default RUN_DIR/export/policy.onnx (or policy.jaxexport). Sidecar: OUT.json."""
    seed_index: int = 0
    """Which seed of the run to export (0-based)."""
    chunk: int | None = None
    """Checkpoint to load (chunks completed); default: the latest."""
    batch_size: int = 1
    """Fixed leading dimension of the model's inputs and output."""


def export_cmd(argv: list[str]) -> None:
    """`jaxrl export RUN_DIR`: deployable policy + JSON sidecar, parity-checked."""
    from jaxrl import api
    from jaxrl.deploy import export
    from jaxrl.envs import EnvAssetError

    args = tyro.cli(ExportArgs, args=argv, prog="jaxrl export", description=COMMANDS["export"])
    try:
        if args.format not in export.FORMATS:
            raise ValueError(f"unknown format {args.format!r}; choose one of "
                             f"{', '.join(export.FORMATS)}.")
        result = api.export(args.run_dir, args.format, args.out, args.seed_index, args.chunk,
                            args.batch_size)
    except (ValueError, ImportError, NotImplementedError, EnvAssetError,
            export.ParityError) as err:  # NotImplementedError: onnx_convert.Unsupported...
        sys.exit(f"error: {err}")
    meta = result.metadata
    hz = meta["control_frequency_hz"]
    print(f"wrote {result.path} and {result.sidecar_path}: {meta['agent']} on {meta['env']} "
          f"(chunk {meta['chunk']}, seed index {meta['seed_index']}); inputs "
          + ", ".join(f"{i['name']} {i['shape']}" for i in meta["inputs"])
          + f" -> action {meta['output']['shape']}"
          + (f" at {hz:g} Hz" if hz else "")
          + f"; parity max abs error {result.max_abs_error:.3g} over "
          f"{meta['parity']['num_observations']} recorded observations and "
          f"{meta['parity']['far_max_abs_error']:.3g} over "
          f"{meta['parity']['far_num_observations']} far ones (x10 to x1e6) "
          f"(tolerance {meta['parity']['tolerance']:g}, far "
          f"{meta['parity']['far_tolerance']:g})")


@dataclasses.dataclass(frozen=True)
class PlotArgs:
    run_dirs: Annotated[tuple[str, ...], tyro.conf.Positional]
    """One or more run folders; one curve each."""
    out: str | None = None
    """PNG to write; default RUN_DIR/learning_curves.png for one run, ./learning_curves.png else."""
    metric: str = "eval/episode_return"
    """Metric to draw (any key of metrics.jsonl, e.g. `episode/return`)."""


def plot_cmd(argv: list[str]) -> None:
    """`jaxrl plot RUN_DIR...`: learning curves vs env steps and wall time."""
    from jaxrl.run import plotting

    args = tyro.cli(PlotArgs, args=argv, prog="jaxrl plot", description=COMMANDS["plot"])
    out = args.out or os.path.join(args.run_dirs[0] if len(args.run_dirs) == 1 else ".",
                                   "learning_curves.png")
    try:
        path = plotting.plot_runs(list(args.run_dirs), out, args.metric)
    except plotting.PlotError as err:
        sys.exit(f"error: {err}")
    print(f"wrote {path}: {args.metric} of {len(args.run_dirs)} run(s)")


@dataclasses.dataclass(frozen=True)
class RenderArgs:
    run_dir: Annotated[str, tyro.conf.Positional]
    """Run folder written by `jaxrl train` (a MuJoCo env: Playground or Brax)."""
    out: str | None = None
    """Video file, .mp4 or .gif; default RUN_DIR/videos/rollout.mp4."""
    steps: int | None = None
    """Policy steps to roll out; default: the episode length, at most 1000."""
    seed_index: int = 0
    """Which seed of the run to render (0-based)."""
    chunk: int | None = None
    """Checkpoint to load (chunks completed); default: the latest."""
    width: int = 320
    """Frame width in pixels."""
    height: int = 240
    """Frame height in pixels."""
    camera: str | None = None
    """MuJoCo camera name; default: the model's first camera (or the free camera)."""
    seed: int = 0
    """PRNG seed of the initial state."""


def render_cmd(argv: list[str]) -> None:
    """`jaxrl render RUN_DIR`: video of a deterministic rollout (headless OpenGL)."""
    args = tyro.cli(RenderArgs, args=argv, prog="jaxrl render", description=COMMANDS["render"])
    from jaxrl.deploy import render  # neither imports mujoco: `setup_gl` sets MUJOCO_GL first
    from jaxrl.envs import EnvAssetError

    try:
        if args.steps is not None and args.steps <= 0:
            raise ValueError(f"--steps must be positive, got {args.steps}.")
        render.setup_gl()
        from jaxrl import api  # after setup_gl: the API imports the env registry

        result = api.render(args.run_dir, args.out, args.steps, args.seed_index, args.chunk,
                            width=args.width, height=args.height, camera=args.camera,
                            seed=args.seed)
    except (ValueError, EnvAssetError, render.RenderError) as err:
        sys.exit(f"error: {err}")
    print(f"wrote {result.path}: {result.num_frames} frames at {result.fps:g} fps "
          f"(OpenGL backend {result.gl_backend})")
