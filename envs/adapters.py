"""Adapters from Playground and Brax envs to jaxrl's `State` and normalized actions.

Both simulators already expose `reset(key)` / `step(state, action)`; the adapters convert their
state records to `jaxrl.engine.types.State`,
rescale actions from [-1, 1] to the env's bounds, and read
the static facts an `EnvSpec` needs.
"""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.engine.types import State


class _Adapter:
    name: str
    action_size: int
    episode_length: int
    dt: float | None
    action_low: np.ndarray
    action_high: np.ndarray

    def _scale(self, action: jax.Array) -> jax.Array:
        low, high = jnp.asarray(self.action_low), jnp.asarray(self.action_high)
        if np.allclose(self.action_low, -1.0) and np.allclose(self.action_high, 1.0):
            return action
        return low + (jnp.clip(action, -1.0, 1.0) + 1.0) * 0.5 * (high - low)

    @property
    def unwrapped(self):
        return self


class PlaygroundEnv(_Adapter):
    """A MuJoCo Playground `MjxEnv` (`mujoco_playground.registry.load(name)`).

    With `self_scaling` (Playground's locomotion and manipulation envs) the env maps the
    policy's [-1, 1] action to motor targets itself (e.g. Go1 `joystick.py`: `motor_targets =
    default_pose + action * action_scale`), as Playground trains it: the action goes in
    unchanged and `action_low` / `action_high` are -1 / 1. Otherwise (DM Control) [-1, 1] is
    mapped to the actuators' ctrl range.
    """

    def __init__(self, name: str, env, episode_length: int, self_scaling: bool = False):
        self.name, self.env = name, env
        self.action_size = int(env.action_size)
        self.episode_length = int(episode_length)
        self.dt = float(env.dt)
        if self_scaling:
            self.action_low = -np.ones(self.action_size, np.float32)
            self.action_high = np.ones(self.action_size, np.float32)
        else:
            self.action_low, self.action_high = _ctrl_bounds(env.mj_model, self.action_size)
        self._nominal_model = getattr(env, "_mjx_model", None)

    def cacheable(self) -> bool:
        """False while `using_model` swaps in another model: a trace of `reset` / `step` made
        now closes over that model and must not be reused (`engine.wrappers.Vmap`)."""
        return getattr(self.env, "_mjx_model", None) is self._nominal_model

    def reset(self, key: jax.Array) -> State:
        return _from_playground(self.env.reset(key))

    def step(self, state: State, action: jax.Array) -> State:
        from mujoco_playground._src.mjx_env import State as PState

        inner = PState(data=state.data, obs=state.obs, reward=state.reward, done=state.done,
                       metrics=state.metrics, info=state.info)
        return _from_playground(self.env.step(inner, self._scale(action)))

    @property
    def sim_model(self):
        """The nominal `mjx.Model` the env simulates (Playground `MjxEnv.mjx_model`)."""
        return self.env.mjx_model

    @contextlib.contextmanager
    def using_model(self, model):
        """Simulates with `model` (e.g. a randomized `mjx.Model`) inside the block only.

        Playground envs read `self._mjx_model` in `reset` / `step` (`_src/mjx_env.py`); it is
        restored on exit, so no traced model stays in the env object.
        """
        nominal = self.env._mjx_model
        self.env._mjx_model = model
        try:
            yield
        finally:
            self.env._mjx_model = nominal

    def domain_randomizer(self):
        """Playground's randomizer for this env (`registry.get_domain_randomizer`), or None."""
        return _quiet_randomizer(self.name)

    @staticmethod
    def randomizable_envs() -> tuple[str, ...]:
        """Playground envs that have a domain randomizer in Playground's registry."""
        from mujoco_playground import registry

        return tuple(n for n in registry.ALL_ENVS if _quiet_randomizer(n))


def _quiet_randomizer(name: str):
    """`registry.get_domain_randomizer(name)` without the line Playground prints for an env
    that has none (our own error says so once, with the envs that have one)."""
    import io

    from mujoco_playground import registry

    with contextlib.redirect_stdout(io.StringIO()):
        return registry.get_domain_randomizer(name)


