"""GAE on hand-computed examples (specs/ppo.md tests 1-5) and against a Python loop."""

import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.learning.returns import gae, gae_brax

R = jnp.array([1.0, 2.0, 3.0])
V = jnp.array([1.0, 2.0, 3.0])
# V(next_obs_t): V(obs_1) = 2, V(final_obs_1) = 4 (step 1 ends), V(final_obs_2) = 5 bootstrap.
NV = jnp.array([2.0, 4.0, 5.0])
Z = jnp.zeros(3)
STEP1 = jnp.array([0.0, 1.0, 0.0])


def test_truncation_bootstraps_from_final_obs():
    adv, target = gae(R, V, NV, terminated=Z, truncated=STEP1, gamma=0.5, gae_lambda=0.5)
    np.testing.assert_allclose(adv, [1.5, 2.0, 2.5], atol=1e-6)
    np.testing.assert_allclose(target, [2.5, 4.0, 5.5], atol=1e-6)


def test_termination_does_not_bootstrap():
    adv, target = gae(R, V, NV, terminated=STEP1, truncated=Z, gamma=0.5, gae_lambda=0.5)
    np.testing.assert_allclose(adv, [1.0, 0.0, 2.5], atol=1e-6)
    np.testing.assert_allclose(target, [2.0, 2.0, 5.5], atol=1e-6)


def test_brax_mode_masks_truncated_step():
    adv, vs = gae_brax(R, V, jnp.array(5.0), terminated=Z, truncated=STEP1, gamma=0.5,
                       gae_lambda=0.5)
    np.testing.assert_allclose(adv, [1.0, 0.0, 2.5], atol=1e-6)
    np.testing.assert_allclose(vs, [2.0, 2.0, 5.5], atol=1e-6)


def test_brax_advantage_differs_from_gae_when_lambda_below_one():
    ones, zeros = jnp.ones(3), jnp.zeros(3)
    adv, tgt = gae(ones, zeros, jnp.array([0.0, 0.0, 10.0]), zeros, zeros, 0.9, 0.5)
    adv_b, vs_b = gae_brax(ones, zeros, jnp.array(10.0), zeros, zeros, 0.9, 0.5)
    np.testing.assert_allclose(adv, [3.475, 5.5, 10.0], atol=1e-5)
    np.testing.assert_allclose(adv_b, [5.95, 10.0, 10.0], atol=1e-5)
    np.testing.assert_allclose(tgt, [3.475, 5.5, 10.0], atol=1e-5)
    np.testing.assert_allclose(vs_b, [3.475, 5.5, 10.0], atol=1e-5)
    adv1, _ = gae(ones, zeros, jnp.array([0.0, 0.0, 10.0]), zeros, zeros, 0.9, 1.0)
    adv1_b, _ = gae_brax(ones, zeros, jnp.array(10.0), zeros, zeros, 0.9, 1.0)
    np.testing.assert_allclose(adv1, [10.0, 10.0, 10.0], atol=1e-5)
    np.testing.assert_allclose(adv1_b, [10.0, 10.0, 10.0], atol=1e-5)


def _loop_gae(r, v, nv, term, trunc, gamma, lam):
    t_len, n = r.shape
    adv = np.zeros((t_len, n))
    for j in range(n):
        acc = 0.0
        for t in reversed(range(t_len)):
            done = max(term[t, j], trunc[t, j])
            delta = r[t, j] + gamma * (1 - term[t, j]) * nv[t, j] - v[t, j]
            acc = delta + gamma * lam * (1 - done) * acc
            adv[t, j] = acc
    return adv, adv + v


def _loop_brax(r, v, boot, term, trunc, gamma, lam):
    t_len, n = r.shape
    vs, adv = np.zeros((t_len, n)), np.zeros((t_len, n))
    for j in range(n):
        acc, v_next, vs_next = 0.0, boot[j], boot[j]
        for t in reversed(range(t_len)):
            keep = 1 - trunc[t, j]
            delta = (r[t, j] + gamma * (1 - term[t, j]) * v_next - v[t, j]) * keep
            acc = delta + gamma * (1 - term[t, j]) * keep * lam * acc
            vs[t, j] = acc + v[t, j]
            adv[t, j] = (r[t, j] + gamma * (1 - term[t, j]) * vs_next - v[t, j]) * keep
            v_next, vs_next = v[t, j], vs[t, j]
    return adv, vs


@pytest.mark.parametrize("seed", [0, 1])
def test_scan_matches_python_loop(seed):
    rng = np.random.default_rng(seed)
    shape = (7, 5)
    r, v, nv = (rng.normal(size=shape).astype(np.float32) for _ in range(3))
    term = (rng.random(shape) < 0.2).astype(np.float32)
    trunc = ((rng.random(shape) < 0.2) * (1 - term)).astype(np.float32)
    adv, tgt = gae(r, v, nv, term, trunc, 0.97, 0.9)
    ref_adv, ref_tgt = _loop_gae(r, v, nv, term, trunc, 0.97, 0.9)
    np.testing.assert_allclose(adv, ref_adv, atol=1e-5)
    np.testing.assert_allclose(tgt, ref_tgt, atol=1e-5)
    adv_b, vs_b = gae_brax(r, v, nv[-1], term, trunc, 0.97, 0.9)
    ref_adv_b, ref_vs_b = _loop_brax(r, v, nv[-1], term, trunc, 0.97, 0.9)
    np.testing.assert_allclose(adv_b, ref_adv_b, atol=1e-5)
    np.testing.assert_allclose(vs_b, ref_vs_b, atol=1e-5)
