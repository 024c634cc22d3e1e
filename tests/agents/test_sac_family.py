"""SAC family: hand-computed DSAC-T numbers, truncated Gaussians, FlashSAC normalization, entropy
targets, bad input, and every agent for two chunks on a toy env (specs/sac_family.md tests)."""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import configs
from jaxrl.engine import loop
from jaxrl.engine.contract import lookup
from jaxrl.learning import distributions, losses, networks, optim, replay
from jaxrl.learning.losses import clip_sample_target, dsac_t_loss, update_wbar
from jaxrl.run import runner


@pytest.mark.parametrize("b, dq, dsigma", [(0.0, -0.5, -0.625), (0.1, -0.536585, -0.679012)])
def test_dsac_t_gradients(b, dq, dsigma):
    def loss(q, sigma):
        qa, sa = jnp.array([q]), jnp.array([sigma])
        return dsac_t_loss(qa, sa, qa, sa, jnp.array([3.0]), jnp.array([4.0]), 1.0, b)

    gq, gs = jax.grad(loss, argnums=(0, 1))(1.0, 2.0)
    np.testing.assert_allclose([gq, gs], [dq, dsigma], atol=1e-6)


def test_dsac_t_clip_and_ema():
    assert float(clip_sample_target(0.0, 10.0, 1.0)) == 3.0
    assert float(clip_sample_target(0.0, -10.0, 1.0)) == -3.0
    np.testing.assert_allclose(update_wbar(jnp.array(1.0), 2.0, 0.005), 1.005, rtol=1e-6)
    assert float(update_wbar(jnp.array(-1.0), 2.0, 0.005)) == 2.0  # unset: first batch mean


def test_centred_tanh_target_action():
    mu, sigma, c = jnp.array([0.2]), jnp.array([0.5]), 0.01
    u = jnp.array([0.5])
    a = distributions.centred_tanh_action(u, mu, c)
    lp = distributions.centred_tanh_log_prob(u, mu, sigma, c)
    np.testing.assert_allclose(a, [0.2029131], atol=1e-7)
    np.testing.assert_allclose(lp, 4.288060, atol=1e-5)
    jac = jax.grad(lambda x: distributions.centred_tanh_action(x, mu, c).sum())(u)
    ref = distributions.gaussian_log_prob(u, mu, sigma) - jnp.log(jnp.abs(jac)).sum()
    np.testing.assert_allclose(lp, ref, atol=1e-5)
    a, _ = distributions.centred_tanh_sample(jax.random.PRNGKey(0), jnp.full((100_000, 1), 0.2),
                                             jnp.full((100_000, 1), 0.5), c)
    assert float(jnp.max(jnp.abs(a - 0.2))) < c


def test_truncated_gaussian_density_samples_entropy():
    loc, scale, low, high = jnp.array([0.4]), jnp.array([0.2]), -0.3, 0.5
    xs = jnp.linspace(low, high, 200_001)[:, None]
    lp = distributions.truncated_log_prob(xs, loc, scale, low, high)
    np.testing.assert_allclose(jnp.trapezoid(jnp.exp(lp), xs[:, 0]), 1.0, atol=1e-5)
    ent = distributions.truncated_entropy(loc, scale, low, high)
    np.testing.assert_allclose(ent, -jnp.trapezoid(jnp.exp(lp) * lp, xs[:, 0]), atol=1e-4)
    s = distributions.truncated_sample(jax.random.PRNGKey(1), jnp.full((100_000, 1), 0.4),
                                       jnp.full((100_000, 1), 0.2), low, high)
    assert float(s.min()) >= low and float(s.max()) <= high
    # The sample mean matches the density's mean.
    np.testing.assert_allclose(s.mean(), jnp.trapezoid(jnp.exp(lp) * xs[:, 0], xs[:, 0]),
                               atol=3e-3)
    assert float(distributions.truncated_log_prob(jnp.array([0.6]), loc, scale, low, high)) == \
        -np.inf
    assert float(distributions.truncated_mode(jnp.array(0.9), low, high)) == high


