"""Env metrics are logged as per-episode sums (over action-repeat sub-steps too), and `buffer/`
metrics as the value after a chunk's last iteration."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.engine import loop, rollout, wrappers
from jaxrl.engine.types import State


class _Counter:
    """Counts env steps since reset: `t = 1, 2, ...`; terminates when `t == k`.

    Per-step metrics: `m = t` (step index + 1) and `one = 1`; reward 1 per step. After its done
    step the env keeps counting (so action-repeat sub-steps after the end are visible)."""

    action_size = 1
    dt = 0.1

    def __init__(self, k: int, episode_length: int = 1000):
        self.k = k
        self.episode_length = episode_length
        self.action_low = -np.ones(1, np.float32)
        self.action_high = np.ones(1, np.float32)

    def reset(self, key):
        zero = jnp.zeros(())
        return State(data={"t": zero}, obs=zero[None], reward=zero, done=zero,
                     metrics={"m": zero, "one": zero}, info={})

    def step(self, state, action):
        t = state.data["t"] + 1.0
        return state.replace(data={"t": t}, obs=t[None], reward=jnp.ones(()),
                             done=(t == self.k).astype(jnp.float32),
                             metrics={"m": t, "one": jnp.ones(())})


def _unroll(env, num_envs, steps):
    def policy(obs, key):
        return jnp.zeros((obs.shape[0], 1)), {}

    @jax.jit
    def run(key):
        state = env.reset(key)
        return rollout.rollout(env, policy, state, jax.random.PRNGKey(1), steps)

    _, traj = jax.device_get(run(jax.random.PRNGKey(0)))
    return traj


def test_action_repeat_1_sums_over_each_episode():
    """k = 3: every episode has m = 1, 2, 3, so its sum is 6 and `one` sums to 3."""
    env = wrappers.wrap_for_training(_Counter(k=3), num_envs=2, episode_length=100)
    traj = _unroll(env, 2, 7)
    done = np.array([0, 0, 1, 0, 0, 1, 0], np.float32)
    np.testing.assert_array_equal(traj.extras["done"], np.stack([done, done], 1))
    # At a done step: the ended episode's sum; elsewhere: the running sum (reset to 0 at reset).
    running = np.array([1, 3, 6, 1, 3, 6, 1], np.float32)
    np.testing.assert_array_equal(traj.extras["final_episode_metrics/m"][:, 0], running)
    np.testing.assert_array_equal(traj.extras["final_episode_metrics/one"][:, 1],
                                  [1, 2, 3, 1, 2, 3, 1])
    np.testing.assert_array_equal(traj.extras["env/m"][:, 0], [1, 2, 3, 1, 2, 3, 1])  # per step
    sums = loop._episode_sums(traj)
    assert float(sums["episode/count"]) == 4.0  # 2 episodes in each of 2 envs
    assert float(sums["episode/m_sum"]) == 4 * 6.0
    assert float(sums["episode/one_sum"]) == 4 * 3.0
    assert float(sums["episode/return_sum"]) == 4 * 3.0
    out = loop._summarize(jax.tree.map(lambda x: jnp.asarray(x)[None], sums))
    assert float(out["episode/m"]) == 6.0 and float(out["episode/one"]) == 3.0
    assert float(out["episode/return"]) == 3.0 and float(out["episode/length"]) == 3.0


def test_action_repeat_4_sums_sub_steps_until_the_end():
    """k = 10 with action repeat 4: policy step 1 runs t = 1..4 (m sum 10), step 2 t = 5..8
    (26), step 3 t = 9, 10 (19; t = 11, 12 come after the termination and do not count). The
    episode's m sum is 55 = 1 + ... + 10 and `one` sums to 10 env steps, like the return."""
    env = wrappers.wrap_for_training(_Counter(k=10), num_envs=3, episode_length=100,
                                     action_repeat=4)
    traj = _unroll(env, 3, 7)
    np.testing.assert_array_equal(traj.extras["done"][:, 0], [0, 0, 1, 0, 0, 1, 0])
    np.testing.assert_array_equal(traj.extras["final_episode_metrics/m"][:, 0],
                                  [10, 36, 55, 10, 36, 55, 10])
    np.testing.assert_array_equal(traj.extras["final_episode_metrics/one"][:, 2],
                                  [4, 8, 10, 4, 8, 10, 4])
    np.testing.assert_array_equal(traj.extras["final_episode_return"][:, 1],
                                  [4, 8, 10, 4, 8, 10, 4])
    np.testing.assert_array_equal(traj.extras["env/m"][:3, 0], [4, 8, 12])  # last sub-step's
    out = loop._summarize(jax.tree.map(lambda x: jnp.asarray(x)[None],
                                       loop._episode_sums(traj)))
    assert float(out["episode/count"]) == 6.0
    assert float(out["episode/m"]) == 55.0 and float(out["episode/one"]) == 10.0
    assert float(out["episode/return"]) == 10.0 and float(out["episode/length"]) == 3.0


