"""`jaxrl` command line: `jaxrl train`, `jaxrl list {envs,agents,presets}`.

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
    progress: bool = True
    """Show the progress bar."""


def _args_type():
    """TrainArgs: CommonArgs + `train: TrainConfig` (flags without prefix) + one group per agent."""
    from jaxrl import agent as agent_lib
    from jaxrl.loop import TrainConfig

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
    from jaxrl import agent as agent_lib
    from jaxrl import configs

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
    from jaxrl import agent as agent_lib
    from jaxrl.envs import registry

    defaults = defaults_from_preset(_preset_name(argv))
    args = tyro.cli(type(defaults), default=defaults, args=argv, prog="jaxrl train",
                    description="Train an agent on an env (default: PPO on CartpoleBalance, "
                    "CPU preset).")
    agent_lib.lookup(args.agent)
    registry.check_env_name(args.env)
    args.train.validate()
    return args, args.agent, args.env, args.train, getattr(args, args.agent.replace("-", "_"))


def train(argv: list[str]) -> None:
    """`jaxrl train ...`: resolve, train, print a one-line summary."""
    from jaxrl import runner
    from jaxrl.envs import EnvAssetError

    try:
        args, agent_name, env_name, cfg, agent_cfg = resolve(argv)
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        run_dir = args.run_dir or os.path.join("runs", f"{agent_name}-{env_name}-{stamp}")
        resolved = {"agent": agent_name, "env": env_name, "preset": args.preset,
                    "train": dataclasses.asdict(cfg),
                    "agent_config": dataclasses.asdict(agent_cfg)}
        result = runner.train(agent_name, env_name, cfg, agent_cfg, run_dir, args.progress,
                              resolved=resolved)
    except (ValueError, EnvAssetError) as err:
        sys.exit(f"error: {err}")
    final = result.records[-1]
    ret = final.get("eval/episode_return", final.get("episode/return", float("nan")))
    print(f"done: {result.env_steps:,} env steps in {result.train_seconds:.1f} s training "
          f"(+{result.compile_seconds:.1f} s compile), "
          f"{result.env_steps / max(result.train_seconds, 1e-9):,.0f} SPS; "
          f"final eval return {ret:.1f}; run dir {run_dir}")


def list_cmd(what: Annotated[Literal["envs", "agents", "presets"], tyro.conf.Positional]) -> None:
    """List registered envs, agents or presets."""
    if what == "envs":
        from jaxrl.envs import list_envs

        for source, names in list_envs().items():
            print(f"{source} ({len(names)}): {', '.join(names)}")
    elif what == "agents":
        from jaxrl.agent import list_agents

        print("\n".join(list_agents()))
    else:
        from jaxrl import configs

        for p in configs.PRESETS.values():
            print(f"{p.name:20s} agent={p.agent:5s} env={p.env:23s} "
                  f"num_envs={p.train.num_envs:<5d} {p.description}")


COMMANDS = {"train": "Train an agent on an env (default: PPO on CartpoleBalance, CPU preset).",
            "list": "List registered envs, agents or presets."}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not os.environ.get("JAXRL_VERBOSE"):
        _quiet()
    if argv and argv[0] == "train":
        return train(argv[1:])
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
