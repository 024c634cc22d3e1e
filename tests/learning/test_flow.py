"""Shared flow blocks: the time convention and its FPO converter, CFM losses, samplers, FPO's
ratio and the ASPO trust region, with hand-computed numbers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.learning import flow, losses


def _random(key, shape):
    return jax.random.normal(key, shape)


def test_eps_mse_is_t_squared_velocity_mse_and_matches_fpo_form():
    k = jax.random.split(jax.random.key(0), 4)
    a, eps, v = _random(k[0], (64, 3)), _random(k[1], (64, 3)), _random(k[2], (64, 3))
    t = jax.random.uniform(k[3], (64, 1))
    x_t = flow.interpolate(eps, a, t)
    eps_mse = flow.cfm_loss(v, x_t, t, eps, a, "eps_mse")
    u_mse = flow.cfm_loss(v, x_t, t, eps, a, "u_mse")
    np.testing.assert_allclose(eps_mse, t[:, 0] ** 2 * u_mse, rtol=1e-5, atol=1e-6)
    # FPO's own form (tau = 1 noise): x_tau = tau eps + (1 - tau) a, x1_pred = x_tau + (1 - tau) u
    tau, u = flow.to_fpo_time(t, v)
    x_tau = tau * eps + (1.0 - tau) * a
    fpo_form = jnp.mean(jnp.square(eps - (x_tau + (1.0 - tau) * u)), axis=-1)
    np.testing.assert_allclose(fpo_form, eps_mse, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(x_tau, x_t, atol=1e-6)


def test_convention_factor_at_tau_0_3_is_0_49():
    a, eps = jnp.array([[0.5]]), jnp.array([[-0.2]])
    v = jnp.array([[0.1]])
    t, _ = flow.from_fpo_time(jnp.array([[0.3]]), -v)
    assert float(t[0, 0]) == pytest.approx(0.7)
    x_t = flow.interpolate(eps, a, t)
    ratio = flow.cfm_loss(v, x_t, t, eps, a, "eps_mse") / flow.cfm_loss(v, x_t, t, eps, a,
                                                                         "u_mse")
    assert float(ratio[0]) == pytest.approx(0.49, abs=1e-6)
    # the converters are each other's inverse
    tau, u = flow.to_fpo_time(*flow.from_fpo_time(jnp.float32(0.3), jnp.float32(2.0)))
    assert (float(tau), float(u)) == pytest.approx((0.3, 2.0))


@pytest.mark.parametrize("sampler,steps", [("euler", 10), ("euler", 64), ("midpoint", 10)])
def test_samplers_are_exact_on_the_straight_path(sampler, steps):
    k1, k2 = jax.random.split(jax.random.key(1))
    eps, target = _random(k1, (32, 2)), _random(k2, (32, 2))
    # the exact velocity of the straight path from eps to target is constant: target - eps
    x1 = flow.integrate(lambda x, t: target - eps, eps, steps, sampler)
    # float32: K additions of dt * v round by up to ~K/2 ulp; 1e-6 holds to K = 10, 64 steps
    # of |x| <= 3 land within 4e-6 (measured 3.0e-6).
    np.testing.assert_allclose(x1, target, atol=1e-6 if steps <= 10 else 4e-6)


def test_midpoint_integrates_a_time_dependent_field_to_second_order():
    # dx/dt = 2 t  ->  x(1) = x0 + 1; Euler with K steps is short by 1 / K, midpoint is exact.
    x0 = jnp.zeros((1,))
    euler = flow.integrate(lambda x, t: 2.0 * t * jnp.ones_like(x), x0, 4, "euler")
    mid = flow.integrate(lambda x, t: 2.0 * t * jnp.ones_like(x), x0, 4, "midpoint")
    assert float(euler[0]) == pytest.approx(0.75, abs=1e-6)
    assert float(mid[0]) == pytest.approx(1.0, abs=1e-6)


def test_step_noise_is_added_after_each_step():
    noise = jnp.ones((5, 1, 1))
    x1 = flow.integrate(lambda x, t: jnp.zeros_like(x), jnp.zeros((1, 1)), 5, "euler",
                        noise, 0.1)
    assert float(x1[0, 0]) == pytest.approx(0.5, abs=1e-6)


def test_fourier_features_and_velocity_mlp_shapes():
    feats = flow.fourier_time_features(jnp.array([0.0, 0.5]), 4)
    np.testing.assert_allclose(feats[0], [1, 1, 1, 1, 0, 0, 0, 0], atol=1e-7)
    np.testing.assert_allclose(feats[1, 1], np.cos(1.0), rtol=1e-6)
    net = flow.VelocityMLP((8, 8), 3)
    obs, x, t = jnp.ones((5, 4)), jnp.ones((5, 3)), jnp.ones((5,))
    params = net.init(jax.random.key(0), obs, x, t)
    assert net.apply(params, obs, x, t).shape == (5, 3)


def test_training_times_on_the_grid():
    t = flow.sample_training_times(jax.random.key(0), (4000,), 10)
    values = np.unique(np.round(np.asarray(t), 6))
    np.testing.assert_allclose(values, np.arange(10) / 10, atol=1e-6)


def test_fpo_ratio_numbers():
    old, new = jnp.array([0.5, 0.7]), jnp.array([0.4, 0.9])
    averaged = losses.fpo_ratio(old, new)
    assert averaged.shape == (1,)
    assert float(averaged[0]) == pytest.approx(0.951229, abs=1e-6)
    np.testing.assert_allclose(losses.fpo_ratio(old, new, per_sample=True),
                               [1.105171, 0.818731], atol=1e-6)
    np.testing.assert_array_equal(losses.fpo_ratio(old, old), [1.0])
    # the per-sample log-ratio is clipped to [-3, 3] before exponentiating
    assert float(losses.fpo_ratio(jnp.array([9.0]), jnp.array([0.0]), True)[0]) == \
        pytest.approx(np.exp(3.0), rel=1e-6)


def test_aspo_peaks_at_one_minus_eps_for_negative_advantages():
    rho = jnp.linspace(0.5, 1.5, 10001)
    obj = losses.trust_region_objective(rho, jnp.float32(-1.0), 0.05, "aspo")
    assert float(rho[jnp.argmax(obj)]) == pytest.approx(0.95, abs=1e-4)
    # A >= 0: exactly the PPO clip
    for adv in (0.0, 0.7):
        np.testing.assert_array_equal(
            losses.trust_region_objective(rho, jnp.float32(adv), 0.05, "aspo"),
            losses.trust_region_objective(rho, jnp.float32(adv), 0.05, "clip"))
    # at rho = 1 the gradient is A in both branches
    for adv in (-1.3, 0.8):
        g = jax.grad(lambda r, a=adv: losses.trust_region_objective(r, jnp.float32(a), 0.05,
                                                                    "aspo"))(1.0)
        assert float(g) == pytest.approx(adv, abs=1e-6)


@pytest.mark.parametrize("kwargs,match", [
    ({"num_steps": 0}, "positive integer"),
    ({"num_steps": -3}, "positive integer"),
    ({"num_steps": 4, "num_mc": 0}, "num_mc"),
    ({"num_steps": 4, "sampler": "eulr"}, "Did you mean 'euler'"),
    ({"num_steps": 4, "convention": "fpp"}, "Did you mean 'fpo'"),
])
def test_bad_flow_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        flow.check_flow_settings(**kwargs)