def test_flash_target_entropy_and_alpha_gradient():
    cfg = configs.get("sac-toy-cpu").train
    agent_cls, cfg_cls = lookup("sac")
    small = cfg_cls(learning_starts=64, buffer_size=4096, batch_size=32)
    spec = dataclasses.replace(runner.build("sac", "PointMass1D", cfg, small)[2],
                               action_size=12)
    agent = agent_cls(config=cfg_cls(target_entropy="flash"), spec=spec, train=cfg)
    target = agent.core.target_entropy()
    np.testing.assert_allclose(target, -5.738177, atol=1e-5)
    np.testing.assert_allclose(target / 12, -0.478181, atol=1e-6)
    # The temperature step (Eq. 18) leaves alpha where the policy's entropy is the target,
    # lowers it above the target and raises it below.
    opt = optim.make_optimizer()
    def step(log_prob):
        return float(losses.temperature_step(opt, opt.init(jnp.zeros(())), jnp.asarray(0.3),
                                             jnp.full(8, log_prob), target, 0.1)[0])
    assert step(-target) == np.float32(0.3)
    assert step(-target + 1.0) > 0.3 > step(-target - 1.0)


def test_weight_projection_after_an_optimizer_step():
    enc = networks.NormalizedEncoder(hidden=16, num_blocks=2)
    x = jax.random.normal(jax.random.PRNGKey(0), (32, 5))
    variables = enc.init(jax.random.PRNGKey(1), x, True)
    grads = jax.tree.map(lambda p: jnp.ones_like(p) * 0.3, variables["params"])
    stepped = jax.tree.map(lambda p, g: p - g, variables["params"], grads)
    proj = networks.project_weights(stepped)
    for name, sub in proj.items():
        if name.startswith("UnitDense"):
            np.testing.assert_allclose(jnp.linalg.norm(sub["kernel"], axis=0), 1.0, atol=1e-6)
        elif name.startswith("BatchNorm"):
            d = sub["scale"].shape[-1]
            both = jnp.concatenate([sub["scale"], sub["bias"]])
            np.testing.assert_allclose(jnp.linalg.norm(both), math.sqrt(d), rtol=1e-6)
        elif name.startswith("RMSNorm"):
            np.testing.assert_allclose(jnp.linalg.norm(sub["scale"]), math.sqrt(16), rtol=1e-6)
    assert any(k.startswith("UnitDense") for k in proj)


def test_cross_batch_bn_couples_halves_only_in_training_mode():
    q = networks.ensemble(networks.QHead, 2)(hidden=(16,), kind="categorical", num_atoms=5,
                                             normalized=True)
    k = jax.random.split(jax.random.PRNGKey(0), 4)
    s, a = jax.random.normal(k[0], (8, 3)), jax.random.normal(k[1], (8, 2))
    s2, a2 = jax.random.normal(k[2], (8, 3)), jax.random.normal(k[3], (8, 2))
    variables = q.init(k[0], s, a, False)

    def first_half(next_obs, train):
        out = q.apply(variables, jnp.concatenate([s, next_obs]), jnp.concatenate([a, a2]),
                      train, mutable=["batch_stats"] if train else False)
        return (out[0] if train else out)[:, :8]

    assert not np.allclose(first_half(s2, True), first_half(s2 + 1.0, True))
    np.testing.assert_array_equal(first_half(s2, False), first_half(s2 + 1.0, False))


def _toy_cfg(num_seeds: int = 1):
    return dataclasses.replace(configs.get("sac-toy-cpu").train, num_chunks=2,
                               total_env_steps=2 * 16 * 4 * 40, num_seeds=num_seeds)


AGENT_SETTINGS = {
    "sac": {},
    "fastdsac": {"actor_hidden": (32, 32), "critic_hidden": (32, 32)},
    "warpsac": {"actor_hidden": (16,), "critic_hidden": (16,)},
    "warpsac-a": {"actor_hidden": (32, 32), "critic_hidden": (32, 32), "normalized_nets": False,
                  "num_q": 1, "obs_dtype": "bfloat16", "normalize_observations": True,
                  "swd_decay_steps": 50.0},
}


@pytest.mark.parametrize("name", [  # `sac` in the quick loop; the profiles in the default suite
    pytest.param(n, marks=() if n == "sac" else pytest.mark.slow) for n in AGENT_SETTINGS])