# Brax envs whose `step` maps [-1, 1] to the actuator range itself (brax 0.14.2
# `envs/{humanoid,humanoidstandup,inverted_pendulum,pusher}.py`): scaling here too would squeeze
# humanoid's [-0.4, 0.4] into [-0.56, -0.24] and saturate pusher's arm at |a| > 0.5.
SELF_SCALING_BRAX_ENVS = ("humanoid", "humanoidstandup", "inverted_pendulum", "pusher")


class BraxEnv(_Adapter):
    """A Brax env (`brax.envs.get_environment(name)`); `data` holds the pipeline state.

    Actions in [-1, 1] are mapped to the actuator range here, except for the envs in
    `SELF_SCALING_BRAX_ENVS`, which get them clipped to [-1, 1] and scale them themselves
    (`action_low` / `action_high` still report the range in env units).
    """

    def __init__(self, name: str, env, episode_length: int = 1000):
        self.name, self.env = name, env
        self.action_size = int(env.action_size)
        self.episode_length = int(episode_length)
        self.dt = _safe_dt(env)
        model = getattr(getattr(env, "sys", None), "mj_model", None) if _has_sys(env) else None
        self.action_low, self.action_high = _ctrl_bounds(model, self.action_size)

    def reset(self, key: jax.Array) -> State:
        return _from_brax(self.env.reset(key))

    def step(self, state: State, action: jax.Array) -> State:
        from brax.envs.base import State as BState

        inner = BState(pipeline_state=state.data, obs=state.obs, reward=state.reward,
                       done=state.done, metrics=state.metrics, info=state.info)
        if self.name in SELF_SCALING_BRAX_ENVS:
            return _from_brax(self.env.step(inner, jnp.clip(action, -1.0, 1.0)))
        return _from_brax(self.env.step(inner, self._scale(action)))


def _has_sys(env) -> bool:
    try:
        return getattr(env, "sys", None) is not None
    except AttributeError:  # brax `fast` has no physics system
        return False


def _safe_dt(env) -> float | None:
    try:
        return float(env.dt)
    except AttributeError:
        return None


def _ctrl_bounds(mj_model, action_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Actuator control range when every actuator is limited, else [-1, 1]."""
    ones = np.ones(action_size, np.float32)
    if mj_model is None or mj_model.nu != action_size or not np.all(mj_model.actuator_ctrllimited):
        return -ones, ones
    rng = np.asarray(mj_model.actuator_ctrlrange, np.float32)
    return rng[:, 0].copy(), rng[:, 1].copy()


REWARD_TERMS = "reward_terms"


def _from_playground(s) -> State:
    """`State` of a Playground state, with the metric `reward_terms`: the sum of the env's
    `reward/<term>` metrics, as the env logs them (scaled by its reward config, before it
    multiplies by `dt` and clips). Playground's locomotion envs return
    `clip(sum(terms) * dt, 0, 1e4)` (`locomotion/go1/joystick.py`), so a policy whose terms sum
    below zero earns reward 0: `episode/return` (the reward as returned) then sits near 0 while
    `episode/reward_terms` shows how far below zero the terms are."""
    metrics = dict(s.metrics)
    terms = [jnp.asarray(v, jnp.float32) for k, v in metrics.items() if k.startswith("reward/")]
    if terms:
        metrics[REWARD_TERMS] = sum(terms[1:], terms[0])
    return State(data=s.data, obs=s.obs, reward=jnp.asarray(s.reward, jnp.float32),
                 done=jnp.asarray(s.done, jnp.float32), metrics=metrics, info=dict(s.info))


def _from_brax(s) -> State:
    return State(data=s.pipeline_state, obs=s.obs, reward=jnp.asarray(s.reward, jnp.float32),
                 done=jnp.asarray(s.done, jnp.float32), metrics=dict(s.metrics), info=dict(s.info))
