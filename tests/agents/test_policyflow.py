"""PolicyFlow: hand numbers for the ratio, score, Brownian residual, entropy and KL; the ratio
approximation against the exact end-point shift; validate errors; deterministic acting; frozen
Fourier frequencies; the TwoModes bandit; a slow CartpoleBalance learning test."""

import dataclasses
import math
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import configs
from jaxrl.agents import PolicyFlowConfig
from jaxrl.engine import loop, rollout
from jaxrl.learning import flow
from jaxrl.learning.distributions import (
    diag_gaussian_entropy,
    diag_gaussian_kl,
    diag_gaussian_log_prob,
)
from jaxrl.run import runner

TOY = dataclasses.replace(configs.get("ppo-toy-cpu").train, num_envs=16, num_seeds=1)
SMALL = dict(policy_hidden=(32, 32), value_hidden=(32, 32), num_minibatches=4)


def _build(env="PointMass1D", **over):
    return runner.build("policyflow", env, TOY, PolicyFlowConfig(**dict(SMALL, **over)))


def _rollout(agent, env, spec, steps=16):
    init, _ = loop.make_train(agent, env)
    r = init(jax.random.PRNGKey(0), agent.default_hp())
    policy = lambda o, k: agent.act(r.agent_state, o, k, False)  # noqa: E731
    _, traj = rollout.rollout(loop.make_env(env, TOY), policy, r.env_state,
                              jax.random.PRNGKey(1), steps)
    return r.agent_state, traj


# ----- hand numbers ---------------------------------------------------------------------------


def test_gaussian_pieces_hand_numbers():
    # log N(0.3; 0.1, 0.5^2) = -0.5 * 0.4^2 - log 0.5 - 0.5 log(2 pi) = -0.305792
    lp = diag_gaussian_log_prob(jnp.array([0.3]), jnp.array([0.1]), jnp.log(jnp.array([0.5])))
    assert float(lp) == pytest.approx(-0.305792, abs=1e-6)
    # H = 1/2 sum log(2 pi e sigma^2): two dims of sigma = 1 -> log(2 pi e) = 2.837877
    assert float(diag_gaussian_entropy(jnp.zeros(2))) == pytest.approx(2.837877, abs=1e-6)
    # KL(N(0, 1) || N(0.5, 2)) = log 2 + (1 + 0.25) / (2 * 4) - 0.5 = 0.349397
    kl = diag_gaussian_kl(0.0, jnp.zeros(1), jnp.array([0.5]), jnp.log(jnp.array([2.0])))
    assert float(kl) == pytest.approx(0.349397, abs=1e-6)
    assert float(diag_gaussian_kl(0.0, jnp.zeros(3), jnp.zeros(3), jnp.zeros(3))) == 0.0


def test_score_and_brownian_residual_point_target():
    """Point target c = 0.7: the rectified-flow velocity is v = (c - x) / (1 - t); the score
    formula `(t v - x) / (1 - t)` equals the analytic `-(x - t c) / (1 - t)^2` = -0.055556; the
    residual vanishes at `v_theta = (x - t v_old) / (1 - t)` = 0.055556 (the negative score), and
    its gradient pulls v_theta toward that value (sign check: the term spreads the flow)."""
    c, x, t = 0.7, 0.3, 0.4
    v_old = (c - x) / (1 - t)
    score = float(flow.rectified_flow_score(v_old, x, t))
    assert score == pytest.approx(-0.055556, abs=1e-6)
    assert score == pytest.approx(-(x - t * c) / (1 - t) ** 2, abs=1e-7)
    v_star = (x - t * v_old) / (1 - t)
    assert v_star == pytest.approx(-score, abs=1e-7)
    eta = lambda v: flow.brownian_residual(v, v_old, x, t)  # noqa: E731
    assert abs(float(eta(v_star))) < 1e-7
    # eta = (1 - t)(v + score): 0.6 * (0.5 - 0.055556) = 0.266667
    assert float(eta(0.5)) == pytest.approx(0.266667, abs=1e-6)
    grad = jax.grad(lambda v: jnp.square(eta(v)))
    assert float(grad(0.5)) > 0.0 and float(grad(-0.5)) < 0.0  # descent moves v toward v_star
    # v_old is a constant: no gradient flows into it.
    assert float(jax.grad(lambda vo: flow.brownian_residual(0.5, vo, x, t))(v_old)) == 0.0


