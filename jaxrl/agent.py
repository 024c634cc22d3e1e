"""The `Agent` protocol and the agent registry (name -> (agent class, config class)).

An agent is a frozen dataclass holding its static config; all learnable and traced values live
in the state it returns from `init`. Algorithms add only `init`, `act`, `update`.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from typing import Any, Protocol

import jax

from jaxrl.types import EnvSpec, Metrics, Transition


class Agent(Protocol):
    """What the loop needs from an algorithm.

    Constructed as `AgentClass(config=..., spec=EnvSpec, train=TrainConfig)`: static config,
    env facts and the run layout (num_envs, budget) are known before anything is traced.

    `hp` is a flat dict of float32 scalars (learning rate, gamma, ...) kept inside the state, so
    a sweep can vmap over it. `update` receives the whole chunk `Transition[T, N]`.
    """

    config: Any
    on_policy: bool

    def default_hp(self) -> dict[str, float]: ...

    def init(self, key: jax.Array, spec: EnvSpec, hp: dict[str, jax.Array]) -> Any: ...

    def act(self, state: Any, obs: Any, key: jax.Array, deterministic: bool
            ) -> tuple[jax.Array, dict]: ...

    def update(self, state: Any, traj: Transition, key: jax.Array) -> tuple[Any, Metrics]: ...


_AGENTS: dict[str, tuple[type, type]] = {}


class UnknownAgentError(ValueError):
    """An agent name that is not registered."""


def register(name: str, agent_cls: type, config_cls: type) -> None:
    """Registers an agent class and its config dataclass under `name`."""
    _AGENTS[name] = (agent_cls, config_cls)


def lookup(name: str) -> tuple[type, type]:
    """(agent class, config class) for `name`; `UnknownAgentError` with close matches."""
    import jaxrl.agents  # noqa: F401  (registers the built-in agents)

    if name not in _AGENTS:
        close = difflib.get_close_matches(name, list(_AGENTS), n=3, cutoff=0.4)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise UnknownAgentError(f"Unknown agent {name!r}.{hint} Known: {', '.join(_AGENTS)}.")
    return _AGENTS[name]


def list_agents() -> tuple[str, ...]:
    import jaxrl.agents  # noqa: F401

    return tuple(_AGENTS)


def config_fields(config_cls: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(config_cls)}


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
