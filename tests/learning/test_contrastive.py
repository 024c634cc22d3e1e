"""Contrastive critic pieces and goal relabeling: hand-computed values (specs/crl.md tests 1-5)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.engine.types import Transition
from jaxrl.learning import contrastive as C
from jaxrl.learning import replay

L3 = jnp.array([[2.0, 0.0, -1.0], [0.0, 1.0, 0.0], [-1.0, 1.0, 3.0]])


def test_energies_hand_computed():
    phi, psi = jnp.zeros((1, 2)), jnp.array([[3.0, 4.0]])
    assert float(C.energy(phi, psi, "distance")[0, 0]) == pytest.approx(-np.sqrt(25 + 1e-6), 1e-7)
    assert float(C.energy(phi, psi, "sq_distance")[0, 0]) == -25.0
    assert float(C.energy(phi, psi, "dot")[0, 0]) == 0.0
    # A closer goal representation always has a larger energy.
    near = jnp.array([[0.3, 0.4]])
    for kind in ("distance", "sq_distance"):
        assert float(C.energy(phi, near, kind)[0, 0]) > float(C.energy(phi, psi, kind)[0, 0])
    # Cosine of identical vectors is 1 / temperature, whatever the rest of the batch holds.
    x = jnp.array([[1.0, 2.0], [-5.0, 0.5], [40.0, 1.0]])
    np.testing.assert_allclose(np.diag(C.energy(x, x, "cosine", 0.25)), 4.0, rtol=1e-6)
    np.testing.assert_allclose(C.pair_energy(x, x[::-1], "sq_distance"),
                               np.diag(C.energy(x, x[::-1], "sq_distance")), rtol=1e-6)
    with pytest.raises(ValueError, match="energy must be one of"):
        C.energy(phi, psi, "manhattan")


def test_distance_energies_match_a_loop_reference():
    """The matmul form of the pairwise distances equals `-|phi_i - psi_j|` computed pair by pair
    (non-square, 64-d); rounding never makes a squared distance negative."""
    phi = np.asarray(jax.random.normal(jax.random.PRNGKey(0), (7, 64)) * 3.0, np.float64)
    psi = np.asarray(jax.random.normal(jax.random.PRNGKey(1), (9, 64)), np.float64)
    ref = np.array([[np.sum((p - q) ** 2) for q in psi] for p in phi])
    got = C.energy(jnp.asarray(phi, jnp.float32), jnp.asarray(psi, jnp.float32), "sq_distance")
    np.testing.assert_allclose(np.asarray(got), -ref, rtol=2e-6, atol=1e-4)
    got = C.energy(jnp.asarray(phi, jnp.float32), jnp.asarray(psi, jnp.float32), "distance")
    np.testing.assert_allclose(np.asarray(got), -np.sqrt(ref + 1e-6), rtol=2e-6)
    x = jnp.asarray(phi, jnp.float32) * 100.0
    assert float(C.energy(x, x, "sq_distance").max()) <= 0.0
    # Rounding of the expansion is relative to the norms: a row's distance to itself stays
    # within 1e-3 of the smallest distance between two different rows.
    d = -np.asarray(C.energy(x, x, "distance"))
    assert np.diag(d).max() < 1e-3 * d[~np.eye(7, dtype=bool)].min()


def test_infonce_hand_computed_3x3():
    # Row LSEs: log(e^2 + 1 + e^-1), log(2 + e), log(e^-1 + e + e^3).
    lse_row = np.log([np.exp(2) + 1 + np.exp(-1), 2 + np.e, np.exp(-1) + np.e + np.exp(3)])
    lse_col = np.log([np.exp(2) + 1 + np.exp(-1), 1 + np.e + np.e, np.exp(-1) + 1 + np.exp(3)])
    diag = np.array([2.0, 1.0, 3.0])
    fwd, bwd = np.mean(lse_row - diag), np.mean(lse_col - diag)
    assert fwd == pytest.approx(0.288074, abs=1e-6)
    assert bwd == pytest.approx(0.365908, abs=1e-6)
    assert float(C.contrastive_loss(L3, "fwd_infonce")) == pytest.approx(fwd, 1e-6)
    assert float(C.contrastive_loss(L3, "bwd_infonce")) == pytest.approx(bwd, 1e-6)
    assert float(C.contrastive_loss(L3, "sym_infonce")) == pytest.approx(0.653982, abs=1e-6)
    assert float(0.1 * C.logsumexp_penalty(L3)) == pytest.approx(0.566441, abs=1e-6)
    m = C.critic_metrics(L3)
    assert float(m["train/accuracy"]) == 1.0
    assert float(m["train/logits_pos"]) == 2.0
    assert float(m["train/logits_neg"]) == pytest.approx(-1 / 6, 1e-6)
    # Uniform logits: the goal is a 1-in-256 guess.
    assert float(C.contrastive_loss(jnp.zeros((256, 256)))) == pytest.approx(np.log(256), 1e-6)
    with pytest.raises(ValueError, match="contrastive_loss must be one of"):
        C.contrastive_loss(L3, "dpo")


def test_binary_nce_is_cross_entropy():
    assert float(C.contrastive_loss(jnp.zeros((4, 4)), "binary_nce")) == pytest.approx(
        np.log(2), 1e-6)
    # Hand value: mean over entries of softplus(L) - [i == j] L.
    sp = np.log1p(np.exp(np.asarray(L3)))
    expected = np.mean(sp - np.eye(3) * np.asarray(L3))
    assert float(C.contrastive_loss(L3, "binary_nce")) == pytest.approx(expected, 1e-6)
    # Confident correct logits drive it towards 0 (the released -mean(sigmoid) does not).
    good = 20.0 * (2 * jnp.eye(3) - 1)
    assert float(C.contrastive_loss(good, "binary_nce")) < 1e-8


def test_future_offsets_truncated_geometric():
    # gamma 0.5 over 4 allowed offsets: 8/15, 4/15, 2/15, 1/15.
    valid = jnp.array([True, True, True, True, False, False])
    k = C.future_offsets(jax.random.PRNGKey(0), jnp.broadcast_to(valid, (40_000, 6)), 0.5)
    freq = np.bincount(np.asarray(k), minlength=6) / 40_000
    np.testing.assert_allclose(freq, [8 / 15, 4 / 15, 2 / 15, 1 / 15, 0, 0], atol=0.01)
    # gamma 0.99 over many offsets: P(0) / P(1) ~ 1 / 0.99.
    k = C.future_offsets(jax.random.PRNGKey(1), jnp.ones((400_000, 3), bool), 0.99)
    counts = np.bincount(np.asarray(k))
    assert counts[0] / counts[1] == pytest.approx(1 / 0.99, abs=0.012)


def test_rollout_future_index_stays_in_episode():
    # One env, 10 steps, two episodes of 5: traj ids [0]*5 + [1]*5.
    traj_id = jnp.array([0] * 5 + [1] * 5, jnp.int32)[:, None]
    keys = jax.random.split(jax.random.PRNGKey(2), 10_000)
    idx = np.asarray(jax.vmap(lambda k: C.rollout_future_index(k, traj_id, 0.5))(keys))[..., 0]
    for t in range(10):
        end = 5 if t < 5 else 10
        assert idx[:, t].min() >= t and idx[:, t].max() < end, t
    # From t = 0 the goal is next_obs[j], j in 0..4, so 1..5 steps ahead: 16, 8, 4, 2, 1 / 31.
    freq = np.bincount(idx[:, 0], minlength=10)[:5] / 10_000
    np.testing.assert_allclose(freq, np.array([16, 8, 4, 2, 1]) / 31, atol=0.015)
    assert (idx[:, 4] == 4).all() and (idx[:, 9] == 9).all()


def _goal_buffer(lengths, num_envs=2, capacity=16):
    """A buffer filled with episodes of the given lengths in every env (auto-reset inside).

    obs = [global step t, episode id]; next_obs = [t + 1, episode id]."""
    ids = np.concatenate([np.full(n, i) for i, n in enumerate(lengths)]).astype(np.int32)
    t = np.arange(len(ids), dtype=np.float32)
    ones = np.ones((1, num_envs), np.float32)
    obs = np.stack([t[:, None] * ones, ids[:, None] * ones], -1)
    nxt = np.stack([(t[:, None] + 1) * ones, ids[:, None] * ones], -1)
    ends = np.zeros(len(ids), np.float32)
    ends[np.cumsum(lengths) - 1] = 1.0
    tr = Transition(obs=jnp.asarray(obs), action=jnp.zeros((len(ids), num_envs, 1)),
                    reward=jnp.zeros((len(ids), num_envs)),
                    terminated=jnp.asarray(ends[:, None] * ones), truncated=jnp.zeros_like(
                        jnp.asarray(ends[:, None] * ones)), next_obs=jnp.asarray(nxt),
                    extras={"traj_id": jnp.asarray(ids[:, None] * ones.astype(np.int32))})
    buf = replay.init(jax.tree.map(lambda x: x[0], tr), capacity, extras=("traj_id",))
    for start in range(0, len(ids), 4):  # add in chunks of 4 rows, wrapping around
        buf = replay.add(buf, jax.tree.map(lambda x, s=start: x[s:s + 4], tr))
    return buf, ids


def test_sample_future_never_crosses_episodes_after_wraparound():
    # 7 episodes, 28 rows through a 16-row buffer: the oldest rows are overwritten.
    buf, ids = _goal_buffer([3, 6, 2, 5, 1, 7, 4])
    b = replay.sample_future(buf, jax.random.PRNGKey(3), 20_000, gamma=0.9, horizon=10)
    obs, fut = np.asarray(b.obs), np.asarray(b.future_obs)
    np.testing.assert_array_equal(b.traj_id, b.future_traj_id)
    np.testing.assert_array_equal(obs[:, 1], fut[:, 1])  # same episode
    np.testing.assert_array_equal(fut[:, 0] - obs[:, 0], b.offset)
    assert obs[:, 0].min() >= 28 - 16  # only written rows
    ep_end = np.cumsum([3, 6, 2, 5, 1, 7, 4])[ids[obs[:, 0].astype(int)]]
    assert (fut[:, 0] <= ep_end).all() and (b.offset >= 1).all() and (b.offset <= 10).all()
    # Rows 21..27 are episode 6 (length 4 -> rows 24..27); from row 24 offsets 1..4.
    start = obs[:, 0] == 24
    freq = np.bincount(np.asarray(b.offset)[start], minlength=5)[1:] / start.sum()
    w = 0.9 ** np.arange(4)
    np.testing.assert_allclose(freq, w / w.sum(), atol=0.05)


def test_sample_future_needs_traj_ids():
    buf, _ = _goal_buffer([4])
    plain = replay.ReplayState(data={k: v for k, v in buf.data.items() if k != "traj_id"},
                               write_time=buf.write_time, pos=buf.pos, size=buf.size,
                               clock=buf.clock)
    with pytest.raises(ValueError, match="traj_id"):
        replay.sample_future(plain, jax.random.PRNGKey(0), 4, gamma=0.9, horizon=4)


def test_sample_windows_one_window_per_env_relabeled_inside_it():
    """JaxGCRL's batches: N = 2 envs, windows of L = 5 rows, G B = N (L - 1) = 8 transitions,
    so each env gives one window of 4 consecutive relabeled rows; goals stay inside the window
    and the episode, with P(k) ∝ gamma^k over the offsets left in the window."""
    buf, _ = _goal_buffer([40])  # one episode, 40 rows through a 16-row buffer
    shift = jnp.array([[[0.0, 0.0], [1000.0, 0.0]]])  # env 1's step counter starts at 1000
    buf = buf.replace(data=dict(buf.data, obs=buf.data["obs"] + shift,
                                next_obs=buf.data["next_obs"] + shift))
    draw = jax.jit(jax.vmap(lambda k: replay.sample_windows(buf, k, 2, 4, window=5, gamma=0.5)))
    b = draw(jax.random.split(jax.random.PRNGKey(0), 4000))
    assert b.obs.shape == (4000, 2, 4, 2) and b.offset.shape == (4000, 2, 4)
    t = np.asarray(b.obs[..., 0]).reshape(4000, 8)
    offset = np.asarray(b.offset).reshape(4000, 8)
    np.testing.assert_array_equal(np.asarray(b.future_obs[..., 0]).reshape(4000, 8) - t, offset)
    env, t = t >= 1000, t % 1000
    assert t.min() >= 40 - 16 and (offset >= 1).all() and (env.sum(1) == 4).all()
    start = np.where(env, np.where(env, t, 1e9).min(1, keepdims=True),
                     np.where(env, 1e9, t).min(1, keepdims=True))
    j = (t - start).astype(int)
    for e in (False, True):  # each env: 4 consecutive rows, one window
        rows = np.sort(np.where(env == e, t, np.nan), 1)[:, :4]
        np.testing.assert_array_equal(rows - rows[:, :1], np.broadcast_to(np.arange(4), (4000, 4)))
    assert (t + offset <= start + 5).all()  # the goal is at most next_obs of the window's end
    first = offset[j == 0]  # offsets 1..5: 16 : 8 : 4 : 2 : 1
    freq = np.bincount(first, minlength=6)[1:] / first.size
    np.testing.assert_allclose(freq, np.array([16, 8, 4, 2, 1]) / 31, atol=0.02)
    last = offset[j == 3]  # offsets 1..2: 2 : 1
    np.testing.assert_allclose(np.bincount(last, minlength=3)[1:] / last.size, [2 / 3, 1 / 3],
                               atol=0.02)


def test_mix_random_goals_rolls_the_first_rows():
    goal = jnp.arange(8.0).reshape(4, 2)  # rows g0..g3
    np.testing.assert_array_equal(C.mix_random_goals(goal, 0.5),
                                  [[6.0, 7.0], [0.0, 1.0], [4.0, 5.0], [6.0, 7.0]])
    np.testing.assert_array_equal(C.mix_random_goals(goal, 1.0),
                                  [[6.0, 7.0], [0.0, 1.0], [2.0, 3.0], [4.0, 5.0]])
    assert C.mix_random_goals(goal, 0.0) is goal
    assert C.mix_random_goals(goal, 0.1) is goal  # round(0.4) = 0 rows