def test_ratio_is_one_for_identical_parameters():
    """Same parameters and sigma = sigma_old: dv = 0 and log rho = 0 exactly when v_old was
    computed on the same inputs; on a real rollout (v_old computed at act time with another
    batch layout) within float32 reassociation."""
    agent, env, spec = _build()
    state, traj = _rollout(agent, env, spec)
    params = state.params["policy"]
    obs = agent.core.normalize(state.obs_stats, traj.obs)
    ex = dict(traj.extras)
    t = ex["flow_t"]
    ex["v_old"] = agent.velocity(params, agent.core.policy_in(obs),
                                 flow.interpolate(ex["z"], ex["a_hat"], t), t[..., 0])
    dv, _, log_std = agent.flow_terms(params, obs, ex)
    assert np.all(np.asarray(dv) == 0.0)
    log_rho = diag_gaussian_log_prob(ex["noise"], dv, log_std) - ex["log_prob"]
    assert np.all(np.asarray(log_rho) == 0.0)
    _, metrics = agent.core.loss(state.params, state.obs_stats, traj, jax.random.PRNGKey(0),
                             state.hp)
    assert abs(float(metrics["train/ratio_kl"])) < 1e-6
    assert abs(float(metrics["train/approx_kl"])) < 1e-6
    assert float(metrics["train/clip_fraction"]) == 0.0


def test_training_times_grid():
    t = np.asarray(flow.sample_midpoint_times(jax.random.PRNGKey(0), (4000,), 10, "grid"))
    assert set(np.round(t * 20).astype(int)) == set(range(1, 20))  # j / 20, j = 1..19
    np.testing.assert_allclose(t * 20, np.round(t * 20), atol=1e-5)
    u = np.asarray(flow.sample_midpoint_times(jax.random.PRNGKey(0), (4000,), 10, "uniform"))
    assert 0.0 <= u.min() and u.max() < 1.0 and np.unique(u).size > 3900


# ----- the ratio approximation ----------------------------------------------------------------


def _shifted(params, direction, delta):
    new = jax.tree.map(lambda p, d: p + delta * d, params, direction)
    new["velocity"]["params"]["fourier_freqs"] = params["velocity"]["params"]["fourier_freqs"]
    return dict(new, log_std=params["log_std"])


