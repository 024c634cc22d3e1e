"""SAC Flow cells and rollout (`jaxrl.learning.flow_cells`): hand-computed Flow-G and Flow-T
numbers, the deterministic mode, reparameterized gradients through every step."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.learning import flow_cells as fc


def _const_step(v, sigma, dt):
    """A cell with constant velocity `v` and step std `sigma` (Flow-G form: drift dt v)."""
    return lambda a, t: (dt * jnp.full_like(a, v), jnp.full_like(a, math.log(sigma)))


def test_flow_g_gate_at_init():
    cell = fc.GatedVelocity(action_size=3, hidden=(16,), log_std_hidden=(16,))
    obs = jax.random.normal(jax.random.PRNGKey(0), (5, 4))
    variables = cell.init(jax.random.PRNGKey(1), obs)
    a = jax.random.normal(jax.random.PRNGKey(2), (5, 3))
    gate = cell.apply(variables, obs, a, 0.25, method=cell.gate)
    np.testing.assert_allclose(gate, 0.993307, atol=1e-6)  # sigmoid(5): zero kernel, bias 5


def test_flow_g_one_step_hand_computed():
    """K = 1, dt = 1, 1-D: A_0 = 0.5, v = 0.2, sigma = 0.1, xi = 0.3."""
    noise = jnp.array([[0.5], [0.3]])  # [K + 1, A]: A_0, then xi_0
    action, logp, a_k = fc.noisy_euler(_const_step(0.2, 0.1, 1.0), noise, 1)
    np.testing.assert_allclose(a_k, [0.73], atol=1e-6)
    np.testing.assert_allclose(action, np.tanh([0.73]), atol=1e-6)
    # The three terms: log N(A_0; 0, 1), log N(A_1; A_0 + dt v, sigma^2), -log(1 - tanh^2 + 1e-6).
    np.testing.assert_allclose(fc.standard_normal_log_prob(jnp.array([0.5])), -1.043939,
                               atol=1e-6)
    np.testing.assert_allclose(fc.step_log_prob(jnp.array([0.3]), jnp.log(jnp.array([0.1]))),
                               1.338647, atol=1e-6)
    np.testing.assert_allclose(-fc.tanh_correction(jnp.array([0.73])), 0.491365, atol=1e-6)
    np.testing.assert_allclose(logp, -1.043939 + 1.338647 + 0.491365, atol=1e-5)
    np.testing.assert_allclose(logp, 0.786073, atol=1e-5)


def test_flow_t_step_jacobian():
    """sigma 0.5, dt 0.25, xi = 0: log N(0; 0, 1) - log(dt sigma) = 1.160503; released:
    -0.918939."""
    xi, log_s = jnp.zeros(1), jnp.log(jnp.array([0.25 * 0.5]))
    np.testing.assert_allclose(fc.step_log_prob(xi, log_s), 1.160503, atol=1e-6)
    np.testing.assert_allclose(fc.step_log_prob(xi, log_s, jacobian=False), -0.918939,
                               atol=1e-6)
    # The decoder's step std is dt sigma: log s = log dt + log sigma.
    cell = fc.DecoderVelocity(action_size=2, d_model=16, num_heads=4, num_layers=1)
    obs = jnp.ones((3, 5))
    variables = cell.init(jax.random.PRNGKey(0), obs)
    ctx = cell.apply(variables, obs, method=cell.context)
    a = jnp.full((3, 2), 0.1)
    mu, log_sigma = cell.apply(variables, ctx, a, 0.5, method=cell.velocity)
    drift, log_s = cell.apply(variables, ctx, a, 0.5, 0.25, method=cell.step)
    np.testing.assert_allclose(drift, 0.25 * mu, rtol=1e-6)
    np.testing.assert_allclose(log_s, math.log(0.25) + log_sigma, atol=1e-6)
    assert float(log_sigma.min()) >= -5.0 and float(log_sigma.max()) <= 2.0


def test_flow_t_path_log_prob_with_and_without_jacobian():
    """Through the whole rollout, the two modes differ by exactly -sum_k log s_k."""
    dt, sigma, k = 0.25, 0.5, 4
    noise = jax.random.normal(jax.random.PRNGKey(0), (k + 1, 7, 2))
    step = lambda a, t: (dt * 0.3 * jnp.ones_like(a), jnp.full_like(a, math.log(dt * sigma)))  # noqa: E731
    _, with_jac, _ = fc.noisy_euler(step, noise, k)
    _, released, _ = fc.noisy_euler(step, noise, k, jacobian=False)
    np.testing.assert_allclose(with_jac - released, -k * 2 * math.log(dt * sigma), atol=1e-4)


def test_sinusoidal_embedding():
    emb = fc.sinusoidal_embedding(jnp.array(0.0), 32)
    np.testing.assert_array_equal(emb, np.r_[np.zeros(16), np.ones(16)])
    emb = fc.sinusoidal_embedding(jnp.array([0.5, 0.75]), 32)
    assert emb.shape == (2, 32)
    np.testing.assert_allclose(emb[:, 0], np.sin([0.5, 0.75]), atol=1e-6)  # first freq 1


@pytest.mark.parametrize("kind", fc.CELLS)
def test_deterministic_mode_and_samples(kind):
    kwargs = {"hidden": (32,), "log_std_hidden": (32,)} if kind == "gate" else {"d_model": 16}
    cell = fc.make_cell(kind, 2, **kwargs)
    obs = jax.random.normal(jax.random.PRNGKey(0), (6, 3))
    variables = cell.init(jax.random.PRNGKey(1), obs)
    pol = fc.FlowPolicy(variables=variables, obs=obs, cell=cell, num_steps=4)
    mode = pol.mode()
    assert mode.shape == (6, 2) and float(jnp.abs(mode).max()) < 1.0
    # Zero noise through the stochastic rollout gives the same action.
    np.testing.assert_allclose(pol.from_noise(jnp.zeros((5, 6, 2))), mode, atol=1e-6)
    a1, lp1 = pol.sample_and_log_prob(jax.random.PRNGKey(2))
    a2, _ = pol.sample_and_log_prob(jax.random.PRNGKey(3))
    assert a1.shape == (6, 2) and lp1.shape == (6,) and np.isfinite(lp1).all()
    assert not np.allclose(a1, a2) and not np.allclose(a1, mode)


@pytest.mark.parametrize("kind", fc.CELLS)
def test_gradients_reach_every_step(kind):
    """Reparameterized: every noise moves the action, and every parameter gets a gradient
    but two kinds that are constant at init by design: the Flow-G gate's hidden layer (its
    output layer starts with a zero kernel) and Flow-T's query/key projections (attention over a
    single token is softmax of one score = 1, as released)."""
    kwargs = {"hidden": (32,), "log_std_hidden": (32,)} if kind == "gate" else {"d_model": 16}
    cell = fc.make_cell(kind, 1, **kwargs)
    obs = jnp.ones((4, 2))
    variables = cell.init(jax.random.PRNGKey(1), obs)
    noise = jax.random.normal(jax.random.PRNGKey(2), (9, 4, 1))

    def out(v, n):
        a, lp = fc.FlowPolicy(variables=v, obs=obs, cell=cell, num_steps=8).sample_from_noise(n)
        return jnp.sum(a) + 0.01 * jnp.sum(lp)

    g_params, g_noise = jax.grad(out, argnums=(0, 1))(variables, noise)
    assert np.all(np.abs(np.asarray(g_noise)) > 0)  # A_0 and every xi_k move the action
    for path, g in jax.tree_util.tree_leaves_with_path(g_params):
        name = jax.tree_util.keystr(path)
        constant = any(k in name for k in ("gate_0", "q_proj", "k_proj"))
        assert np.isfinite(np.asarray(g)).all(), name
        assert (float(jnp.abs(g).sum()) > 0) != constant, name
