"""Episode / AutoReset: true final observation, fresh resets, truncation flags; toy and MJX."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.engine import wrappers
from jaxrl.envs import make, toy


def _run(env, steps, num_envs=4, key=0):
    state = jax.jit(env.reset)(jax.random.PRNGKey(key))
    step = jax.jit(env.step)
    out = []
    for _ in range(steps):
        state = step(state, jnp.zeros((num_envs, env.action_size)))
        out.append(state)
    return out


def test_autoreset_keeps_final_obs_and_draws_fresh_starts():
    k = 3
    env = wrappers.wrap_for_training(toy.DoneAfterK(k=k), num_envs=4, episode_length=100)
    states = _run(env, 2 * k)
    first_end, second_end = states[k - 1], states[2 * k - 1]
    for s in (first_end, second_end):
        np.testing.assert_array_equal(s.done, 1.0)
        np.testing.assert_array_equal(s.info["terminated"], 1.0)
        np.testing.assert_array_equal(s.info["truncated"], 0.0)
        np.testing.assert_array_equal(s.info["final_obs"][:, 0], float(k))  # true final obs
        np.testing.assert_array_equal(s.obs[:, 0], 0.0)  # already reset
        np.testing.assert_array_equal(s.info["final_episode_length"], float(k))
        np.testing.assert_array_equal(s.info["final_episode_return"], float(k))
    # The final obs carries the episode's own x0, and each reset draws a new x0 per slot.
    x0_first = np.asarray(first_end.info["final_obs"][:, 1])
    x0_second_start = np.asarray(first_end.obs[:, 1])
    x0_third_start = np.asarray(second_end.obs[:, 1])
    np.testing.assert_array_equal(np.asarray(second_end.info["final_obs"][:, 1]), x0_second_start)
    assert np.all(x0_first != x0_second_start)
    assert np.all(x0_second_start != x0_third_start)
    assert len(set(x0_second_start.tolist())) == 4  # slots differ from each other too


def test_time_limit_sets_truncated_not_terminated():
    env = wrappers.wrap_for_training(toy.PointMass(), num_envs=2, episode_length=5)
    states = _run(env, 6, num_envs=2)
    flags = np.array([[float(s.info["truncated"][0]), float(s.done[0])] for s in states])
    np.testing.assert_array_equal(flags[:, 0], [0, 0, 0, 0, 1, 0])
    np.testing.assert_array_equal(flags[:, 1], [0, 0, 0, 0, 1, 0])
    assert float(states[4].info["terminated"][0]) == 0.0


def test_termination_on_limit_step_wins():
    env = wrappers.wrap_for_training(toy.DoneAfterK(k=4), num_envs=1, episode_length=4)
    s = _run(env, 4, num_envs=1)[-1]
    assert float(s.info["terminated"][0]) == 1.0 and float(s.info["truncated"][0]) == 0.0


@pytest.fixture(scope="module")
def cartpole_states():
    env = wrappers.wrap_for_training(make("CartpoleBalance"), num_envs=3, episode_length=4)
    return _run(env, 8, num_envs=3)


def test_autoreset_on_playground_env(cartpole_states):
    """MJX state has unbatched size-0 leaves (pitfalls.md #1): auto-reset must still work."""
    s3, s7 = cartpole_states[3], cartpole_states[7]
    np.testing.assert_array_equal(s3.done, 1.0)
    np.testing.assert_array_equal(s3.info["truncated"], 1.0)
    np.testing.assert_array_equal(s3.info["steps"], 0)
    prev = cartpole_states[2]
    # final obs is the physics successor of step 2, not the reset observation.
    assert not np.allclose(s3.info["final_obs"], s3.obs)
    assert not np.allclose(s3.info["final_obs"], prev.obs)
    # Consecutive resets of one slot start from different states.
    assert not np.allclose(s3.obs, s7.obs)
    assert np.all(np.isfinite(np.asarray(s7.obs)))
