"""Replay storage: rows vs a numpy reference ring, add checks, final obs at truncation, bf16
storage, and the buffer under vmap / jit / scan / cond."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from replay_helpers import example_row, make_traj

from jaxrl.engine import rollout, wrappers
from jaxrl.envs import toy
from jaxrl.learning import replay


class NumpyRing:
    """Plain reference ring buffer over rows of N envs; obs is a dict {"a": [.., 2], "b": [..]}."""

    def __init__(self, c, n):
        self.c, self.pos, self.size, self.clock = c, 0, 0, 0
        self.rows = {
            k: np.zeros((c, n) + s, np.float32)
            for k, s in [
                ("a", (2,)),
                ("b", ()),
                ("action", (1,)),
                ("reward", ()),
                ("terminated", ()),
                ("truncated", ()),
                ("na", (2,)),
                ("nb", ()),
            ]
        }
        self.write_time = np.full(c, -1, np.int64)

    def add(self, tr):
        for t in range(tr.reward.shape[0]):
            src = {
                "a": tr.obs["a"],
                "b": tr.obs["b"],
                "action": tr.action,
                "reward": tr.reward,
                "terminated": tr.terminated,
                "truncated": tr.truncated,
                "na": tr.next_obs["a"],
                "nb": tr.next_obs["b"],
            }
            for k, v in src.items():
                self.rows[k][self.pos] = np.asarray(v[t])
            self.write_time[self.pos] = self.clock
            self.pos, self.clock = (self.pos + 1) % self.c, self.clock + 1
            self.size = min(self.size + 1, self.c)

    def nstep(self, row, env, n_step, gamma):
        """(reward, discount, last row, n) of the window starting at `row`, by a plain loop."""
        newest = (self.pos - 1) % self.c
        total = 0.0
        for k in range(n_step):
            r = (row + k) % self.c
            total += gamma**k * self.rows["reward"][r, env]
            term, trunc = self.rows["terminated"][r, env], self.rows["truncated"][r, env]
            if term or trunc or r == newest:
                break
        return total, gamma ** (k + 1) * (1.0 - term), r, k + 1



def _random_traj(rng, t, n, clock):
    """Rows whose obs["b"] = write index * 10 + env (identifies the stored row)."""
    idx = (clock + np.arange(t))[:, None] * 10.0 + np.arange(n)[None]
    obs = {"a": rng.normal(size=(t, n, 2)), "b": idx}
    nxt = {"a": rng.normal(size=(t, n, 2)), "b": idx + 0.5}
    return make_traj(
        obs,
        rng.normal(size=(t, n)),
        rng.random((t, n)) < 0.15,
        rng.random((t, n)) < 0.15,
        nxt,
        rng.normal(size=(t, n, 1)),
    )



def test_storage_matches_numpy_reference_and_nstep_windows_match_loop():
    c, n, gamma, n_step = 7, 3, 0.9, 3
    rng = np.random.default_rng(0)
    ref = NumpyRing(c, n)
    state = None
    add, sample = (
        jax.jit(replay.add),
        jax.jit(replay.sample, static_argnames=("batch_size", "n_step")),
    )
    for i, t in enumerate([1, 3, 7, 2, 5, 1, 6, 4, 7]):
        tr = _random_traj(rng, t, n, ref.clock)
        if state is None:
            state = replay.init(example_row(tr), c)
        state = add(state, tr)
        ref.add(tr)
        assert (int(state.pos), int(state.size), int(state.clock)) == (ref.pos, ref.size, ref.clock)
        np.testing.assert_array_equal(state.write_time, ref.write_time)
        d = state.data
        for key, got in [
            ("a", d["obs"]["a"]),
            ("b", d["obs"]["b"]),
            ("action", d["action"]),
            ("reward", d["reward"]),
            ("terminated", d["terminated"]),
            ("truncated", d["truncated"]),
            ("na", d["next_obs"]["a"]),
            ("nb", d["next_obs"]["b"]),
        ]:
            np.testing.assert_array_equal(got, ref.rows[key], err_msg=key)
        assert int(replay.num_transitions(state)) == ref.size * n

        batch = sample(state, jax.random.PRNGKey(i), batch_size=256, n_step=n_step, gamma=gamma)
        batch = jax.tree.map(np.asarray, batch)
        ids = np.asarray(batch.obs["b"]).astype(np.int64)
        write_idx, env = ids // 10, ids % 10
        assert np.all(write_idx >= ref.clock - ref.size) and np.all(write_idx < ref.clock)
        for j in range(256):
            want = ref.nstep(write_idx[j] % c, env[j], n_step, gamma)
            np.testing.assert_allclose(batch.reward[j], want[0], rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(batch.discount[j], want[1], rtol=1e-6)
            assert int(batch.n[j]) == want[3]
            assert float(batch.next_obs["b"][j]) == ref.rows["nb"][want[2], env[j]]
            assert float(batch.terminated[j]) == ref.rows["terminated"][want[2], env[j]]
            assert float(batch.truncated[j]) == ref.rows["truncated"][want[2], env[j]]
            np.testing.assert_array_equal(
                batch.action[j], ref.rows["action"][write_idx[j] % c, env[j]]
            )



def test_add_validates_lengths_and_shapes():
    tr = make_traj(np.zeros((4, 2, 3)), np.zeros((4, 2)))
    state = replay.init(example_row(tr), 3)
    with pytest.raises(ValueError, match="cannot add 4 rows"):
        replay.add(state, tr)
    bad = make_traj(np.zeros((2, 2, 3)), np.zeros((2, 1)))
    with pytest.raises(ValueError, match="does not match"):
        replay.add(state, bad)
    with pytest.raises(ValueError, match="capacity_per_env"):
        replay.init(example_row(tr), 0)



def test_truncation_stored_with_final_obs_via_real_wrappers():
    """Truncated rows keep the true final obs: DoneAfterK (never terminates here), time limit 3."""
    env = wrappers.wrap_for_training(toy.DoneAfterK(k=1000), num_envs=2, episode_length=3)
    policy = lambda obs, key: (jnp.zeros((obs.shape[0], 1)), {})  # noqa: E731
    state = env.reset(jax.random.PRNGKey(0))
    _, tr = jax.jit(lambda s, k: rollout.rollout(env, policy, s, k, 8))(
        state, jax.random.PRNGKey(1)
    )
    buf = replay.add(replay.init(example_row(tr), 16), tr)
    obs, nxt = np.asarray(buf.data["obs"][:8]), np.asarray(buf.data["next_obs"][:8])
    trunc = np.asarray(buf.data["truncated"][:8])
    np.testing.assert_array_equal(trunc[:, 0], [0, 0, 1, 0, 0, 1, 0, 0])
    np.testing.assert_array_equal(buf.data["terminated"][:8], 0.0)
    np.testing.assert_array_equal(nxt[..., 0], obs[..., 0] + 1)  # never a reset obs (t = 0)
    np.testing.assert_array_equal(nxt[..., 1], obs[..., 1])  # same episode's x0
    np.testing.assert_array_equal(nxt[trunc > 0][:, 0], 3.0)  # the true final obs
    batch = replay.sample(buf, jax.random.PRNGKey(2), 2000, n_step=3, gamma=0.9)
    steps = np.asarray(batch.next_obs[:, 0] - batch.obs[:, 0])
    np.testing.assert_array_equal(steps, np.asarray(batch.n))
    np.testing.assert_array_equal(batch.next_obs[:, 1], batch.obs[:, 1])
    ended = np.asarray(batch.truncated) > 0
    assert ended.any() and np.all(np.asarray(batch.next_obs[ended, 0]) == 3.0)
    np.testing.assert_allclose(batch.discount, 0.9 ** np.asarray(batch.n), rtol=1e-6)  # mask 1



def test_bf16_storage_roundtrip():
    rng = np.random.default_rng(0)
    obs = {"x": rng.normal(size=(4, 2, 5)).astype(np.float32), "i": np.ones((4, 2), np.int32)}
    tr = make_traj(obs, np.zeros((4, 2)), next_obs=jax.tree.map(lambda x: x * 3, obs))
    tr = tr.replace(
        obs=dict(tr.obs, i=jnp.asarray(obs["i"])),
        next_obs=dict(tr.next_obs, i=jnp.asarray(obs["i"] * 3)),
    )
    state = replay.add(replay.init(example_row(tr), 4, obs_dtype=jnp.bfloat16), tr)
    assert state.data["obs"]["x"].dtype == jnp.bfloat16
    assert state.data["next_obs"]["x"].dtype == jnp.bfloat16
    assert state.data["obs"]["i"].dtype == jnp.int32 and state.data["action"].dtype == jnp.float32
    batch = replay.sample(state, jax.random.PRNGKey(0), 64)
    assert batch.obs["x"].dtype == jnp.float32 and batch.next_obs["x"].dtype == jnp.float32
    assert batch.obs["i"].dtype == jnp.int32
    stored = np.asarray(state.data["obs"]["x"].astype(jnp.float32))
    np.testing.assert_allclose(stored, obs["x"], rtol=2**-8)
    assert not np.array_equal(stored, obs["x"])  # really rounded
    np.testing.assert_allclose(
        np.asarray(batch.next_obs["x"]) / 3, np.asarray(batch.obs["x"]), rtol=2**-7
    )



def test_vmap_over_seeds_jit_scan_and_cond():
    """Two buffers (two seeds) filled and sampled in one jitted vmapped scan with a cond."""
    n, c = 2, 5
    example = example_row(make_traj(np.zeros((1, n, 1)), np.zeros((1, n))))

    def run(key, gamma):
        def body(buf, t):
            obs = jnp.full((1, n, 1), t, jnp.float32) + jax.random.uniform(key)
            tr = make_traj(obs, jnp.ones((1, n)))
            buf = replay.add(buf, tr)
            r = jax.lax.cond(
                buf.size >= 3,
                lambda b: replay.sample(
                    b, jax.random.fold_in(key, t), 8, n_step=2, gamma=gamma
                ).reward.mean(),
                lambda b: jnp.float32(-1.0),
                buf,
            )
            return buf, r

        return jax.lax.scan(body, replay.init(example, c), jnp.arange(7.0))

    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    gammas = jnp.array([0.5, 0.9])
    bufs, rewards = jax.jit(jax.vmap(run))(keys, gammas)
    np.testing.assert_array_equal(bufs.size, [5, 5])
    np.testing.assert_array_equal(bufs.clock, [7, 7])
    np.testing.assert_array_equal(rewards[:, :2], -1.0)
    assert bufs.data["obs"][0, 0, 0, 0] != bufs.data["obs"][1, 0, 0, 0]  # seeds differ
    for i in range(2):  # each seed equals its unbatched run
        one_buf, one_r = jax.jit(run)(keys[i], gammas[i])
        np.testing.assert_array_equal(rewards[i], one_r)
        np.testing.assert_array_equal(bufs.data["obs"][i], one_buf.data["obs"])
    # Rewards are all 1: 2-step windows give 1 + gamma unless at the write head (then 1).
    assert np.all((rewards[0, 2:] >= 1.0) & (rewards[0, 2:] <= 1.5))
    assert np.all((rewards[1, 2:] >= 1.0) & (rewards[1, 2:] <= 1.9))