def test_action_repeat_4_with_time_limit():
    """No termination, time limit 2 policy steps: each episode runs t = 1..8, m sum 36."""
    env = wrappers.wrap_for_training(_Counter(k=1000), num_envs=1, episode_length=2,
                                     action_repeat=4)
    traj = _unroll(env, 1, 4)
    np.testing.assert_array_equal(traj.truncated[:, 0], [0, 1, 0, 1])
    np.testing.assert_array_equal(traj.extras["final_episode_metrics/m"][:, 0], [10, 36, 10, 36])
    out = loop._summarize(jax.tree.map(lambda x: jnp.asarray(x)[None],
                                       loop._episode_sums(traj)))
    assert float(out["episode/m"]) == 36.0 and float(out["episode/one"]) == 8.0


def test_episode_metrics_start_at_zero_and_eval_env_keeps_them():
    env = wrappers.wrap_for_eval(_Counter(k=3), num_envs=2, episode_length=100)
    state = env.reset(jax.random.PRNGKey(0))
    np.testing.assert_array_equal(state.info["episode_metrics"]["m"], [0, 0])
    state = env.step(state, jnp.zeros((2, 1)))
    state = env.step(state, jnp.zeros((2, 1)))
    np.testing.assert_array_equal(state.info["episode_metrics"]["m"], [3, 3])
    assert state.info["episode_metrics"]["m"].dtype == jnp.float32


def _chunk_metrics():
    """Three iterations of one chunk, hand-made."""
    return {"episode/count": jnp.array([2.0, 0.0, 1.0]),
            "episode/return_sum": jnp.array([10.0, 0.0, 4.0]),
            "episode/length_sum": jnp.array([6.0, 0.0, 3.0]),
            "episode/m_sum": jnp.array([12.0, 0.0, 9.0]),
            "train/loss": jnp.array([1.0, 2.0, 6.0]),
            "buffer/transitions": jnp.array([100.0, 200.0, 300.0])}


def test_summarize_means_over_episodes_and_last_buffer_value():
    out = loop._summarize(_chunk_metrics())
    assert set(out) == {"episode/count", "episode/return", "episode/length", "episode/m",
                        "train/loss", "buffer/transitions"}
    assert float(out["episode/count"]) == 3.0
    assert float(out["episode/return"]) == pytest.approx(14.0 / 3.0)
    assert float(out["episode/length"]) == 3.0
    assert float(out["episode/m"]) == 7.0  # (12 + 9) / 3 episodes
    assert float(out["train/loss"]) == 3.0  # mean over iterations
    assert float(out["buffer/transitions"]) == 300.0  # after the last iteration, not 200


def test_summarize_without_episodes_and_under_vmap():
    none = dict(_chunk_metrics(), **{"episode/count": jnp.zeros(3)})
    out = loop._summarize(none)
    assert np.isnan(float(out["episode/m"])) and float(out["episode/count"]) == 0.0
    seeds = jax.tree.map(lambda x: jnp.stack([x, 2 * x]), _chunk_metrics())
    out = jax.jit(jax.vmap(loop._summarize))(seeds)
    np.testing.assert_array_equal(out["buffer/transitions"], [300.0, 600.0])
    np.testing.assert_array_equal(out["train/loss"], [3.0, 6.0])
    np.testing.assert_array_equal(out["episode/m"], [7.0, 7.0])
