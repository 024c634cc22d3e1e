"""The agent contract: what the loop, the runner and checkpoints need from an algorithm.

An agent is a frozen dataclass built as `AgentClass(config=..., spec=EnvSpec, train=TrainConfig)`:
its static config, the env facts and the run layout (num_envs, budget) are known before anything
is traced, so no method takes them again. Everything learnable or traced lives in the state that
`init` returns; float hyperparameters (`hp`, a flat dict of float32 scalars) live inside that state
so a sweep can vmap over them.

Required methods (see `Agent`): `init(key, hp)`, `act(state, obs, key, deterministic)`,
`update(state, traj, key)`. Optional behaviour is *declared* by class attributes, never probed:

- `explores = True`: the behaviour policy carries state across env steps (zeta noise, per-env
  noise scales); the agent implements `init_explore(key, num_envs)` and
  `explore(state, obs, key, carry, done)` and the loop collects with them.
- `has_replay = True`: the state holds a replay buffer that checkpoints may leave out; the agent
  implements `replay_of(state)` and `with_replay(state, buffer)`.
- `goal_conditioned = True`: the agent needs an env with `EnvSpec.goal_indices`
  (`obs = concat(state, goal)`); `validate` rejects other envs.

`AgentBase` implements the shared parts (hyperparameter defaults and range checks from
`HP_FIELDS` / `HP_RANGES`, the declarations' defaults, `params_of`). The agent registry maps a
name to (agent class, config class); `jaxrl.agents` registers the built-in agents.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from typing import Any, ClassVar, Protocol, runtime_checkable

import jax

from jaxrl.engine.types import EnvSpec, Metrics, Transition


@runtime_checkable
class Agent(Protocol):
    """What the engine calls. `AgentBase` provides everything but `init`, `act`, `update`."""

    config: Any
    spec: EnvSpec
    train: Any  # jaxrl.engine.loop.TrainConfig
    on_policy: ClassVar[bool]
    explores: ClassVar[bool]
    has_replay: ClassVar[bool]
    goal_conditioned: ClassVar[bool]

    def default_hp(self) -> dict[str, float]:
        """Float hyperparameters (name -> value) traced inside the state."""

    def validate(self) -> None:
        """Raises ValueError (before compiling) for settings that cannot work."""

    def init(self, key: jax.Array, hp: dict[str, jax.Array]) -> Any:
        """Initial agent state for one seed; `hp` as `default_hp` (float32 scalars)."""

    def act(self, state: Any, obs: Any, key: jax.Array, deterministic: bool
            ) -> tuple[jax.Array, dict]:
        """Actions in [-1, 1] `[N, A]` for observations `[N, ...]`, and policy extras."""

    def update(self, state: Any, traj: Transition, key: jax.Array) -> tuple[Any, Metrics]:
        """One learning update on the chunk `Transition[T, N]`; float32 scalar metrics."""

    def params_of(self, state: Any) -> Any:
        """The parameter pytree (checked for NaN after every chunk, saved as final params)."""


@dataclasses.dataclass(frozen=True)
class AgentBase:
    """Shared implementation of the contract's bookkeeping.

    Subclasses set `HP_FIELDS` (config fields traced as float hyperparameters), `HP_RANGES`
    (inclusive `(low, high)` per field) and `on_policy`, and flip the declarations they
    implement (`explores`, `has_replay`, `goal_conditioned`).
    """

    config: Any
    spec: EnvSpec
    train: Any

    HP_FIELDS: ClassVar[tuple[str, ...]] = ()
    HP_RANGES: ClassVar[dict[str, tuple[float, float]]] = {}
    on_policy: ClassVar[bool] = True
    explores: ClassVar[bool] = False
    has_replay: ClassVar[bool] = False
    goal_conditioned: ClassVar[bool] = False

    def default_hp(self) -> dict[str, float]:
        """`{field: float(config.field)}` for every name in `HP_FIELDS`."""
        return {k: float(getattr(self.config, k)) for k in self.HP_FIELDS}

    def validate(self) -> None:
        """Checks the float hyperparameters against `HP_RANGES` and goal conditioning against
        the env. Subclasses extend it (and call it)."""
        name = registered_name(type(self.config))
        check_hp(self.default_hp(), self.HP_RANGES, name)
        if self.goal_conditioned:
            check_goal_spec(self.spec, name or type(self).__name__)

    def params_of(self, state: Any) -> Any:
        return state.params

    @property
    def layout(self) -> tuple[str, int]:
        """(`single` | `data` | `role`, device count) of one run (`engine.layouts`)."""
        return "single", 1

    def data_specs(self, state: Any, axis: str) -> Any:
        """`PartitionSpec`s of `state` under the `data` layout: replicated (agents with
        env-sharded state, e.g. a replay buffer, override it)."""
        return jax.tree.map(lambda _: jax.sharding.PartitionSpec(), state)

    def replay_of(self, state: Any) -> Any:
        """The replay buffer in `state` (agents that declare `has_replay`)."""
        raise TypeError(f"{type(self).__name__} keeps no replay buffer.")

    def with_replay(self, state: Any, buffer: Any) -> Any:
        """`state` with its replay buffer replaced (None leaves it out of a checkpoint)."""
        raise TypeError(f"{type(self).__name__} keeps no replay buffer.")


# --- checks shared by agents -----------------------------------------------------------------


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


# --- the registry ----------------------------------------------------------------------------

_AGENTS: dict[str, tuple[type, type]] = {}
_DESCRIPTIONS: dict[str, str] = {}


class UnknownAgentError(ValueError):
    """An agent name that is not registered."""


def register(name: str, agent_cls: type, config_cls: type, description: str | None = None) -> None:
    """Registers an agent class and its config dataclass under `name` (the CLI's `--agent`);
    `description` is its line in `jaxrl list agents` (default: the class docstring's first
    sentence).

    Raises:
        TypeError: `agent_cls` lacks a method of the `Agent` contract.
    """
    missing = [m for m in ("default_hp", "validate", "init", "act", "update", "params_of")
               if not callable(getattr(agent_cls, m, None))]
    if agent_cls.explores:
        missing += [m for m in ("init_explore", "explore") if not hasattr(agent_cls, m)]
    if missing:
        raise TypeError(f"agent {name!r} ({agent_cls.__name__}) lacks {', '.join(missing)}.")
    _AGENTS[name] = (agent_cls, config_cls)
    if description is None:
        first = " ".join((agent_cls.__doc__ or "").strip().split("\n\n")[0].split())
        description = first.split(". ")[0].rstrip(".") + "." if first else ""
    _DESCRIPTIONS[name] = description


def lookup(name: str) -> tuple[type, type]:
    """(agent class, config class) for `name`; `UnknownAgentError` with close matches."""
    if name not in _AGENTS:
        close = difflib.get_close_matches(name, list(_AGENTS), n=3, cutoff=0.4)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise UnknownAgentError(f"Unknown agent {name!r}.{hint} Known: {', '.join(_AGENTS)}.")
    return _AGENTS[name]


def list_agents() -> tuple[str, ...]:
    """Registered agent names, in registration order."""
    return tuple(_AGENTS)


def describe(name: str) -> str:
    """The one-line description `name` was registered with (`register`)."""
    lookup(name)
    return _DESCRIPTIONS.get(name, "")


def registered_name(config_cls: type) -> str | None:
    """The name registered with config class `config_cls` (the CLI's option group), or None."""
    return next((n for n, (_, cfg) in _AGENTS.items() if cfg is config_cls), None)


def config_fields(config_cls: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(config_cls)}