def test_ratio_approximation_tracks_exact_shift():
    """1-D flow (TwoModes, default network with 32 x 32 hidden), a non-trivial old flow and a
    small random parameter change theta + delta d, sigma = sigma_old = 0.3, 1024 fixed z.

    Exact: the policy's end point is the K = 10 midpoint map, so for the stored z the new end
    point is `a_hat + Delta` with `Delta = phi_new(z) - phi_old(z)` (both integrated), and the
    exact joint (z, a) log-ratio is `log N(n; Delta, s^2) - log N(n; 0, s^2)` (z's density does
    not depend on theta). Approximation: `dv` at one grid time per sample (what training uses),
    and its average over the 19 grid times (a quadrature of the time integral of the velocity
    change). Seen (2 CPU runs, seeds fixed): relative RMS error of the log-ratio 0.35 / 0.38 with
    one t (correlation 0.95 / 0.94) and 0.055 / 0.055 grid-averaged, for delta 0.01 / 0.03
    (delta 0.1: 0.53 and 0.063). So a single t is a noisy but unbiased-looking estimate of the
    shift (the surrogate averages it over the batch), and the straight-path velocity difference
    does track the end-point shift. Tolerances: 0.6 (one t), 0.15 (averaged), correlation 0.85.
    The marginal ratio p_new(a) / p_old(a) (a Monte Carlo mixture over 1024 z) is a different,
    much flatter quantity (RMS log-ratio 0.039 vs 0.124 at delta 0.01): PolicyFlow's ratio is
    that of the z-augmented policy, not of the action marginal.
    """
    agent, _, _ = _build("TwoModes", output_init_scale=1.0)
    old = agent.init_policy(jax.random.PRNGKey(0), jnp.zeros((1, 1)))
    leaves, tree = jax.tree.flatten(old)
    keys = jax.random.split(jax.random.PRNGKey(1), len(leaves))
    direction = jax.tree.unflatten(tree, [jax.random.normal(k, x.shape) * (jnp.std(x) + 1e-2)
                                          for k, x in zip(keys, leaves, strict=True)])
    n_samples, sigma = 1024, 0.3
    obs = jnp.ones((n_samples, 1))
    z = jax.random.normal(jax.random.PRNGKey(2), (n_samples, 1))
    noise = sigma * jax.random.normal(jax.random.PRNGKey(3), (n_samples, 1))
    log_std = jnp.full((1,), math.log(sigma))
    a_hat = agent.sample(old, obs, z)
    assert float(jnp.std(a_hat)) > 0.5  # the old flow is not the identity

    def log_ratio(shift):
        return diag_gaussian_log_prob(noise, shift, log_std) - diag_gaussian_log_prob(noise, 0.0,
                                                                                  log_std)

    def dv(new, t):
        x_t = flow.interpolate(z, a_hat, t)
        return (agent.velocity(new, obs, x_t, t[..., 0])
                - agent.velocity(old, obs, x_t, t[..., 0]))

    def rel(x, y):
        return float(jnp.sqrt(jnp.mean(jnp.square(x - y))) / jnp.sqrt(jnp.mean(jnp.square(y))))

    t_one = flow.sample_midpoint_times(jax.random.PRNGKey(4), (n_samples, 1), 10, "grid")
    grid = jnp.arange(1, 20, dtype=jnp.float32) / 20.0
    for delta in (0.01, 0.03):
        new = _shifted(old, direction, delta)
        exact = log_ratio(agent.sample(new, obs, z) - a_hat)
        one = log_ratio(dv(new, t_one))
        avg = log_ratio(jnp.mean(jnp.stack([dv(new, jnp.full((n_samples, 1), g))
                                            for g in grid]), axis=0))
        assert float(jnp.sqrt(jnp.mean(jnp.square(exact)))) > 0.05  # a real change
        assert rel(one, exact) < 0.6 and rel(avg, exact) < 0.15, (rel(one, exact),
                                                                  rel(avg, exact))
        assert float(jnp.corrcoef(one[:, None].T, exact[:, None].T)[0, 1]) > 0.85


# ----- settings, acting, parameters -----------------------------------------------------------


@pytest.mark.parametrize("over,match", [
    (dict(flow_steps=0), "positive integer"), (dict(flow_steps=-2), "positive integer"),
    (dict(sampler="rk4"), "sampler"), (dict(t_sampling="gridd"), "Did you mean 'grid'"),
    (dict(reduction="mean"), "reduction"), (dict(time_dim=12), "multiple of 8"),
    (dict(log_std_min=1.0, log_std_max=0.0), "below"), (dict(brownian_coef=-1.0), "brownian"),
    (dict(output_init_scale=-0.1), "output_init_scale"),
])
def test_validate_rejects_bad_settings(over, match):
    with pytest.raises(ValueError, match=match):
        _build(**over)


def test_deterministic_act_is_deterministic():
    agent, env, spec = _build(output_init_scale=0.5)
    state, traj = _rollout(agent, env, spec, steps=2)
    obs = traj.obs[0]
    a1, ex = agent.act(state, obs, jax.random.PRNGKey(1), True)
    a2, _ = agent.act(state, obs, jax.random.PRNGKey(2), True)
    assert ex == {} and np.array_equal(np.asarray(a1), np.asarray(a2))
    norm = agent.core.policy_in(agent.core.normalize(state.obs_stats, obs))
    want = jnp.tanh(agent.sample(state.params["policy"], norm, jnp.zeros_like(a1)))
    np.testing.assert_allclose(np.asarray(a1), np.asarray(want), atol=1e-6)
    s1, _ = agent.act(state, obs, jax.random.PRNGKey(1), False)
    s2, _ = agent.act(state, obs, jax.random.PRNGKey(2), False)
    assert not np.allclose(np.asarray(s1), np.asarray(s2))


