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

from jaxrl.run import cli_commands
from jaxrl.run.cli_args import (  # noqa: F401 (the CLI's public names)
    DEFAULT_PRESET,
    CommonArgs,
    agent_names,
    agent_registry,
    args_type,
    check_agent_flags,
    defaults_from_preset,
    flag_value,
    preset_name,
    process_setup,
)
from jaxrl.run.cli_commands import COMMANDS


def resolve(argv: list[str]):
    """Parses `jaxrl train` arguments into (args, agent name, env name, TrainConfig, agent config).

    Raises:
        ValueError: unknown preset/agent/env, or invalid sizes and budgets (before compiling).
        SystemExit: unknown flags or unparsable values (tyro's message).
    """
    agent_lib = agent_registry()
    from jaxrl.envs import registry

    defaults = defaults_from_preset(preset_name(argv))
    args = tyro.cli(type(defaults), default=defaults, args=argv, prog="jaxrl train",
                    description="Train an agent on an env (default: PPO on CartpoleBalance, "
                    "CPU preset).")
    agent_lib.lookup(args.agent)
    check_agent_flags(argv, args.agent)
    registry.check_env_name(args.env)
    args.train.validate()
    args.run.validate()
    return args, args.agent, args.env, args.train, getattr(args, args.agent.replace("-", "_"))


TRAIN_ON_FLAGS = {"train": ("total_env_steps",), "run": ("max_train_seconds",)}


def resolve_resume(argv: list[str]):
    """Parses `jaxrl train --resume RUN_DIR [...]` into (run dir, parsed args, budgets).

    The run continues with its saved config.json; other flags may only repeat saved values,
    except the budgets (`TRAIN_ON_FLAGS`): those that differ come back as `budgets`
    (`runner.resume`'s keyword arguments: train on).

    Raises:
        ValueError: missing run dir or config (`checkpoint.CheckpointError`), or a flag that
            differs from the saved config (`--agent sac` on a PPO run), before compiling.
        SystemExit: unknown flags (tyro's message).
    """
    from jaxrl.run import checkpoint

    run_dir = flag_value(argv, "--resume")
    resolved = checkpoint.read_config(run_dir)
    agent_name, env_name, cfg, agent_cfg, _ = checkpoint.parse_config(resolved)
    run = checkpoint.parse_run(resolved)
    group = agent_name.replace("-", "_")
    saved = args_type()(preset=resolved.get("preset", DEFAULT_PRESET), agent=agent_name,
                         env=env_name, run_dir=run_dir, resume=run_dir, train=cfg, run=run,
                         **{group: agent_cfg})
    args = tyro.cli(type(saved), default=saved, args=argv, prog="jaxrl train")
    diffs = [f"--{k.replace('_', '-')} {getattr(args, k)} (saved: {getattr(saved, k)})"
             for k in ("preset", "agent", "env", "run_dir")
             if getattr(args, k) != getattr(saved, k)]
    groups = [("", "train"), ("", "run")] + [(f"{n}.", n.replace("-", "_"))
                                             for n in agent_names()]
    for prefix, attr in groups:
        new, old = getattr(args, attr), getattr(saved, attr)
        diffs += [f"--{prefix}{f.name.replace('_', '-')} {getattr(new, f.name)} (saved: "
                  f"{getattr(old, f.name)})" for f in dataclasses.fields(old)
                  if getattr(new, f.name) != getattr(old, f.name)
                  and f.name not in TRAIN_ON_FLAGS.get(attr, ())]
    if diffs:
        raise ValueError(f"--resume continues {run_dir} with its saved config.json, but "
                         f"{'; '.join(diffs)}. Drop these flags (only --total-env-steps and "
                         "--max-train-seconds may change on a resume: they train on), or "
                         "start a new run in another --run-dir.")
    budgets = {k: getattr(getattr(args, attr), k) for attr, names in TRAIN_ON_FLAGS.items()
               for k in names
               if getattr(getattr(args, attr), k) != getattr(getattr(saved, attr), k)}
    return run_dir, args, budgets


def train(argv: list[str]) -> None:
    """`jaxrl train ...` (or `--resume RUN_DIR`): resolve, train, print a one-line summary."""
    try:
        process_setup(argv)  # before anything touches a device
    except ValueError as err:
        sys.exit(f"error: {err}")
    from jaxrl.envs import EnvAssetError
    from jaxrl.run import process, runner

    try:
        if flag_value(argv, "--resume") is not None:
            run_dir, args, budgets = resolve_resume(argv)
            process.provide_cpu_devices(args.train.num_seeds)
            result = runner.resume(run_dir, args.progress, programs=process.program_store(),
                                   **budgets)
        else:
            args, agent_name, env_name, cfg, agent_cfg = resolve(argv)
            process.provide_cpu_devices(cfg.num_seeds)
            stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
            run_dir = args.run_dir or os.path.join("runs", f"{agent_name}-{env_name}-{stamp}")
            if os.path.exists(run_dir) and not os.path.isdir(run_dir):
                raise ValueError(f"--run-dir {run_dir!r} is a file, not a folder.")
            result = runner.train(agent_name, env_name, cfg, agent_cfg, run_dir, args.progress,
                                  resolved={"preset": args.preset},
                                  programs=process.program_store(), run=args.run)
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
        registry = agent_registry()
        names = registry.list_agents()
        width = max(map(len, names))
        print("\n".join(f"{n:{width}s}  {registry.describe(n)}" for n in names))
    else:
        from jaxrl import configs

        rows = [(p.name, p.agent, p.env, f"{p.train.num_envs:,}", p.description)
                for p in configs.PRESETS.values()]
        rows.insert(0, ("preset", "agent", "env", "num_envs", "description"))
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        for r in rows:
            print("  ".join(f"{c:>{w}s}" if i == 3 else f"{c:{w}s}"
                            for i, (c, w) in enumerate(zip(r[:4], widths, strict=True)))
                  + "  " + r[4])



def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not os.environ.get("JAXRL_VERBOSE"):
        _quiet()
    if argv and argv[0] == "train":
        return train(argv[1:])
    if argv and argv[0] == "sweep":
        from jaxrl.run import cli_sweep

        return cli_sweep.main(argv[1:])
    if argv and argv[0] == "eval":
        return cli_commands.eval_cmd(argv[1:])
    if argv and argv[0] in ("export", "plot", "render"):
        commands = {"export": cli_commands.export_cmd, "plot": cli_commands.plot_cmd,
                    "render": cli_commands.render_cmd}
        return commands[argv[0]](argv[1:])
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
    """Silences library chatter (absl, Brax's pipeline warning) unless JAXRL_VERBOSE is set.
    Warp is not imported for this: the installed Warp has no quiet switch, and importing it
    (1 s) would delay runs that never use it (a warm start, `jaxrl.run.warm_start`)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    warnings.filterwarnings("ignore", message="Brax System, piplines")


if __name__ == "__main__":
    main()
