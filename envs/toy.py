"""Small pure-JAX envs for tests and smoke runs (no simulator, compile in seconds).

All take actions in [-1, 1] and follow Playground's `reset(key)` / `step(state, action)` API.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.engine.types import State


class _Toy:
    dt = 0.05

    def __init__(self, episode_length: int):
        self.episode_length = int(episode_length)
        self.action_low = -np.ones(self.action_size, np.float32)
        self.action_high = np.ones(self.action_size, np.float32)

    @property
    def unwrapped(self):
        return self


class DoneAfterK(_Toy):
    """Terminates after exactly `k` steps. obs = [t, x0], x0 ~ U(0, 1) drawn at reset.

    Reward 1 per step. Used to check that auto-reset keeps the true final obs (`[k, x0]`) and
    draws a fresh `x0` on every reset.
    """

    name = "DoneAfterK"
    action_size = 1

    def __init__(self, k: int = 3, episode_length: int = 1000):
        self.k = int(k)
        super().__init__(episode_length)

    def reset(self, key):
        x0 = jax.random.uniform(key)
        obs = jnp.stack([jnp.zeros(()), x0])
        return State(data={"t": jnp.zeros(()), "x0": x0}, obs=obs, reward=jnp.zeros(()),
                     done=jnp.zeros(()), metrics={}, info={})

    def step(self, state, action):
        t = state.data["t"] + 1.0
        obs = jnp.stack([t, state.data["x0"]])
        return state.replace(data=dict(state.data, t=t), obs=obs, reward=jnp.ones(()),
                             done=(t >= self.k).astype(jnp.float32))


class PointMass(_Toy):
    """1-D point mass to hold at the origin; never terminates (time limit only).

    obs = [x, v]; x0 ~ U(-1, 1), v0 = 0; v <- clip(v + 0.1 a, -1, 1), x <- clip(x + 0.1 v, -2, 2).
    Reward `1 - min(|x|, 1)` per step, so a good policy scores close to `episode_length` minus
    the approach cost and a random policy drifts away. Episode length 100 by default.
    """

    name = "PointMass1D"
    action_size = 1

    def __init__(self, episode_length: int = 100):
        super().__init__(episode_length)

    def reset(self, key):
        x = jax.random.uniform(key, minval=-1.0, maxval=1.0)
        return State(data={"x": x, "v": jnp.zeros(())}, obs=jnp.stack([x, jnp.zeros(())]),
                     reward=jnp.zeros(()), done=jnp.zeros(()), metrics={"distance": jnp.abs(x)},
                     info={})

    def step(self, state, action):
        a = jnp.clip(action[0], -1.0, 1.0)
        v = jnp.clip(state.data["v"] + 0.1 * a, -1.0, 1.0)
        x = jnp.clip(state.data["x"] + 0.1 * v, -2.0, 2.0)
        reward = 1.0 - jnp.minimum(jnp.abs(x), 1.0)
        return state.replace(data={"x": x, "v": v}, obs=jnp.stack([x, v]), reward=reward,
                             done=jnp.zeros(()), metrics={"distance": jnp.abs(x)})


class TwoModes(_Toy):
    """One-step bandit with two equally good actions: the test of a multimodal policy.

    obs = [1]; the episode terminates after one step with reward
    `exp(-((|a| - 0.7) / 0.15)^2)`: 1 at a = -0.7 and a = +0.7, about 4e-10 at a = 0, so a
    unimodal policy either picks one mode or sits between them and earns nothing; a policy that
    represents the reward's shape puts mass on both. Actions of size 1 (the first entry is read).
    """

    name = "TwoModes"
    action_size = 1
    modes = (-0.7, 0.7)
    width = 0.15

    def __init__(self, episode_length: int = 1):
        super().__init__(episode_length)

    def reset(self, key):
        del key
        return State(data={}, obs=jnp.ones((1,)), reward=jnp.zeros(()), done=jnp.zeros(()),
                     metrics={}, info={})

    def step(self, state, action):
        a = jnp.clip(action[0], -1.0, 1.0)
        reward = jnp.exp(-jnp.square((jnp.abs(a) - self.modes[1]) / self.width))
        return state.replace(reward=reward, done=jnp.ones(()))


TOY_ENVS = {"DoneAfterK": DoneAfterK, "PointMass1D": PointMass, "TwoModes": TwoModes}
