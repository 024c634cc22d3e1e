"""Input checks shared by agents and learning blocks: each raises one clear ValueError on the
host, before anything is traced or compiled (close matches for names)."""

from __future__ import annotations

import difflib
import math

from jaxrl.engine.types import EnvSpec


def check_hp(hp: dict[str, float], ranges: dict[str, tuple[float, float]],
             flag_group: str | None = None) -> None:
    """Raises ValueError for a non-finite or out-of-range float hyperparameter (host side).

    Args:
        hp: name -> value (an agent's `default_hp()`).
        ranges: name -> inclusive (low, high).
        flag_group: CLI option group (`ppo` -> `--ppo.learning-rate`) named in the message.
    """
    for name, value in hp.items():
        low, high = ranges[name]
        if not math.isfinite(value) or not low <= value <= high:
            hint = (f": pass a value in range (e.g. --{flag_group}.{name.replace('_', '-')})"
                    if flag_group else "")
            raise ValueError(f"{name} = {value} is not finite or outside [{low}, {high}]{hint}.")


def check_choice(name: str, value, choices) -> None:
    """Raises ValueError unless `value` is one of `choices` (the message lists them and names
    the closest one)."""
    if value not in choices:
        close = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1, cutoff=0.5)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"{name} must be one of {', '.join(map(str, choices))}; got "
                         f"{value!r}.{hint}")


def check_positive(config, *names: str) -> None:
    """Raises ValueError naming the first of `config`'s fields `names` that is not > 0."""
    for name in names:
        if not getattr(config, name) > 0:
            raise ValueError(f"{name} must be positive, got {getattr(config, name)}.")


def check_finite(config, *names: str) -> None:
    """Raises ValueError naming the first of `config`'s float fields `names` that is not
    finite."""
    for name in names:
        if not math.isfinite(getattr(config, name)):
            raise ValueError(f"{name} must be finite, got {getattr(config, name)}.")


def check_log_std_bounds(low: float, high: float) -> None:
    """Raises ValueError unless `low < high` are finite log-std bounds."""
    for name, value in (("log_std_min", low), ("log_std_max", high)):
        if not math.isfinite(value):
            raise ValueError(f"{name} must be finite, got {value}.")
    if not low < high:
        raise ValueError(f"log_std_min ({low}) must be below log_std_max ({high}).")


def check_goal_spec(spec: EnvSpec, agent: str) -> None:
    """Raises ValueError unless `spec` is a flat goal-conditioned observation with valid
    `goal_indices` (each in `[0, state_dim)`)."""
    if spec.goal_indices is None:
        raise ValueError(f"Agent {agent!r} needs a goal-conditioned env (EnvSpec.goal_indices "
                         f"set, obs = concat(state, goal)); env {spec.name!r} has none. "
                         "Goal envs: PointMaze, ReacherGoal, AntGoal, PusherGoal.")
    if spec.obs_is_dict or len(spec.obs_shape) != 1:
        raise ValueError(f"Agent {agent!r} needs a flat observation vector; env {spec.name!r} "
                         f"has {spec.obs_shape}.")
    goal_dim = len(spec.goal_indices)
    state_dim = spec.obs_shape[0] - goal_dim
    bad = [i for i in spec.goal_indices if not 0 <= int(i) < state_dim]
    if goal_dim == 0 or state_dim <= 0 or bad:
        raise ValueError(f"goal_indices {tuple(spec.goal_indices)} of env {spec.name!r} must be "
                         f"non-empty and within the state (state_dim = {state_dim}: obs "
                         f"{spec.obs_shape[0]} minus goal {goal_dim}); out of range: {bad}.")
