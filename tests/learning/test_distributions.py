"""Tanh-Gaussian: spec numbers, finiteness at |a| -> 1, numeric reference, deterministic mode."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.learning import distributions as dist

ZERO, ONE = jnp.zeros(1), jnp.ones(1)


def test_log_prob_spec_values():
    np.testing.assert_allclose(dist.log_prob(jnp.array([0.0]), ZERO, ONE), -0.918939, atol=1e-5)
    np.testing.assert_allclose(dist.log_prob(jnp.array([1.0]), ZERO, ONE), -0.551377, atol=1e-5)
    lp = dist.log_prob(jnp.array([20.0]), ZERO, ONE)
    np.testing.assert_allclose(lp, -162.3052, atol=1e-3)
    grads = jax.grad(lambda loc, s: dist.log_prob(jnp.array([20.0]), loc, s).sum(),
                     argnums=(0, 1))(ZERO, ONE)
    assert all(np.all(np.isfinite(g)) for g in grads)


def test_log_det_eps_is_jaxgcrls_form_and_bounded():
    """`log(1 - tanh(u)^2 + eps)` by hand: at u = 0 it is log(1 + eps); at u = 1,
    1 - tanh(1)^2 = 0.41997434 gives -0.86755925 with eps 1e-6 (exact: -0.86756162); far out it
    stops at log(eps) = -13.815511 where the exact log-det keeps falling (-98.6137 at 50),
    and its gradient there is 0."""
    u = jnp.array([0.0, 1.0, 50.0])
    np.testing.assert_allclose(dist.tanh_log_det_eps(u, 1e-6),
                               [9.536743e-07, -0.86755925, -13.815511], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(dist.tanh_log_det(u), [0.0, -0.86756162, -98.61371], rtol=1e-6)
    grad = jax.grad(lambda x: dist.tanh_log_det_eps(x, 1e-6).sum())(jnp.array([50.0]))
    assert grad[0] == 0.0
    # In the log-prob: the eps form only replaces the log-det (N(50; 0, 1) is -1250.9189).
    lp = dist.TanhGaussian(ZERO, ONE).log_prob_raw(jnp.array([50.0]), 1e-6)
    np.testing.assert_allclose(lp, -1250.918939 + 13.815511, rtol=1e-6)
    np.testing.assert_array_equal(dist.TanhGaussian(ZERO, ONE).log_prob_raw(jnp.array([1.0])),
                                  dist.log_prob(jnp.array([1.0]), ZERO, ONE))


def test_finite_near_action_bounds():
    a = jnp.array([1.0 - 1e-7, -(1.0 - 1e-7)], jnp.float32)
    lp = dist.log_prob_from_action(a[:1], ZERO, ONE)
    np.testing.assert_allclose(lp, -20.2623, atol=1e-3)
    lp2 = dist.log_prob_from_action(a[1:], ZERO, ONE)
    assert np.isfinite(lp) and np.isfinite(lp2)


def test_matches_change_of_variables_reference():
    loc, scale = 0.3, 0.7
    u = np.linspace(-4, 4, 9)
    a = np.tanh(u)
    # Density of a = tanh(u) by change of variables, float64: p(u) / |da/du|.
    pu = np.exp(-0.5 * ((u - loc) / scale) ** 2) / (scale * np.sqrt(2 * np.pi))
    ref = np.log(pu / (1 - a**2))
    got = jax.vmap(lambda x: dist.log_prob(x[None], jnp.array([loc]), jnp.array([scale])))(
        jnp.asarray(u, jnp.float32))
    np.testing.assert_allclose(got, ref, atol=2e-4)
    # And it integrates to one over a in (-1, 1).
    grid = np.linspace(-1 + 1e-6, 1 - 1e-6, 200_001)
    dens = np.exp(np.asarray(dist.log_prob_from_action(
        jnp.asarray(grid, jnp.float32)[:, None], jnp.array([loc]), jnp.array([scale]))))
    assert abs(np.trapezoid(dens, grid) - 1.0) < 2e-3


def test_deterministic_mode_ignores_key():
    keys = jax.random.split(jax.random.PRNGKey(0), 100)
    outs = jax.vmap(lambda k: dist.mode(jnp.array([0.3])))(keys)
    np.testing.assert_allclose(outs, 0.2913126, atol=1e-6)


def test_params_floor_and_entropy_finite():
    loc, scale = dist.params(jnp.array([[0.0, -100.0]]))
    assert float(scale[0, 0]) >= 1e-3
    ent = dist.entropy(jax.random.PRNGKey(0), loc, scale)
    assert np.isfinite(ent).all()