def test_agent_two_chunks_on_toy_env(name):
    agent_name = "warpsac" if name == "warpsac-a" else name
    cfg = _toy_cfg(num_seeds=2)  # the fused sweep mode: one buffer per seed
    overrides = dict(actor_hidden=(32, 32), critic_hidden=(32, 32), buffer_size=4096,
                     learning_starts=256, batch_size=64)
    overrides.update(AGENT_SETTINGS[name])
    agent_cfg = lookup(agent_name)[1](**overrides)
    agent, env, spec = runner.build(agent_name, "PointMass1D", cfg, agent_cfg)
    keys = runner.seed_keys(cfg)
    final, metrics = loop.train_fused(agent, env, keys,
                                      runner.stack_hp(agent.default_hp(), 2))
    state = final.agent_state
    steps = cfg.real_total_env_steps
    for seed in range(2):
        buffer = jax.tree.map(lambda x, s=seed: x[s], state.buffer)
        assert int(buffer.clock) * 16 == steps  # every env step was written, rows of 16 envs
        assert int(replay.num_transitions(buffer)) == min(steps, 4096)  # full buffers wrap
    assert state.buffer.data["obs"].shape == (2, 4096 // 16, 16, 2)  # [S, C, N, obs]
    assert not np.array_equal(state.buffer.data["action"][0], state.buffer.data["action"][1])
    if name == "warpsac-a":
        assert state.buffer.data["obs"].dtype == jnp.bfloat16
    for k in ("train/critic_loss", "train/actor_loss", "train/alpha", "train/q_mean"):
        assert metrics[k].shape == (2, 2)
        assert np.isfinite(np.asarray(metrics[k])).all(), k
    # Gradient steps happened once the buffer held learning_starts transitions.
    per_call = agent.core.replay.updates_per_call
    expected = (steps - 256) // (16 * 4) * per_call
    assert np.all(np.abs(np.asarray(state.num_updates) - expected) <= per_call)
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(state.params))


@pytest.mark.parametrize("overrides, match", [
    ({"batch_size": 20_000}, "batch_size"),
    ({"utd_ratio": 0.0}, "utd_ratio"),
    ({"utd_ratio": 0.3}, "whole number"),
    ({"critic_type": "gaussion"}, "critic_type"),
    ({"critic_type": "categorical", "v_min": 5.0, "v_max": -5.0}, "v_min < v_max"),
    ({"truncation": "brax", "n_step": 3}, "n_step"),
    ({"gamma": float("nan")}, "gamma"),
    ({"activation": "foo"}, "activation"),
    ({"log_std_min": 3.0, "log_std_max": -3.0}, "log_std_min"),
    ({"learning_starts": 1_000_000}, "no gradient step"),
])
def test_bad_input_raises_before_compiling(overrides, match, monkeypatch):
    monkeypatch.setattr(loop, "make_train", lambda *a, **k: pytest.fail("compiled"))
    cfg = _toy_cfg()
    with pytest.raises(ValueError, match=match):
        runner.build("sac", "PointMass1D", cfg, lookup("sac")[1](**overrides))


def test_each_sac_family_class_accepts_only_what_it_implements():
    """FastDSAC's critic is always the Gaussian one and its log-std bounds come from
    `std_bound_mode`: its config has no `critic_type` or `log_std_min/max`; SAC has no Gaussian
    critic."""
    fields = {f.name for f in dataclasses.fields(lookup("fastdsac")[1])}
    assert not fields & {"critic_type", "num_atoms", "v_min", "v_max", "log_std_min",
                         "log_std_max"}
    with pytest.raises(ValueError, match="critic_type must be one of scalar, categorical"):
        runner.build("sac", "PointMass1D", _toy_cfg(),
                     lookup("sac")[1](critic_type="gaussian"))


def test_distributional_clipped_double_q_takes_the_lower_head():
    """E[Z1] = 1 < E[Z2] = 2, so the target is the projection of head 1."""
    z = np.linspace(-10, 10, 21)
    big = 50.0  # near one-hot logits
    logits = jnp.stack([jnp.where(z == 1.0, big, 0.0), jnp.where(z == 2.0, big, 0.0)])[:, None]
    target = losses.categorical_td_target(logits, jnp.zeros(1), jnp.ones(1), jnp.zeros(1),
                                          -10.0, 10.0, "min")
    np.testing.assert_allclose(target[0], np.where(z == 1.0, 1.0, 0.0), atol=1e-6)
    mixed = losses.categorical_td_target(logits, jnp.zeros(1), jnp.ones(1), jnp.zeros(1),
                                         -10.0, 10.0, "mean")
    np.testing.assert_allclose(mixed[0], np.where((z == 1.0) | (z == 2.0), 0.5, 0.0), atol=1e-6)


def test_ppo_unknown_activation_raises_before_compiling(monkeypatch):
    monkeypatch.setattr(loop, "make_train", lambda *a, **k: pytest.fail("compiled"))
    with pytest.raises(ValueError, match="activation must be one of"):
        runner.build("ppo", "PointMass1D", configs.get("ppo-toy-cpu").train,
                     lookup("ppo")[1](activation="foo", num_minibatches=4))
