"""Off-policy blocks: C51 projection, exploration noise, return-based reward normalization.

Values from specs/sac_family.md "Tests that prove it" items 1, 10 and 13.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.engine.types import Transition
from jaxrl.learning import exploration, replay, returns, reward_scaling

# --- C51 projection ----------------------------------------------------------------------------

Z21 = np.linspace(-10.0, 10.0, 21)


def _one_hot(i, k=21):
    return jnp.zeros(k).at[i].set(1.0)


def _project_loop(p, tz, v_min, v_max):
    """Bellemare et al. 2017 Algorithm 1 with `upper = lower + 1`, as a plain Python loop."""
    k = len(p)
    dz = (v_max - v_min) / (k - 1)
    out = np.zeros(k)
    for j in range(k):
        b = (min(max(tz[j], v_min), v_max) - v_min) / dz
        lo = int(np.floor(b))
        out[lo] += p[j] * (1 - (b - lo))
        out[min(lo + 1, k - 1)] += p[j] * (b - lo)
    return out


def test_categorical_support():
    np.testing.assert_allclose(returns.categorical_support(-10, 10, 21), Z21, atol=1e-6)
    assert returns.categorical_support(-5, 5, 101).dtype == jnp.float32


def test_c51_target_on_an_atom_keeps_mass_one():
    z = returns.categorical_support(-10, 10, 21)
    out = returns.categorical_projection(_one_hot(10), 0.0 + 0.99 * z, -10.0, 10.0)
    assert float(out[10]) == 1.0 and float(out.sum()) == 1.0  # the two-mask bug gives 2.0
    out = returns.categorical_projection(_one_hot(12), 1.0 + 1.0 * z, -10.0, 10.0)
    np.testing.assert_array_equal(out, _one_hot(13))  # z = 2, r = 1 -> all mass at z = 3


def test_c51_done_interpolates_and_clips():
    uniform = jnp.full(21, 1 / 21)
    out = returns.categorical_projection(uniform, jnp.full(21, 0.25), -10.0, 10.0)  # done
    np.testing.assert_allclose(out[10:12], [0.75, 0.25], atol=1e-6)
    np.testing.assert_allclose(out.sum(), 1.0, atol=1e-6)
    assert float(jnp.abs(out).sum() - out[10] - out[11]) < 1e-6
    z = returns.categorical_support(-10, 10, 21)
    out = returns.categorical_projection(_one_hot(19), 5.0 + z, -10.0, 10.0)  # 14 > v_max
    np.testing.assert_array_equal(out, _one_hot(20))
    out = returns.categorical_projection(_one_hot(3), -20.0 + z, -10.0, 10.0)  # below v_min
    np.testing.assert_array_equal(out, _one_hot(0))


def test_c51_random_distributions_sum_to_one_and_match_loop():
    k, n = 101, 10_000
    rng = np.random.default_rng(0)
    z = np.linspace(-5.0, 5.0, k)
    logits = rng.normal(size=(n, k)) * 3
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    r = rng.uniform(-2, 2, size=(n, 1))
    gamma = rng.choice([0.0, 0.97], size=(n, 1))
    tz = r + gamma * z
    out = np.asarray(
        jax.jit(returns.categorical_projection, static_argnums=(2, 3))(p, tz, -5.0, 5.0)
    )
    assert out.dtype == np.float32 and out.shape == (n, k)
    assert np.abs(out.sum(1) - p.sum(1)).max() < 1e-6 and np.abs(out.sum(1) - 1).max() < 1e-6
    assert out.min() >= 0.0
    inside = (tz.min(1) >= -5) & (tz.max(1) <= 5)  # no clipping: the mean is preserved
    np.testing.assert_allclose((out @ z)[inside], (p * tz).sum(1)[inside], atol=1e-4)
    for i in range(20):  # float32 position b in [0, 100] is exact to ~8e-6
        np.testing.assert_allclose(out[i], _project_loop(p[i], tz[i], -5, 5), atol=2e-5)


def test_c51_batched_shapes_broadcast_and_float32():
    p = jnp.full((4, 2, 21), 1 / 21, jnp.bfloat16)
    tz = jnp.asarray(Z21, jnp.float32) * 0.5  # broadcast to [4, 2, 21]
    out = returns.categorical_projection(p, tz, -10.0, 10.0)
    assert out.shape == (4, 2, 21) and out.dtype == jnp.float32
    np.testing.assert_allclose(
        out[1, 1], _project_loop(np.asarray(p[0, 0], np.float64), Z21 * 0.5, -10, 10), atol=1e-6
    )


# --- exploration -------------------------------------------------------------------------------


def test_per_env_noise_scales_and_resample_on_done():
    s = exploration.sample_noise_scales(jax.random.PRNGKey(0), 10_000)
    assert s.shape == (10_000,) and s.dtype == jnp.float32
    assert float(s.min()) >= 0.001 and float(s.max()) < 0.4
    np.testing.assert_allclose(s.mean(), 0.2005, atol=0.003)
    done = jnp.arange(10_000) % 3 == 0
    t = exploration.resample_on_done(jax.random.PRNGKey(1), s, done.astype(jnp.float32), 0.001, 0.4)
    np.testing.assert_array_equal(t[~done], s[~done])
    assert bool(jnp.all(t[done] != s[done]))
    assert float(t.min()) >= 0.001 and float(t.max()) < 0.4


def test_zeta_probabilities_and_draws():
    p = np.asarray(exploration.zeta_probs(16))
    np.testing.assert_allclose(p[[0, 1, 15]], [0.631175, 0.157794, 0.002466], atol=1e-6)
    np.testing.assert_allclose(p.sum(), 1.0, atol=1e-6)
    np.testing.assert_allclose((np.arange(1, 17) * p).sum(), 2.1338, atol=1e-4)
    k = np.asarray(exploration.zeta_sample(jax.random.PRNGKey(0), (1_000_000,), 16))
    assert k.dtype == np.int32 and k.min() == 1 and k.max() == 16
    freq = np.bincount(k, minlength=17)[1:] / 1e6
    np.testing.assert_allclose(freq, p, atol=0.002)
    # Standard error of the mean of 10^6 draws is 0.0024 (sd 2.355), so 0.01 is ~4 sigma.
    np.testing.assert_allclose(k.mean(), 2.1338, atol=0.01)


def test_zeta_noise_held_between_refreshes_and_refreshed_together():
    n, a, steps = 4, 3, 4000
    noise0 = exploration.zeta_init(jax.random.PRNGKey(0), n, a)
    assert noise0.eps.shape == (n, a) and 1 <= int(noise0.steps_left) <= 16

    def body(noise, key):
        new, eps = exploration.zeta_step(noise, key)
        return new, (eps, noise.steps_left)

    keys = jax.random.split(jax.random.PRNGKey(1), steps)
    _, (eps, left_before) = jax.jit(lambda s, k: jax.lax.scan(body, s, k))(noise0, keys)
    eps, left_before = np.asarray(eps), np.asarray(left_before)
    changed = np.any(eps[1:] != eps[:-1], axis=2)  # [T - 1, N]
    assert np.all(changed == changed[:, :1])  # all envs refresh at the same steps
    assert np.all(np.all(eps[1:] != eps[:-1], axis=(1, 2)) == changed[:, 0])  # every entry
    np.testing.assert_array_equal(changed[:, 0], left_before[1:] == 0)  # only when the count ends
    np.testing.assert_array_equal(eps[0], noise0.eps)  # the initial noise is used first
    starts = np.concatenate([[0], np.nonzero(changed[:, 0])[0] + 1, [steps]])
    runs = np.diff(starts)[:-1]  # complete runs
    assert runs[0] == int(noise0.steps_left) and runs.max() <= 16
    np.testing.assert_allclose(np.mean(runs == 1), 0.631175, atol=0.05)
    np.testing.assert_allclose(eps[starts[:-1]].std(), 1.0, atol=0.05)


# --- reward normalization ----------------------------------------------------------------------


def _np_returns(reward, done, gamma):
    g, prev, out = np.zeros(reward.shape[1]), np.zeros(reward.shape[1]), []
    for r, d in zip(reward, done, strict=True):
        g = gamma * (1 - prev) * g + r
        out.append(g)
        prev = d
    return np.array(out), g * (1 - prev)


def test_reward_norm_hand_checked_and_resets_on_truncation():
    r = jnp.array([[1.0], [2.0], [3.0], [4.0]])
    z = jnp.zeros_like(r)
    flag = z.at[1, 0].set(1.0)
    assert float(reward_scaling.scale(reward_scaling.init(1))) == 1.0  # before any data
    # G = [1, 2.5, 3, 5.5]: mean 3, var 10.5 / 4 = 2.625, G_max / 5 = 1.1.
    trunc = reward_scaling.update(reward_scaling.init(1), r, z, flag, 0.5)
    np.testing.assert_allclose(reward_scaling.scale(trunc), np.sqrt(2.625 + 1e-8), rtol=1e-6)
    np.testing.assert_allclose([trunc.mean, trunc.g_max, trunc.ret[0]], [3.0, 5.5, 5.5])
    term = reward_scaling.update(reward_scaling.init(1), r, flag, z, 0.5)
    np.testing.assert_array_equal(reward_scaling.scale(term), reward_scaling.scale(trunc))
    plain = reward_scaling.update(reward_scaling.init(1), r, z, z, 0.5)  # G = [1, 2.5, 4.25, 6.125]
    np.testing.assert_allclose(plain.mean, 13.875 / 4, rtol=1e-6)
    # G_max dominates a single big return: var 0, 10 / 5 = 2.
    one = reward_scaling.update(reward_scaling.init(1), jnp.array([[10.0]]), z[:1], z[:1], 0.9)
    np.testing.assert_allclose(reward_scaling.scale(one), 2.0, rtol=1e-6)


def test_reward_norm_matches_numpy_and_is_chunking_invariant():
    rng = np.random.default_rng(0)
    t, n, gamma = 60, 8, 0.97
    r = rng.normal(size=(t, n)).astype(np.float32)
    term = (rng.random((t, n)) < 0.05).astype(np.float32)
    trunc = (rng.random((t, n)) < 0.05).astype(np.float32)
    g, ret = _np_returns(r.astype(np.float64), np.maximum(term, trunc), gamma)
    whole = jax.jit(reward_scaling.update)(reward_scaling.init(n), r, term, trunc, gamma)
    np.testing.assert_allclose(whole.ret, ret, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(whole.mean, g.mean(), rtol=1e-5)
    np.testing.assert_allclose(whole.m2 / (t * n), g.var(), rtol=1e-5)
    np.testing.assert_allclose(whole.g_max, np.abs(g).max(), rtol=1e-6)
    assert int(whole.count_lo) == t * n and int(whole.count_hi) == 0
    want = max(np.sqrt(g.var() + 1e-8), np.abs(g).max() / 5)
    np.testing.assert_allclose(reward_scaling.scale(whole), want, rtol=1e-5)
    chunked = reward_scaling.init(n)
    for a, b in [(0, 7), (7, 20), (20, 21), (21, 60)]:
        chunked = reward_scaling.update(chunked, r[a:b], term[a:b], trunc[a:b], gamma)
    np.testing.assert_allclose(chunked.ret, whole.ret, rtol=1e-6)
    np.testing.assert_allclose(reward_scaling.scale(chunked), reward_scaling.scale(whole),
                               rtol=1e-5)


def test_reward_norm_scale_depends_on_write_stream_not_sampling_order():
    """Spec test 13: two runs writing the same stream but sampling differently share scales."""
    rng = np.random.default_rng(1)
    n, chunks = 3, 5
    stream = [
        Transition(
            obs=jnp.asarray(rng.normal(size=(4, n, 2)), jnp.float32),
            action=jnp.zeros((4, n, 1)),
            reward=jnp.asarray(rng.normal(size=(4, n)), jnp.float32),
            terminated=jnp.asarray(rng.random((4, n)) < 0.1, jnp.float32),
            truncated=jnp.asarray(rng.random((4, n)) < 0.1, jnp.float32),
            next_obs=jnp.zeros((4, n, 2)),
        )
        for _ in range(chunks)
    ]

    def run(sample_seed):
        buf = replay.init(jax.tree.map(lambda x: x[0], stream[0]), 64)
        norm, scales, batches = reward_scaling.init(n), [], []
        for i, tr in enumerate(stream):
            buf = replay.add(buf, tr)
            norm = reward_scaling.update(norm, tr.reward, tr.terminated, tr.truncated, 0.99)
            batch = replay.sample(buf, jax.random.PRNGKey(100 * sample_seed + i), 16)
            scales.append(float(reward_scaling.scale(norm)))
            batches.append(np.asarray(batch.reward) / scales[-1])
        return scales, batches

    (scales_a, batches_a), (scales_b, batches_b) = run(0), run(1)
    assert scales_a == scales_b and len(set(scales_a)) == chunks  # identical, and they move
    assert not all(np.array_equal(x, y) for x, y in zip(batches_a, batches_b, strict=True))


def test_reward_norm_merges_over_a_mapped_axis():
    rng = np.random.default_rng(2)
    r = jnp.asarray(rng.normal(size=(10, 6)), jnp.float32)
    d = jnp.asarray(rng.random((10, 6)) < 0.2, jnp.float32)
    z = jnp.zeros_like(r)
    full = reward_scaling.update(reward_scaling.init(6), r, d, z, 0.9)
    split = lambda x: x.reshape(10, 2, 3).transpose(1, 0, 2)  # noqa: E731  [shard, T, 3]
    shards = jax.vmap(
        lambda rr, dd, zz: reward_scaling.update(
            reward_scaling.init(3), rr, dd, zz, 0.9, axis_name="env"
        ),
        axis_name="env",
    )(split(r), split(d), split(z))
    np.testing.assert_allclose(shards.mean, [full.mean] * 2, rtol=1e-5)
    np.testing.assert_allclose(shards.m2, [full.m2] * 2, rtol=1e-5)
    np.testing.assert_array_equal(shards.g_max, [full.g_max] * 2)
    np.testing.assert_allclose(shards.ret.reshape(-1), full.ret, rtol=1e-6)
    np.testing.assert_array_equal(shards.count_lo, [60, 60])


@pytest.mark.parametrize("gamma", [0.0, 0.99])
def test_reward_norm_traced_gamma_under_vmap(gamma):
    r = jnp.ones((5, 2))
    z = jnp.zeros_like(r)
    states = jax.vmap(lambda g: reward_scaling.update(reward_scaling.init(2), r, z, z, g))(
        jnp.array([gamma, 0.5])
    )
    want = np.cumsum(gamma ** np.arange(5))  # G_t for a constant reward of 1
    np.testing.assert_allclose(states.g_max[0], want[-1], rtol=1e-6)
    np.testing.assert_allclose(states.mean[0], want.mean(), rtol=1e-6)
