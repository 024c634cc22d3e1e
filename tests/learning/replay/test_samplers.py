"""Replay sampling: only written rows, uniform draws, n-step windows, SWD weights and
probabilities, and the multiply-shift integer draw."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from replay_helpers import example_row, make_traj

from jaxrl.learning import replay


@pytest.mark.parametrize("decay_steps", [0.0, 5.0, -5.0])
def test_never_samples_unwritten_rows(decay_steps):
    c, n = 50, 4
    state = None
    for written in (13, 50, 77):  # partly filled, exactly full, wrapped
        t = written - (0 if state is None else int(state.clock))
        idx = (np.arange(t) + written - t)[:, None] * 10.0 + np.arange(n) + 10.0  # write idx + 1
        tr = make_traj(idx[..., None], np.zeros((t, n)))
        if state is None:
            state = replay.init(example_row(tr), c)
        state = replay.add(state, tr)
        batch = replay.sample(state, jax.random.PRNGKey(written), 10_000, decay_steps=decay_steps)
        write_idx = np.asarray(batch.obs[:, 0]).astype(np.int64) // 10 - 1
        valid = np.arange(max(0, written - c), written)
        assert set(write_idx.tolist()) == set(valid.tolist())  # only written, and all of them
        assert np.all(np.asarray(state.write_time)[write_idx % c] == write_idx)



def test_uniform_sampling_is_uniform_over_rows_and_envs():
    c, n, t = 20, 3, 8
    idx = np.arange(t)[:, None] * 10.0 + np.arange(n)
    tr = make_traj(idx[..., None], np.zeros((t, n)))
    state = replay.add(replay.init(example_row(tr), c), tr)
    batch = replay.sample(state, jax.random.PRNGKey(1), 240_000)
    counts = np.bincount(np.asarray(batch.obs[:, 0]).astype(np.int64), minlength=80)
    counts = counts[idx.astype(np.int64).ravel()]
    np.testing.assert_allclose(counts / 240_000, 1 / (t * n), atol=0.003)



def _line(rewards, terminated=None, truncated=None, final=None):
    """One env; obs = step index; next_obs = index + 100 except `final` overrides."""
    t = len(rewards)
    nxt = np.arange(t, dtype=np.float32) + 100.0
    if final is not None:
        nxt[final[0]] = final[1]
    col = lambda x: None if x is None else np.asarray(x, np.float32)[:, None]  # noqa: E731
    return make_traj(
        np.arange(t, dtype=np.float32)[:, None, None],
        col(rewards),
        col(terminated),
        col(truncated),
        nxt[:, None, None],
    )



def _from_row(traj, row, n_step, gamma=0.9, capacity=10):
    state = replay.add(replay.init(example_row(traj), capacity), traj)
    batch = replay.sample(state, jax.random.PRNGKey(0), 400, n_step=n_step, gamma=gamma)
    pick = np.asarray(batch.obs[:, 0]) == row
    assert pick.any()
    out = jax.tree.map(lambda x: np.unique(np.asarray(x)[pick], axis=0), batch)
    assert all(len(v) == 1 for v in jax.tree.leaves(out))  # same row -> same values
    return jax.tree.map(lambda x: x[0], out)



def test_nstep_hand_computed():
    b = _from_row(_line([1, 1, 1, 1, 1]), 0, 3)  # plain 3-step
    np.testing.assert_allclose([b.reward, b.discount], [2.71, 0.729], rtol=1e-6)
    assert (b.next_obs[0], int(b.n), b.terminated, b.truncated) == (102.0, 3, 0.0, 0.0)

    b = _from_row(_line([1, 1, 1, 1], terminated=[0, 1, 0, 0]), 0, 3)  # terminated after 2
    np.testing.assert_allclose(b.reward, 1.9, rtol=1e-6)
    assert (b.discount, int(b.n), b.terminated, b.next_obs[0]) == (0.0, 2, 1.0, 101.0)

    b = _from_row(_line([1, 1, 1, 1], truncated=[0, 1, 0, 0], final=(1, 55.0)), 0, 3)
    np.testing.assert_allclose([b.reward, b.discount], [1.9, 0.81], rtol=1e-6)
    assert (b.next_obs[0], int(b.n), b.terminated, b.truncated) == (55.0, 2, 0.0, 1.0)

    b = _from_row(_line([2, 1, 1], terminated=[0, 0, 1]), 0, 1)  # n = 1
    np.testing.assert_allclose([b.reward, b.discount], [2.0, 0.9], rtol=1e-6)
    assert (b.next_obs[0], int(b.n)) == (100.0, 1)

    b = _from_row(_line([1, 1, 1, 1]), 2, 3, gamma=0.5)  # cut by the write head after 2 steps
    np.testing.assert_allclose([b.reward, b.discount], [1.5, 0.25], rtol=1e-6)



def test_nstep_window_stops_at_write_head_also_after_wraparound():
    # Newest rows start windows: row 3 of 4 can only be a 1-step window (never reads row 0).
    b = _from_row(_line([1, 1, 1, 1]), 3, 3, capacity=4)
    assert (float(b.reward), int(b.n), b.next_obs[0]) == (1.0, 1, 103.0)
    np.testing.assert_allclose(b.discount, 0.9, rtol=1e-6)
    # Wrapped: 6 rows into capacity 4 keeps steps 2..5 in rows [4, 5, 2, 3]; pos = 2.
    tr = _line([1, 2, 3, 4, 5, 6])
    state = replay.add(
        replay.add(replay.init(example_row(tr), 4), jax.tree.map(lambda x: x[:4], tr)),
        jax.tree.map(lambda x: x[4:], tr),
    )
    batch = replay.sample(state, jax.random.PRNGKey(3), 400, n_step=3, gamma=1.0)
    start = np.asarray(batch.obs[:, 0]).astype(int)
    assert set(start.tolist()) == {2, 3, 4, 5}
    want = {2: (12.0, 3, 104.0), 3: (15.0, 3, 105.0), 4: (11.0, 2, 105.0), 5: (6.0, 1, 105.0)}
    for s, r, n, nx in zip(start, batch.reward, batch.n, batch.next_obs[:, 0], strict=True):
        assert (float(r), int(n), float(nx)) == want[s]



def test_swd_weights_values():
    age = jnp.array([0.0, 1000.0, 5000.0])
    np.testing.assert_allclose(replay.swd_weights(age, 2000.0), [1.0, 0.5, 0.1], rtol=1e-6)
    np.testing.assert_array_equal(replay.swd_weights(age, 0.0), [1.0, 1.0, 1.0])
    np.testing.assert_allclose(replay.swd_weights(age, -2000.0), [0.1, 0.6, 1.0], rtol=1e-6)



@pytest.mark.parametrize(
    "decay_steps,probs", [(2000.0, [0.625, 0.3125, 0.0625]), (0.0, [1 / 3, 1 / 3, 1 / 3])]
)
def test_swd_sampling_probabilities(decay_steps, probs):
    tr = make_traj(np.arange(3, dtype=np.float32)[:, None, None], np.zeros((3, 1)))
    state = replay.add(replay.init(example_row(tr), 3), tr)
    state = state.replace(
        write_time=jnp.array([5000, 4000, 0], jnp.int32), clock=jnp.array(5001, jnp.int32)
    )  # ages 0, 1000, 5000
    batch = jax.jit(replay.sample, static_argnums=2, static_argnames="decay_steps")(
        state, jax.random.PRNGKey(0), 1_000_000, decay_steps=decay_steps
    )
    freq = np.bincount(np.asarray(batch.obs[:, 0]).astype(np.int64), minlength=3) / 1e6
    np.testing.assert_allclose(freq, probs, atol=0.002)



def test_swd_sampling_large_buffer_follows_age_profile():
    """200k wrapped rows: the exact integer CDF keeps per-age-band mass right."""
    c, d = 200_000, 50_000.0
    tr = make_traj(np.zeros((c, 1, 1), np.float32), np.zeros((c, 1)))
    state = replay.add(replay.init(example_row(tr), c), tr)
    state = replay.add(state, jax.tree.map(lambda x: x[: c // 3], tr))  # wrap; pos = c // 3
    state = state.replace(
        data=dict(
            state.data, obs=(state.clock - 1 - state.write_time).astype(jnp.float32)[:, None, None]
        )
    )  # obs = age
    batch = replay.sample(state, jax.random.PRNGKey(0), 1_000_000, decay_steps=d)
    ages = np.asarray(batch.obs[:, 0])
    w = np.maximum(0.1, 1 - np.arange(c) / d)
    edges = np.array([0, 10_000, 25_000, 50_000, 100_000, c])
    want = np.add.reduceat(w, edges[:-1]) / w.sum()
    np.testing.assert_allclose(np.histogram(ages, edges)[0] / 1e6, want, atol=0.002)



@pytest.mark.parametrize("n", [1, 3, 65535, 65537, 430_000_000, 2**31 - 1])
def test_uniform_below_is_exact_multiply_shift(n):
    """`floor(bits * n / 2^32)` computed with 16-bit limbs equals the uint64 product."""
    key = jax.random.PRNGKey(n % 997)
    bits = np.asarray(jax.random.bits(key, (50_000,), jnp.uint32)).astype(np.uint64)
    got = np.asarray(replay.uniform_below(key, (50_000,), jnp.int32(n)))
    np.testing.assert_array_equal(got.astype(np.uint64), (bits * np.uint64(n)) >> np.uint64(32))
