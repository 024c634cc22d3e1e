"""`jaxrl` command line: `jaxrl train | eval | export | plot | render | list`.

Built with tyro. `jaxrl train --help` lists every field with its docstring; its defaults are the
chosen preset's values (`--preset NAME` is read first). Train fields are top-level flags
(`--num-envs`), agent fields carry the agent's prefix (`--ppo.learning-rate`). MJX and Warp
print module-load and solver lines on some backends; set `JAXRL_VERBOSE=1` to see them.
"""

from __future__ import annotations

import dataclasses
import datetime
import difflib
import os
import sys
import warnings
from typing import Annotated, Literal

import tyro

DEFAULT_PRESET = "ppo-dmc-cpu"


@dataclasses.dataclass(frozen=True)
class CommonArgs:
    preset: str = DEFAULT_PRESET
    """Named recipe from `jaxrl.configs` (`jaxrl list presets`); other flags override it."""
    agent: str = "ppo"
    """Agent name (`jaxrl list agents`)."""
    env: str = "CartpoleBalance"
    """Env name (`jaxrl list envs`)."""
    run_dir: str | None = None
    """Output folder (config, metrics.jsonl, TensorBoard, final params); default runs/<name>."""
    resume: str | None = None
    """Continue the run in this folder from its latest checkpoint, with its saved config.json
    (other flags may only repeat the saved values)."""
    progress: bool = True
    """Show the progress bar."""


def _registry():
    """The agent registry (`jaxrl.engine.contract`) with the built-in agents registered."""
    import jaxrl.agents  # noqa: F401  (registers them)
    from jaxrl.engine import contract

    return contract


def _args_type():
    """TrainArgs: CommonArgs + `train: TrainConfig` (flags without prefix) + one group per agent."""
    agent_lib = _registry()
    from jaxrl.engine.loop import TrainConfig

    fields = [("train", Annotated[TrainConfig, tyro.conf.OmitArgPrefixes],
               dataclasses.field(default_factory=TrainConfig))]
    for name in agent_lib.list_agents():
        cls = agent_lib.lookup(name)[1]
        fields.append((name.replace("-", "_"), cls, dataclasses.field(default_factory=cls)))
    return dataclasses.make_dataclass("TrainArgs", fields, bases=(CommonArgs,), frozen=True)


def _preset_name(argv: list[str]) -> str:
    for i, arg in enumerate(argv):
        if arg == "--preset" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--preset="):
            return arg.split("=", 1)[1]
    return DEFAULT_PRESET


def defaults_from_preset(name: str):
    """A TrainArgs instance holding the preset's values (raises on an unknown preset)."""
    from jaxrl import configs
    agent_lib = _registry()

    preset = configs.get(name)
    cls = _args_type()
    agent_cfg = agent_lib.lookup(preset.agent)[1](**dict(preset.agent_overrides))
    return cls(preset=name, agent=preset.agent, env=preset.env, train=preset.train,
               **{preset.agent.replace("-", "_"): agent_cfg})


def resolve(argv: list[str]):
    """Parses `jaxrl train` arguments into (args, agent name, env name, TrainConfig, agent config).

    Raises:
        ValueError: unknown preset/agent/env, or invalid sizes and budgets (before compiling).
        SystemExit: unknown flags or unparsable values (tyro's message).
    """
    agent_lib = _registry()
    from jaxrl.envs import registry

    defaults = defaults_from_preset(_preset_name(argv))
    args = tyro.cli(type(defaults), default=defaults, args=argv, prog="jaxrl train",
                    description="Train an agent on an env (default: PPO on CartpoleBalance, "
                    "CPU preset).")
    agent_lib.lookup(args.agent)
    registry.check_env_name(args.env)
    args.train.validate()
    return args, args.agent, args.env, args.train, getattr(args, args.agent.replace("-", "_"))


def _agent_names() -> tuple[str, ...]:
    agent_lib = _registry()

    return agent_lib.list_agents()


