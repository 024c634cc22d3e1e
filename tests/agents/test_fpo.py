"""FPO: the stored-pair ratio is exactly 1 before any step, deterministic mode, FPO++ switches,
bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import configs
from jaxrl.agents import FPOConfig
from jaxrl.engine import loop, rollout
from jaxrl.learning import running_stats
from jaxrl.run import runner

TRAIN = configs.get("ppo-toy-cpu").train
SMALL = {"policy_hidden": (16, 16), "value_hidden": (16, 16), "num_minibatches": 4,
         "num_epochs": 2, "flow_steps": 4, "num_mc": 3, "reward_scaling": 1.0}


def _setup(**over):
    agent_cfg = FPOConfig(**dict(SMALL, **over))
    agent, env, spec = runner.build("fpo", "PointMass1D", TRAIN, agent_cfg)
    init, _ = loop.make_train(agent, env)
    r = init(jax.random.PRNGKey(0), agent.default_hp())
    tenv = loop.make_env(env, TRAIN)
    policy = lambda o, k: agent.act(r.agent_state, o, k, False)  # noqa: E731
    _, traj = rollout.rollout(tenv, policy, r.env_state, jax.random.PRNGKey(1), 8)
    return agent, r, traj


@pytest.mark.parametrize("over", [{}, {"per_sample_ratio": True, "trust_region": "aspo"},
                                  {"sampler": "midpoint", "cfm_loss": "u_mse",
                                   "discrete_times": False}])
def test_ratio_is_exactly_one_with_the_behaviour_parameters(over):
    agent, r, traj = _setup(normalize_after_sgd=True, **over)
    state = r.agent_state
    assert traj.extras["cfm_eps"].shape == (8, TRAIN.num_envs, 3, 1)
    assert traj.extras["cfm_t"].shape == (8, TRAIN.num_envs, 3, 1)
    assert traj.extras["cfm_old"].shape == (8, TRAIN.num_envs, 3)
    np.testing.assert_allclose(jnp.tanh(traj.extras["raw_action"]), traj.action, atol=1e-6)
    _, metrics = agent.core.loss(state.params, state.obs_stats, traj, jax.random.PRNGKey(0),
                             state.hp)
    # The same losses, recomputed in another compiled program: equal up to float rounding.
    new = agent.cfm_losses(state.params["policy"], agent.core.normalize(state.obs_stats, traj.obs),
                           traj.extras["raw_action"], traj.extras["cfm_eps"],
                           traj.extras["cfm_t"])
    np.testing.assert_allclose(new, traj.extras["cfm_old"], rtol=1e-6, atol=1e-7)
    assert float(metrics["train/ratio_mean"]) == pytest.approx(1.0, abs=1e-6)
    assert float(metrics["train/approx_kl"]) < 1e-12
    assert float(metrics["train/clip_fraction"]) == 0.0
    # other policy parameters move the ratio off 1
    params = dict(state.params, policy=jax.tree.map(lambda p: p + 0.05, state.params["policy"]))
    _, metrics = agent.core.loss(params, state.obs_stats, traj, jax.random.PRNGKey(0), state.hp)
    assert float(metrics["train/approx_kl"]) > 1e-6


def test_training_times_are_on_the_sampler_grid():
    _, _, traj = _setup()
    t = np.unique(np.round(np.asarray(traj.extras["cfm_t"]), 6))
    assert set(t.tolist()) <= {0.0, 0.25, 0.5, 0.75}


def test_deterministic_mode_integrates_from_zero_noise():
    agent, r, traj = _setup()
    state = r.agent_state
    obs = traj.obs[0]
    a1, ex = agent.act(state, obs, jax.random.PRNGKey(3), True)
    a2, _ = agent.act(state, obs, jax.random.PRNGKey(4), True)
    assert ex == {}
    np.testing.assert_array_equal(a1, a2)
    normalized = agent.core.normalize(state.obs_stats, obs)
    x = agent.sample(state.params["policy"], normalized, None, jnp.zeros_like(a1), None)
    np.testing.assert_allclose(a1, jnp.tanh(x), atol=1e-7)
    sampled, _ = agent.act(state, obs, jax.random.PRNGKey(3), False)
    assert not np.allclose(sampled, a1)
    info = agent.export_info()
    assert info["integration_steps"] == 4 and info["deterministic"] is True
    assert info["initial_noise"] == "zeros"


def test_sde_noise_changes_rollout_actions_only():
    agent, r, traj = _setup(sde_sigma=0.3)
    quiet, _, _ = _setup()
    state = r.agent_state
    obs = traj.obs[0]
    noisy, _ = agent.act(state, obs, jax.random.PRNGKey(5), False)
    plain, _ = quiet.act(state, obs, jax.random.PRNGKey(5), False)
    assert not np.allclose(noisy, plain)
    np.testing.assert_array_equal(agent.act(state, obs, jax.random.PRNGKey(5), True)[0],
                                  quiet.act(state, obs, jax.random.PRNGKey(5), True)[0])


def test_an_update_improves_the_surrogate_and_stays_finite():
    agent, r, traj = _setup(trust_region="aspo", per_sample_ratio=True)
    state = r.agent_state.replace(obs_stats=running_stats.update(r.agent_state.obs_stats,
                                                                 traj.obs))
    new, metrics = jax.jit(agent.update)(state, traj, jax.random.PRNGKey(2))
    assert all(np.isfinite(float(v)) for v in metrics.values())
    assert int(new.num_updates) == 1
    assert float(metrics["train/cfm_loss"]) > 0.0


@pytest.mark.parametrize("over,match", [
    ({"flow_steps": 0}, "positive integer"),
    ({"flow_steps": -2}, "positive integer"),
    ({"num_mc": 0}, "num_mc"),
    ({"sampler": "rk4"}, "flow sampler must be one of euler, midpoint"),
    ({"trust_region": "aspo2"}, "Did you mean 'aspo'"),
    ({"cfm_loss": "eps"}, "cfm_loss must be one of"),
    ({"sde_sigma": -0.1}, "sde_sigma"),
])
def test_bad_settings_fail_before_compiling(over, match):
    with pytest.raises(ValueError, match=match):
        runner.build("fpo", "PointMass1D", TRAIN, FPOConfig(**dict(SMALL, **over)))
