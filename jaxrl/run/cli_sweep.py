"""`jaxrl sweep`: every `jaxrl train` flag, plus the grid / random search and the sweep dir.

    jaxrl sweep --preset ppo-dmc-cpu --grid ppo.learning_rate=1e-4,3e-4,1e-3 --num-seeds 3
    jaxrl sweep --preset sac-dmc-cpu --random sac.learning_rate=loguniform:1e-4:1e-3 \
        --num-samples 8 --num-seeds 2
    jaxrl sweep --preset ppo-dmc-cpu --random ppo.learning_rate=loguniform:1e-4:3e-3 \
        --random ppo.entropy_cost=loguniform:1e-4:1e-1 --num-samples 8 --pbt --pbt-interval 2
    jaxrl sweep --resume runs/sweep-ppo-CartpoleBalance-20261202-101500

Members are the points times the seeds `--seed .. --seed + --num-seeds - 1`
(`jaxrl.run.sweep_spec`); they train as one program (`jaxrl.run.sweep`).
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import sys
from typing import Annotated

import tyro

from jaxrl.run import cli_args as cli
from jaxrl.run.cli_commands import COMMANDS

GRID_HELP = ("Grid points: NAME=V1,V2,... per float hyperparameter (e.g. "
             "ppo.learning_rate=1e-4,3e-4); several names make the cartesian product.")
RESUME_HELP = ("Continue the sweep in this sweep dir from its members' latest common "
               "checkpoint, with its saved sweep.json (no other flag but --max-train-seconds, "
               "which sets a new budget for the whole sweep's training time, --no-progress and "
               "the process flags).")
RANDOM_HELP = ("Random search: NAME=uniform:LOW:HIGH or NAME=loguniform:LOW:HIGH; "
               "--num-samples draws (per grid point when --grid is given too).")
PBT_HELP = ("Population-based training: every --pbt-interval chunks the bottom --pbt-fraction "
            "of the members (ranked by --pbt-metric) copy the whole state of a top member and "
            "perturb its --grid/--random hyperparameters (x0.8 or x1.25, or a fresh draw with "
            "--pbt-resample-probability; clipped to the ranges), on device between chunks. "
            "Lineage: <sweep-dir>/pbt.jsonl and pbt.png; summary.md names the best member.")


def sweep_args_type():
    """`jaxrl train`'s argument dataclass plus the sweep's fields."""
    base = cli.args_type()
    fields = [
        ("grid", Annotated[tuple[str, ...], tyro.conf.arg(help=GRID_HELP)],
         dataclasses.field(default=())),
        ("random", Annotated[tuple[str, ...], tyro.conf.arg(help=RANDOM_HELP)],
         dataclasses.field(default=())),
        ("num_samples", Annotated[int, tyro.conf.arg(help="Random-search draws.")],
         dataclasses.field(default=8)),
        ("sample_seed", Annotated[int, tyro.conf.arg(
            help="Seed of the random-search draws and of PBT's (not of training).")],
         dataclasses.field(default=0)),
        ("pbt", Annotated[bool, tyro.conf.arg(help=PBT_HELP)], dataclasses.field(default=False)),
        *_pbt_fields(),
        ("sweep_dir", Annotated[str | None, tyro.conf.arg(
            help="Output folder: sweep.json, members/<name>/ run dirs, summary.{md,json,csv,"
                 "png}; default runs/sweep-<agent>-<env>-<time>.")],
         dataclasses.field(default=None)),
        # train's own flags with another meaning here: the sweep's help, or none at all.
        ("run_dir", Annotated[str | None, tyro.conf.Suppress], dataclasses.field(default=None)),
        ("resume", Annotated[str | None, tyro.conf.arg(help=RESUME_HELP)],
         dataclasses.field(default=None)),
    ]
    return dataclasses.make_dataclass("SweepArgs", fields, bases=(base,), frozen=True)


def _pbt_fields() -> list[tuple]:
    """`--pbt-<field>` for each `PBTConfig` field but the seed (`--sample-seed`), with the
    field's default and docstring."""
    from jaxrl.run import pbt
    from jaxrl.run.cli_args import field_docs

    docs = field_docs(pbt.PBTConfig)
    return [(f"pbt_{f.name}", Annotated[f.type, tyro.conf.arg(help=docs.get(f.name, ""))],
             dataclasses.field(default=f.default))
            for f in dataclasses.fields(pbt.PBTConfig) if f.name != "seed"]


def pbt_config(args):
    """The `PBTConfig` of parsed `jaxrl sweep` arguments (None without `--pbt`)."""
    from jaxrl.run import pbt

    if not args.pbt:
        return None
    return pbt.PBTConfig(**{f.name: getattr(args, f"pbt_{f.name}")
                            for f in dataclasses.fields(pbt.PBTConfig) if f.name != "seed"},
                         seed=args.sample_seed)