def _flag_value(argv: list[str], flag: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def resolve_resume(argv: list[str]) -> tuple[str, bool]:
    """Parses `jaxrl train --resume RUN_DIR [...]` into (run dir, progress).

    The run continues with its saved config.json; other flags may only repeat saved values.

    Raises:
        ValueError: missing run dir or config (`checkpoint.CheckpointError`), or a flag that
            differs from the saved config (`--agent sac` on a PPO run), before compiling.
        SystemExit: unknown flags (tyro's message).
    """
    from jaxrl.run import checkpoint

    run_dir = _flag_value(argv, "--resume")
    resolved = checkpoint.read_config(run_dir)
    agent_name, env_name, cfg, agent_cfg, _ = checkpoint.parse_config(resolved)
    group = agent_name.replace("-", "_")
    saved = _args_type()(preset=resolved.get("preset", DEFAULT_PRESET), agent=agent_name,
                         env=env_name, run_dir=run_dir, resume=run_dir, train=cfg,
                         **{group: agent_cfg})
    args = tyro.cli(type(saved), default=saved, args=argv, prog="jaxrl train")
    diffs = [f"--{k.replace('_', '-')} {getattr(args, k)} (saved: {getattr(saved, k)})"
             for k in ("preset", "agent", "env", "run_dir")
             if getattr(args, k) != getattr(saved, k)]
    groups = [("", "train")] + [(f"{n}.", n.replace("-", "_")) for n in _agent_names()]
    for prefix, attr in groups:
        new, old = getattr(args, attr), getattr(saved, attr)
        diffs += [f"--{prefix}{f.name.replace('_', '-')} {getattr(new, f.name)} (saved: "
                  f"{getattr(old, f.name)})" for f in dataclasses.fields(old)
                  if getattr(new, f.name) != getattr(old, f.name)]
    if diffs:
        raise ValueError(f"--resume continues {run_dir} with its saved config.json, but "
                         f"{'; '.join(diffs)}. Drop these flags, or start a new run in another "
                         "--run-dir.")
    return run_dir, args.progress


def train(argv: list[str]) -> None:
    """`jaxrl train ...` (or `--resume RUN_DIR`): resolve, train, print a one-line summary."""
    from jaxrl.envs import EnvAssetError
    from jaxrl.run import runner

    try:
        if _flag_value(argv, "--resume") is not None:
            run_dir, progress = resolve_resume(argv)
            result = runner.resume(run_dir, progress)
        else:
            args, agent_name, env_name, cfg, agent_cfg = resolve(argv)
            stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
            run_dir = args.run_dir or os.path.join("runs", f"{agent_name}-{env_name}-{stamp}")
            if os.path.exists(run_dir) and not os.path.isdir(run_dir):
                raise ValueError(f"--run-dir {run_dir!r} is a file, not a folder.")
            result = runner.train(agent_name, env_name, cfg, agent_cfg, run_dir, args.progress,
                                  resolved={"preset": args.preset})
    except (ValueError, EnvAssetError) as err:
        sys.exit(f"error: {err}")
    except runner.TrainingInterrupted as err:
        print(str(err), file=sys.stderr)
        sys.exit(128 + err.signum)
    except KeyboardInterrupt:
        print("interrupted (nothing saved after the latest checkpoint)", file=sys.stderr)
        sys.exit(130)
    final = result.records[-1]
    ret = final.get("eval/episode_return", final.get("episode/return", float("nan")))
    print(f"done: {result.env_steps:,} env steps in {result.train_seconds:.1f} s training "
          f"(+{result.compile_seconds:.1f} s compile), "
          f"{result.env_steps / max(result.train_seconds, 1e-9):,.0f} SPS; "
          f"final eval return {ret:.1f}{_success_text(final)}; run dir {run_dir}")


def _success_text(record: dict) -> str:
    """`, success rate R (S steps near goal)` for goal-conditioned runs, else empty."""
    if "eval/episode_success_any" not in record:
        return ""
    return (f", success rate {record['eval/episode_success_any']:.2f} "
            f"({record['eval/episode_success']:.1f} steps near goal)")


def list_cmd(what: Annotated[Literal["envs", "agents", "presets"], tyro.conf.Positional]) -> None:
    """List registered envs, agents or presets."""
    if what == "envs":
        from jaxrl.envs import list_envs, registry

        missing = registry.unavailable()
        for source, names in list_envs().items():
            marked = [f"{n}*" if n in missing else n for n in names]
            print(f"{source} ({len(names)}): {', '.join(marked)}")
        if missing:
            print(f"* unavailable here ({len(missing)}):")
            for name, reason in missing.items():
                print(f"  {name}: {reason}")
    elif what == "agents":
        list_agents = _registry().list_agents

        print("\n".join(list_agents()))
    else:
        from jaxrl import configs

        for p in configs.PRESETS.values():
            print(f"{p.name:20s} agent={p.agent:5s} env={p.env:23s} "
                  f"num_envs={p.train.num_envs:<5d} {p.description}")


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
    policy: Literal["jax", "onnx"] = "jax"
    """`jax`: the checkpoint's policy. `onnx`: drive the env with RUN_DIR/export/policy.onnx
    (from `jaxrl export RUN_DIR`) in onnxruntime and compare return and per-step actions with
    the JAX policy of the exported seed and chunk, from the same initial states."""


def eval_cmd(argv: list[str]) -> None:
    """`jaxrl eval RUN_DIR`: deterministic-policy return, length and success rate."""
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
        ev = runner.evaluate_run(loaded, args.episodes, args.seed_index, args.seed)
    except (ValueError, EnvAssetError) as err:
        sys.exit(f"error: {err}")
    seeds = [args.seed_index] if args.seed_index is not None else range(cfg.num_seeds)
    print(f"{loaded.agent_name} on {loaded.env_name}, checkpoint of chunk {loaded.chunk} of "
          f"{cfg.num_chunks} in {args.run_dir}; deterministic policy, {args.episodes} episodes "
          "per seed")
    for row, s in enumerate(seeds):
        print(f"seed {s}: " + _eval_line(runner.summarize_eval(ev, row)))
    print("all:    " + _eval_line(runner.summarize_eval(ev)))


def _eval_onnx(args: EvalArgs) -> None:
    """`jaxrl eval RUN_DIR --policy onnx`: closed-loop ONNX vs JAX (`jaxrl.deploy.closed_loop`)."""
    from jaxrl.deploy import closed_loop
    from jaxrl.envs import EnvAssetError

    try:
        if args.episodes <= 0:
            raise ValueError(f"--episodes must be positive, got {args.episodes}.")
        res, loaded, path, meta = closed_loop.closed_loop_run(
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
    from jaxrl.deploy import export
    from jaxrl.envs import EnvAssetError

    args = tyro.cli(ExportArgs, args=argv, prog="jaxrl export", description=COMMANDS["export"])
    try:
        if args.format not in export.FORMATS:
            raise ValueError(f"unknown format {args.format!r}; choose one of "
                             f"{', '.join(export.FORMATS)}.")
        result = export.export_run(args.run_dir, args.format, args.out, args.seed_index,
                                   args.chunk, args.batch_size)
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
          f"{meta['parity']['num_observations']} recorded observations "
          f"(tolerance {meta['parity']['tolerance']:g})")


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
        result = render.render_run(args.run_dir, args.out, args.steps, args.seed_index,
                                   args.chunk, width=args.width, height=args.height,
                                   camera=args.camera, seed=args.seed)
    except (ValueError, EnvAssetError, render.RenderError) as err:
        sys.exit(f"error: {err}")
    print(f"wrote {result.path}: {result.num_frames} frames at {result.fps:g} fps "
          f"(OpenGL backend {result.gl_backend})")


COMMANDS = {"train": "Train an agent on an env (default: PPO on CartpoleBalance, CPU preset).",
            "eval": "Evaluate a run's latest checkpoint with the deterministic policy.",
            "export": "Export a run's policy to ONNX or jax.export for deployment.",
            "plot": "Plot learning curves of one or more runs to a PNG.",
            "render": "Render a video of a run's deterministic policy.",
            "list": "List registered envs, agents or presets."}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not os.environ.get("JAXRL_VERBOSE"):
        _quiet()
    if argv and argv[0] == "train":
        return train(argv[1:])
    if argv and argv[0] == "eval":
        return eval_cmd(argv[1:])
    if argv and argv[0] in ("export", "plot", "render"):
        return {"export": export_cmd, "plot": plot_cmd, "render": render_cmd}[argv[0]](argv[1:])
    if argv and argv[0] == "list":
        try:
            return tyro.cli(list_cmd, args=argv[1:], prog="jaxrl list")
        except BrokenPipeError:  # `jaxrl list envs | head`
            sys.stderr.close()
            return None
    if argv and argv[0] not in ("-h", "--help"):
        close = difflib.get_close_matches(argv[0], list(COMMANDS), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        sys.exit(f"error: unknown command {argv[0]!r}.{hint} Commands: {', '.join(COMMANDS)}.")
    print("usage: jaxrl COMMAND [--help]\n")
    for name, text in COMMANDS.items():
        print(f"  {name:8s} {text}")


def _quiet() -> None:
    """Silences library chatter (Warp module loads, absl) unless JAXRL_VERBOSE is set."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    warnings.filterwarnings("ignore", message="Brax System, piplines")
    try:
        import warp as wp

        wp.config.quiet = True
    except Exception:  # noqa: BLE001  (warp ships with mujoco-mjx; tolerate its absence)
        pass


if __name__ == "__main__":
    main()
