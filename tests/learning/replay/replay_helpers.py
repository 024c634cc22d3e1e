"""Test helpers shared by the replay tests (imported by module name: pytest puts this folder on
`sys.path`)."""

import jax
import jax.numpy as jnp

from jaxrl.engine.types import Transition


def make_traj(obs, reward, terminated=None, truncated=None, next_obs=None, action=None):
    """Transition[T, N] from numpy arrays (flags default to 0, next_obs to obs + 100)."""
    reward = jnp.asarray(reward, jnp.float32)
    zeros = jnp.zeros_like(reward)
    obs = jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), obs)
    if next_obs is None:
        next_obs = jax.tree.map(lambda x: x + 100.0, obs)
    if action is None:
        action = jnp.zeros(reward.shape + (1,), jnp.float32)
    return Transition(
        obs=obs,
        action=jnp.asarray(action),
        reward=jnp.asarray(reward),
        terminated=jnp.asarray(zeros if terminated is None else terminated, jnp.float32),
        truncated=jnp.asarray(zeros if truncated is None else truncated, jnp.float32),
        next_obs=jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), next_obs),
    )


def example_row(traj):
    return jax.tree.map(lambda x: x[0], traj)
