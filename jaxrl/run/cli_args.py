"""Argument machinery shared by `jaxrl train` (`cli`) and `jaxrl sweep` (`cli_sweep`): the common
flags, the train argument dataclass built from the agent registry, preset defaults, and the
process setup read from the raw flags before anything touches a device."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Annotated

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
    """Continue the run in this folder from its newest readable checkpoint (a broken one is
    moved aside to checkpoints-broken/), with its saved config.json: other flags may only
    repeat the saved values, except --total-env-steps (above the saved budget: train a finished
    run on) and --max-train-seconds."""
    progress: bool = True
    """Show the progress bar."""
    compile_cache: bool = True
    """JAX's persistent compilation cache (`~/.cache/jaxrl/jax-compilation`, or
    `JAXRL_COMPILE_CACHE`): a second run of the same config skips its compiles; `jaxrl train`
    also stores its compiled programs there (`jaxrl-programs`) and a second run of the same
    program (the run options --seed, --checkpoint-every, --logger, ... may differ) loads them
    without building the env or tracing."""
    coordinator_address: str | None = None
    """Multi-host runs: HOST:PORT of process 0 (with --num-processes and --process-id). Not
    needed under SLURM (`srun`) or MPI, whose environment JAX reads itself."""
    num_processes: int | None = None
    """Multi-host runs: number of processes, each started with the same command."""
    process_id: int | None = None
    """Multi-host runs: this process's index, 0 .. num_processes - 1 (0 writes the logs)."""


def agent_registry():
    """The agent registry (`jaxrl.engine.contract`) with the built-in agents registered."""
    import jaxrl.agents  # noqa: F401  (registers them)
    from jaxrl.engine import contract

    return contract


def args_type():
    """TrainArgs: CommonArgs + `train: TrainConfig` and `run: RunConfig` (flags without prefix)
    + one group per agent."""
    agent_lib = agent_registry()
    from jaxrl.engine.loop import RunConfig, TrainConfig

    fields = [("train", Annotated[TrainConfig, tyro.conf.OmitArgPrefixes],
               dataclasses.field(default_factory=TrainConfig)),
              ("run", Annotated[RunConfig, tyro.conf.OmitArgPrefixes],
               dataclasses.field(default_factory=RunConfig))]
    for name in agent_lib.list_agents():
        cls = agent_lib.lookup(name)[1]
        fields.append((name.replace("-", "_"), cls, dataclasses.field(default_factory=cls)))
    return dataclasses.make_dataclass("TrainArgs", fields, bases=(CommonArgs,), frozen=True)


def preset_name(argv: list[str]) -> str:
    for i, arg in enumerate(argv):
        if arg == "--preset" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--preset="):
            return arg.split("=", 1)[1]
    return DEFAULT_PRESET


def defaults_from_preset(name: str):
    """A TrainArgs instance holding the preset's values (raises on an unknown preset)."""
    from jaxrl import configs

    preset = configs.get(name)
    return args_type()(preset=name, agent=preset.agent, env=preset.env, train=preset.train,
                       run=preset.run, **{preset.agent.replace("-", "_"): preset.agent_config})


def agent_names() -> tuple[str, ...]:
    agent_lib = agent_registry()

    return agent_lib.list_agents()


def check_agent_flags(argv: list[str], agent: str) -> None:
    """Raises ValueError for a flag of another agent's group (`--sac.batch-size` on a PPO
    run), which the parse accepts but the run would ignore."""
    own, names = agent.replace("-", "_"), agent_names()
    for arg in argv:
        flag = arg.split("=", 1)[0]
        group = flag[2:].split(".", 1)[0].replace("-", "_")
        if flag.startswith("--") and "." in flag and group in names and group != own:
            raise ValueError(f"{flag} is an option of agent {group!r}, but this run trains "
                             f"{agent!r}: drop it, or train that agent with --agent {group}.")


def flag_value(argv: list[str], flag: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def process_setup(argv: list[str]) -> None:
    """`jaxrl.run.process.setup` from the process flags of CommonArgs in `argv` (read before the
    full parse, which imports envs that may touch a device; tyro checks them again)."""
    from jaxrl.run import process

    def number(flag):
        value = flag_value(argv, flag)
        if value is not None and not value.lstrip("-").isdigit():
            raise ValueError(f"{flag} must be an integer, got {value!r}.")
        return None if value is None else int(value)

    process.setup(argparse.Namespace(
        coordinator_address=flag_value(argv, "--coordinator-address"),
        num_processes=number("--num-processes"), process_id=number("--process-id"),
        compile_cache="--no-compile-cache" not in argv))


def field_docs(cls: type) -> dict[str, str]:
    """`{field: docstring}` of a dataclass's attribute docstrings (the string literal after a
    field, as tyro shows them), for flags made from its fields under other names."""
    import ast
    import inspect
    import textwrap

    body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body
    out = {}
    for prev, node in zip(body, body[1:], strict=False):
        if (isinstance(prev, ast.AnnAssign) and isinstance(prev.target, ast.Name)
                and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            out[prev.target.id] = " ".join(node.value.value.split())
    return out
