"""What a sweep trains: members (one seed x one point of a grid or random search) of one config.

Only float hyperparameters can be swept in one program: they are traced values inside the run
state (an agent's `HP_FIELDS`), so every member shares the compiled program and members are
vmapped on a leading axis. Fields that change shapes or program structure (widths, batch sizes,
`num_envs`) are static: a sweep over them is several programs, one `jaxrl sweep` each.

Spellings accepted on the command line: `ppo.learning_rate=1e-4,3e-4,1e-3` (grid: values joined
by commas; `ppo.learning-rate` and a bare `learning_rate` work too) and
`ppo.learning_rate=loguniform:1e-5:1e-3` or `uniform:LOW:HIGH` (random search: `num_samples`
draws from a NumPy generator seeded with `sample_seed`, so a sweep is reproducible).
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import math

import numpy as np

DISTRIBUTIONS = ("uniform", "loguniform")


@dataclasses.dataclass(frozen=True)
class Member:
    """One run of a sweep.

    Attributes:
        index: position on the member axis (0 .. S - 1).
        name: run dir name under `<sweep_dir>/members/`.
        seed: the run's seed (its PRNG key is `PRNGKey(seed)`, as `jaxrl train --seed`).
        point: index of its grid point / random draw (members of one point differ in seed).
        values: the swept hyperparameters, name -> value.
    """

    index: int
    name: str
    seed: int
    point: int
    values: dict


def _split_name(item: str, agent_group: str) -> tuple[str, str]:
    if "=" not in item:
        raise ValueError(f"{item!r} is not NAME=VALUES (e.g. "
                         f"{agent_group}.learning_rate=1e-4,3e-4).")
    name, values = item.split("=", 1)
    name = name.strip().replace("-", "_")
    group = agent_group.replace("-", "_")
    if "." in name:
        prefix, name = name.split(".", 1)
        if prefix != group:
            raise ValueError(f"{item!r} names group {prefix!r}, but the sweep trains "
                             f"{agent_group!r}: write {group}.{name}=...")
    return name, values


def check_name(name: str, hp_fields: tuple[str, ...], config_fields: tuple[str, ...],
               agent_group: str) -> None:
    """Raises ValueError for a name that is not one of the agent's float hyperparameters:
    a static config field says why it cannot be swept in one program; an unknown name lists
    close matches and every sweepable name."""
    if name in hp_fields:
        return
    if name in config_fields:
        raise ValueError(
            f"{agent_group}.{name} is a static field (it changes shapes or the program), not a "
            f"float hyperparameter: members of one sweep share one compiled program. Run one "
            f"sweep per value, or sweep one of: {', '.join(hp_fields)}.")
    close = difflib.get_close_matches(name, hp_fields, n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise ValueError(f"unknown hyperparameter {name!r} for {agent_group}.{hint} Sweepable: "
                     f"{', '.join(hp_fields)}.")


def _float(text: str, item: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{item!r}: {text!r} is not a number.") from None
    if not math.isfinite(value):
        raise ValueError(f"{item!r}: {text!r} is not finite.")
    return value


def parse_grid(items, agent_group: str, hp_fields, config_fields) -> dict[str, list[float]]:
    """`["ppo.learning_rate=1e-4,3e-4"]` -> `{"learning_rate": [1e-4, 3e-4]}`.

    Raises:
        ValueError: malformed item, unknown or static name, a name given twice, a value that is
            not a finite number, or an empty list.
    """
    grid: dict[str, list[float]] = {}
    for item in items:
        name, values = _split_name(item, agent_group)
        check_name(name, tuple(hp_fields), tuple(config_fields), agent_group)
        if name in grid:
            raise ValueError(f"{name} is swept twice; give all its values in one item.")
        parts = [v for v in values.split(",") if v.strip()]
        if not parts:
            raise ValueError(f"{item!r} lists no values.")
        grid[name] = [_float(v, item) for v in parts]
    return grid


def parse_random(items, agent_group: str, hp_fields, config_fields) -> dict[str, tuple]:
    """`["ppo.learning_rate=loguniform:1e-5:1e-3"]` -> `{"learning_rate": ("loguniform", lo, hi)}`.

    Raises:
        ValueError: as `parse_grid`, an unknown distribution, low > high, or a log-uniform
            range that is not positive.
    """
    out: dict[str, tuple] = {}
    for item in items:
        name, spec = _split_name(item, agent_group)
        check_name(name, tuple(hp_fields), tuple(config_fields), agent_group)
        parts = spec.split(":")
        if len(parts) != 3 or parts[0] not in DISTRIBUTIONS:
            raise ValueError(f"{item!r}: write {name}=uniform:LOW:HIGH or "
                             f"{name}=loguniform:LOW:HIGH.")
        low, high = _float(parts[1], item), _float(parts[2], item)
        if low > high or (parts[0] == "loguniform" and low <= 0):
            log = " and LOW > 0" if parts[0] == "loguniform" else ""
            raise ValueError(f"{item!r}: need LOW <= HIGH{log}.")
        out[name] = (parts[0], low, high)
    return out


def points(grid: dict, random: dict, num_samples: int, sample_seed: int) -> list[dict]:
    """The sweep's points: the grid's cartesian product (in the order given), each combined
    with `num_samples` random draws when `random` is set (a point is a dict name -> value)."""
    names = list(grid)
    base = [dict(zip(names, combo, strict=True))
            for combo in itertools.product(*(grid[n] for n in names))] or [{}]
    if not random:
        return base
    if num_samples < 1:
        raise ValueError(f"num_samples must be >= 1 with random search, got {num_samples}.")
    rng = np.random.default_rng(sample_seed)
    out = []
    for fixed in base:
        for _ in range(num_samples):
            draw = dict(fixed)
            for name, (dist, low, high) in random.items():
                u = rng.uniform()
                draw[name] = (float(low + u * (high - low)) if dist == "uniform"
                              else float(math.exp(math.log(low) + u * math.log(high / low))))
            out.append(draw)
    return out


def members(points_: list[dict], seeds: list[int], distinct_seeds: bool = False
            ) -> list[Member]:
    """Every point x every seed, point-major (members of a point are adjacent).

    `distinct_seeds` (population-based training): member i gets seed `seeds[0] + i` instead,
    so no two members share PRNG keys or env states (a grid sweep instead gives every point
    the same seeds: common random numbers between points)."""
    out = []
    for p, values in enumerate(points_):
        for seed in seeds:
            i = len(out)
            seed = seeds[0] + i if distinct_seeds else seed
            tag = "_".join(f"{k}={v:.4g}" for k, v in values.items())
            name = f"m{i:03d}" + (f"_{tag}" if tag else "") + f"_seed={seed}"
            out.append(Member(index=i, name=name, seed=seed, point=p, values=dict(values)))
    return out