def test_update_keeps_fourier_frequencies_and_moves_the_rest():
    agent, env, spec = _build(learning_rate=1e-3)
    state, traj = _rollout(agent, env, spec)
    new, metrics = jax.jit(agent.update)(state, traj, jax.random.PRNGKey(2))
    old_p, new_p = state.params["policy"], new.params["policy"]
    freqs = lambda p: np.asarray(p["velocity"]["params"]["fourier_freqs"])  # noqa: E731
    assert np.array_equal(freqs(old_p), freqs(new_p))
    assert not np.allclose(np.asarray(old_p["log_std"]), np.asarray(new_p["log_std"]))
    assert all(np.isfinite(float(v)) for v in metrics.values())
    assert float(metrics["train/approx_kl"]) > 0.0 and float(metrics["train/brownian_loss"]) > 0


def test_twomodes_preset_learns_both_modes():
    """TwoModes: reward 1 at a = +-0.7, ~0 at a = 0. After the preset's training the
    deterministic eval action (z = 0) sits on a mode, and stochastic samples put mass near both
    modes (seen: 39% within 0.2 of -0.7, 59% of +0.7; with brownian_coef 0.01 79% / 18%)."""
    preset = configs.get("policyflow-twomodes-cpu")
    cfg = dataclasses.replace(preset.train, num_seeds=1)
    res = runner.train("policyflow", "TwoModes", cfg,
                       preset.agent_config, progress=False)
    assert res.records[-1]["eval/episode_return"] > 0.8, res.records
    agent, _, _ = runner.build("policyflow", "TwoModes", cfg,
                               preset.agent_config)
    state = jax.tree.map(lambda x: x[0], res.runner.agent_state)
    actions, _ = agent.act(state, jnp.ones((4000, 1)), jax.random.key(7), False)
    a = np.asarray(actions[:, 0])
    reward = np.exp(-np.square((np.abs(a) - 0.7) / 0.15))
    assert reward.mean() > 0.6, reward.mean()
    low, high = np.mean(np.abs(a + 0.7) < 0.2), np.mean(np.abs(a - 0.7) < 0.2)
    assert min(low, high) > 0.2 and low + high > 0.8, (low, high)


# ----- learning -------------------------------------------------------------------------------


@pytest.mark.slow
def test_policyflow_learns_cartpole_balance():
    """`policyflow-dmc-cpu` on CartpoleBalance (deterministic eval, 64 episodes of 1000 steps):
    the best eval over the run.

    A random policy scores about 250-350. Seen with this preset after 3M steps: seed 0 999.4
    (this test: 257 s wall with 75 s compile on 2 loaded CPU cores), seeds 1 and 2 986 and
    975; with entropy_coef 0.01 one seed stalled at 683, so 700 would catch a regression to that
    stall. The threshold 800 is far above any non-learning policy and below every seed seen.
    """
    preset = configs.get("policyflow-dmc-cpu")
    start = time.time()
    result = runner.train("policyflow", "CartpoleBalance", preset.train,
                          preset.agent_config, progress=False)
    returns = [round(r["eval/episode_return"], 1) for r in result.records]
    print(f"wall {time.time() - start:.0f} s, compile {result.compile_seconds:.0f} s, "
          f"evals {returns}")
    # The best eval, as the other learning tests judge: on an AVX2 CPU (other float rounding)
    # this seed reached 975 at chunk 3 and ended at 483 (evals 431, 421, 975, 865, 761, 663, ...).
    assert max(returns) >= 800.0, returns
