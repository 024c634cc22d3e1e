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
- `has_replay = True`: the state holds a replay buffer that checkpoints may leave out, read and
  replaced by `replay_of(state)` and `with_replay(state, buffer)` (`AgentBase`: the state's
  field `buffer`).
- `goal_conditioned = True`: the agent needs an env with `EnvSpec.goal_indices`
  (`obs = concat(state, goal)`); `validate` rejects other envs.

`AgentBase` implements the shared parts (hyperparameter defaults and range checks from
`HP_FIELDS` / `HP_RANGES`, the declarations' defaults, `params_of`, `with_hp`). The agent
registry maps a name to (agent class, config class); `jaxrl.agents` registers the built-in agents.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any, ClassVar, Protocol, runtime_checkable

import jax

from jaxrl.engine.checks import check_goal_spec, check_hp
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

    def with_hp(self, state: Any, hp: dict[str, jax.Array]) -> Any:
        """`state` with new float hyperparameters (population-based training's explore)."""


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
    HP_INIT_ONLY: ClassVar[tuple[str, ...]] = ()
    """Names in `HP_FIELDS` read only by `init` (an initial value): changing them in a running
    state (`with_hp`, population-based training) would do nothing."""
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

    def with_hp(self, state: Any, hp: dict) -> Any:
        """One seed's `state` training on with the float hyperparameters `hp` (a subset of
        `default_hp`'s names) from now on: the state's `hp` updated. Agents that keep a value
        derived from one (an adapted step size) extend it."""
        return state.replace(hp={**state.hp, **hp})

    @property
    def layout(self) -> tuple[str, int]:
        """(`single` | `data` | `role`, device count) of one run (`engine.layouts`)."""
        return "single", 1

    def data_specs(self, state: Any, axis: str) -> Any:
        """`PartitionSpec`s of `state` under the `data` layout: replicated, except the data of
        a replay buffer (`has_replay`), `[C, N, ...]`, sharded on its env axis."""
        specs = jax.tree.map(lambda _: jax.sharding.PartitionSpec(), state)
        if not self.has_replay:
            return specs
        buffer = self.replay_of(specs)
        data = jax.tree.map(lambda _: jax.sharding.PartitionSpec(None, axis),
                            self.replay_of(state).data)
        return self.with_replay(specs, buffer.replace(data=data))

    def replay_of(self, state: Any) -> Any:
        """The replay buffer in `state`: its field `buffer` (agents that declare
        `has_replay`)."""
        if not self.has_replay:
            raise TypeError(f"{type(self).__name__} keeps no replay buffer.")
        return state.buffer

    def with_replay(self, state: Any, buffer: Any) -> Any:
        """`state` with its replay buffer replaced (None leaves it out of a checkpoint)."""
        if not self.has_replay:
            raise TypeError(f"{type(self).__name__} keeps no replay buffer.")
        return state.replace(buffer=buffer)


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
    missing = [m for m in ("default_hp", "validate", "init", "act", "update", "params_of",
                         "with_hp")
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