def resolve(argv: list[str]):
    """Parses `jaxrl sweep` arguments into (args, members, TrainConfig, agent config, search
    `{"grid", "random"}`, PBT settings or None).

    Raises:
        ValueError: unknown preset / agent / env, a bad grid or random item (unknown or static
            name, non-finite value), invalid sizes; all before compiling.
    """
    from jaxrl.engine import contract
    from jaxrl.envs import registry
    from jaxrl.run import sweep_spec

    defaults = cli.defaults_from_preset(cli.preset_name(argv))
    cls = sweep_args_type()
    defaults = cls(**{f.name: getattr(defaults, f.name) for f in dataclasses.fields(defaults)})
    args = tyro.cli(cls, default=defaults, args=argv, prog="jaxrl sweep",
                    description=COMMANDS["sweep"])
    contract.lookup(args.agent)
    cli.check_agent_flags(argv, args.agent)
    registry.check_env_name(args.env)
    args.train.validate()
    args.run.validate()
    agent_cfg = getattr(args, args.agent.replace("-", "_"))
    agent_cls = contract.lookup(args.agent)[0]
    hp_fields = tuple(agent_cls.HP_FIELDS)
    config_fields = tuple(f.name for f in dataclasses.fields(agent_cfg))
    grid = sweep_spec.parse_grid(args.grid, args.agent, hp_fields, config_fields)
    random = sweep_spec.parse_random(args.random, args.agent, hp_fields, config_fields)
    if set(grid) & set(random):
        raise ValueError(f"{', '.join(sorted(set(grid) & set(random)))} is in both --grid and "
                         "--random.")
    stray = [a.split("=", 1)[0] for a in argv if a.startswith("--pbt-")]
    if stray and not args.pbt:
        raise ValueError(f"{stray[0]} sets population-based training: add --pbt.")
    seeds = [args.run.seed + i for i in range(args.train.num_seeds)]
    points = sweep_spec.points(grid, random, args.num_samples, args.sample_seed)
    return (args, sweep_spec.members(points, seeds, distinct_seeds=args.pbt), args.train,
            agent_cfg, {"grid": grid, "random": random}, pbt_config(args))


def _check_dir_flags(argv: list[str]) -> None:
    """`--run-dir` is train's: a sweep's output folder is `--sweep-dir` (one name for one
    thing; tyro alone would print its own usage text); `--grid` / `--random` take all their
    items at once."""
    if any(a == "--run-dir" or a.startswith("--run-dir=") for a in argv):
        raise ValueError("jaxrl sweep names its output folder with --sweep-dir (each member's "
                         "run dir is <sweep-dir>/members/<name>); --run-dir is train's flag.")
    for flag in ("--grid", "--random"):  # a second one would silently replace the first
        if sum(a == flag or a.startswith(flag + "=") for a in argv) > 1:
            raise ValueError(f"{flag} is given twice: list every item after one {flag} "
                             f"({flag} A=... B=...).")


def _check_resume_flags(argv: list[str]) -> str:
    allowed = {"--resume", "--progress", "--no-progress", "--no-compile-cache",
               "--compile-cache", "--coordinator-address", "--num-processes", "--process-id",
               "--max-train-seconds"}
    flags = [a.split("=", 1)[0] for a in argv if a.startswith("--")]
    extra = [f for f in flags if f not in allowed]
    if extra:
        raise ValueError(f"--resume continues a sweep with its saved sweep.json; drop "
                         f"{', '.join(extra)}.")
    return cli.flag_value(argv, "--resume")


def _seconds(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"--max-train-seconds takes a number of seconds, got {text!r}.") from None


def main(argv: list[str]) -> None:
    """`jaxrl sweep ...`: resolve, train all members, print the ranked points."""
    try:
        cli.process_setup(argv)
    except ValueError as err:
        sys.exit(f"error: {err}")
    from jaxrl.envs import EnvAssetError
    from jaxrl.run import process, runner, sweep

    try:
        _check_dir_flags(argv)
        if cli.flag_value(argv, "--resume") is not None:
            sweep_dir = _check_resume_flags(argv)
            process.provide_cpu_devices(len(sweep.read_sweep(sweep_dir)["members"]))
            budget = cli.flag_value(argv, "--max-train-seconds")
            result = sweep.resume_sweep(sweep_dir, "--no-progress" not in argv,
                                        programs=process.program_store(),
                                        max_train_seconds=_seconds(budget))
        else:
            args, members, cfg, agent_cfg, search, pbt_cfg = resolve(argv)
            process.provide_cpu_devices(len(members))
            stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
            sweep_dir = args.sweep_dir or os.path.join(
                "runs", f"sweep-{args.agent}-{args.env}-{stamp}")
            result = sweep.run_sweep(args.agent, args.env, cfg, agent_cfg, members, sweep_dir,
                                     args.progress, args.preset,
                                     programs=process.program_store(), run=args.run,
                                     search=search, pbt_config=pbt_cfg)
    except (ValueError, EnvAssetError) as err:
        sys.exit(f"error: {err}")
    except runner.TrainingInterrupted as err:
        print(str(err), file=sys.stderr)
        sys.exit(128 + err.signum)
    print(f"done: {len(result.records)} members, {result.summary.get('total_env_steps', 0):,} "
          f"env steps in {result.train_seconds:.1f} s training (+{result.compile_seconds:.1f} s "
          f"compile), {result.summary.get('total_sps', 0):,.0f} SPS in all; sweep dir "
          f"{sweep_dir}")
    summary_md = os.path.join(sweep_dir, "summary.md")
    if os.path.exists(summary_md):
        with open(summary_md) as f:
            print(f.read().split("\n\n")[0])
