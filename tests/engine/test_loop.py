"""One program: chunked driver == fused mode; seeds differ; same seed reproduces; hp sweep."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import configs
from jaxrl.engine import loop
from jaxrl.run import runner

PRESET = configs.get("ppo-toy-cpu")
CFG = dataclasses.replace(PRESET.train, total_env_steps=3 * 64 * 16, num_chunks=3,
                          num_eval_envs=0)
AGENT_CFG = PRESET.agent_config


@pytest.fixture(scope="module")
def built():
    agent, env, spec = runner.build("ppo", "PointMass1D", CFG, AGENT_CFG)
    return agent, env, spec


def _leaves(tree):
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


@pytest.fixture(scope="module")
def chunked(built):
    cfg = dataclasses.replace(CFG, num_seeds=2)
    return runner.train("ppo", "PointMass1D", cfg, AGENT_CFG, run_dir=None, progress=False)


@pytest.fixture(scope="module")
def fused(built):
    agent, env, spec = built
    keys = runner.seed_keys(dataclasses.replace(CFG, num_seeds=2))
    return loop.train_fused(agent, env, keys, runner.stack_hp(agent.default_hp(), 2))


def test_chunked_equals_fused(chunked, fused):
    runner_f, metrics_f = fused
    for a, b in zip(_leaves(chunked.runner.agent_state.params),
                    _leaves(runner_f.agent_state.params), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    assert metrics_f["train/policy_loss"].shape == (2, CFG.num_chunks)
    np.testing.assert_allclose(metrics_f["train/value_loss"][:, -1].mean(),
                               chunked.records[-1]["train/value_loss"], rtol=1e-4)


def test_seeds_differ_and_repeat(built, fused):
    runner_f, _ = fused
    p = _leaves(runner_f.agent_state.params)
    assert any(not np.allclose(x[0], x[1]) for x in p)  # two seeds, one call: different
    agent, env, spec = built
    keys = jnp.stack([jax.random.PRNGKey(0)] * 2)  # seed 0 twice
    again, _ = loop.train_fused(agent, env, keys,
                                runner.stack_hp(agent.default_hp(), 2))
    for x in _leaves(again.agent_state.params):
        np.testing.assert_array_equal(x[0], x[1])  # same seed twice: identical
    for x, y in zip(_leaves(again.agent_state.params), p, strict=True):
        np.testing.assert_array_equal(x[0], y[0])  # and identical to the first call's seed 0


def test_hp_grid_in_one_program(built):
    agent, env, spec = built
    hps = runner.stack_hp(agent.default_hp(), 3)
    hps["learning_rate"] = jnp.array([0.0, 1e-3, 3e-3])
    keys = jnp.stack([jax.random.PRNGKey(0)] * 3)
    out, metrics = loop.train_fused(agent, env, keys, hps)
    init_params = jax.jit(jax.vmap(lambda k, h: agent.init(jax.random.split(k, 3)[0], h))
                          )(keys, hps).params
    w0 = _leaves(init_params)[0]
    w = _leaves(out.agent_state.params)[0]
    np.testing.assert_array_equal(w[0], w0[0])  # lr 0: params unchanged
    assert not np.allclose(w[1], w0[1]) and not np.allclose(w[1], w[2])
    assert np.all(np.isfinite(metrics["train/total_loss"]))


def test_step_accounting():
    gpu = configs.get("ppo-dmc-gpu").train
    assert gpu.env_steps_per_iteration == 983_040  # 2048 envs x 30 steps x 16 unrolls
    cfg = dataclasses.replace(gpu, num_chunks=10, total_env_steps=60_000_000)
    assert cfg.real_total_env_steps == 10 * 7 * 983_040
    assert cfg.real_total_env_steps >= 60_000_000
