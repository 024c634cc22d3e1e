"""PPO pieces: ratio identity, degenerate minibatches, minibatch layout, toy learning."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import configs
from jaxrl.agents.common.onpolicy import minibatches as _minibatches
from jaxrl.engine import loop, rollout
from jaxrl.engine.types import Transition
from jaxrl.run import runner

PRESET = configs.get("ppo-toy-cpu")


def _setup(**over):
    agent_cfg = dataclasses.replace(PRESET.agent_config, **over)
    agent, env, spec = runner.build("ppo", "PointMass1D", PRESET.train, agent_cfg)
    init, _ = loop.make_train(agent, env)
    r = init(jax.random.PRNGKey(0), agent.default_hp())
    tenv = loop.make_env(env, PRESET.train)
    policy = lambda o, k: agent.act(r.agent_state, o, k, False)  # noqa: E731
    _, traj = rollout.rollout(tenv, policy, r.env_state, jax.random.PRNGKey(1), 16)
    return agent, r, traj


def test_first_minibatch_ratio_is_one_with_normalize_after_sgd():
    agent, r, traj = _setup(normalize_after_sgd=True)
    state = r.agent_state
    # Make the normalizer non-trivial first, then collect with it: ratio must be exactly 1.
    from jaxrl.learning import running_stats

    state = state.replace(obs_stats=running_stats.update(state.obs_stats, traj.obs))
    policy = agent.policy(state.params["policy"], agent.core.normalize(state.obs_stats, traj.obs))
    old = policy.log_prob_raw(traj.extras["raw_action"])
    traj = traj.replace(extras=dict(traj.extras, log_prob=old))
    _, metrics = agent.core.loss(state.params, state.obs_stats, traj, jax.random.PRNGKey(0),
                             state.hp)
    assert abs(float(metrics["train/approx_kl"])) < 1e-6
    assert float(metrics["train/clip_fraction"]) == 0.0


def test_degenerate_minibatch_stays_finite():
    agent, r, traj = _setup()
    tiny = jax.tree.map(lambda x: x[:, :1], traj)  # one trajectory
    const = tiny.replace(reward=jnp.full_like(tiny.reward, 2.0))
    for mb in (tiny, const):
        loss, m = agent.core.loss(r.agent_state.params, r.agent_state.obs_stats, mb,
                              jax.random.PRNGKey(0), r.agent_state.hp)
        assert np.isfinite(float(loss))


def test_minibatches_keep_whole_trajectories():
    t_len, b = 4, 6
    ids = jnp.broadcast_to(jnp.arange(b, dtype=jnp.float32), (t_len, b))
    tr = Transition(obs=ids, action=ids, reward=ids, terminated=ids, truncated=ids, next_obs=ids)
    mbs = _minibatches(tr, jax.random.PRNGKey(0), 3)
    assert mbs.reward.shape == (3, t_len, 2)
    for m in range(3):  # every column of a minibatch is one trajectory id, constant over time
        assert np.all(np.asarray(mbs.reward[m]) == np.asarray(mbs.reward[m, :1]))
    assert sorted(np.asarray(mbs.reward[:, 0]).ravel().tolist()) == list(range(b))


@pytest.fixture(scope="module")
def toy_run():
    cfg = dataclasses.replace(PRESET.train, num_seeds=1)
    return runner.train("ppo", "PointMass1D", cfg, PRESET.agent_config,
                        progress=False)


def test_ppo_learns_toy_point_mass(toy_run):
    """A zero-action policy scores about 60 (the mass stays where it starts, |x0| ~ U(0, 1)); a
    good policy brings it to the origin and holds it (about 90). The first chunk's training
    episodes, collected while learning starts, score about 45."""
    final = toy_run.records[-1]["eval/episode_return"]
    assert final > 80.0, toy_run.records
    first_train = toy_run.records[0]["episode/return"]
    assert toy_run.records[-1]["episode/return"] > first_train + 20.0, toy_run.records
