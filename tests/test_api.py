"""The public API (`import jaxrl`): lazy import, presets and overrides, and the same results as
the functions it composes."""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest
from tree_helpers import assert_trees_equal

import jaxrl
from jaxrl.run import checkpoint, evaluation, runner

SMALL = {"total_env_steps": 4096, "num_chunks": 2, "num_envs": 32, "num_eval_envs": 8}


def test_import_is_lazy():
    code = ("import sys, jaxrl; assert 'jax' not in sys.modules, 'jax imported'; "
            "jaxrl.TrainConfig; assert 'jax' in sys.modules; print(jaxrl.__version__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd="/", check=True)
    assert out.stdout.strip() == jaxrl.__version__
    assert set(jaxrl.__all__) <= set(dir(jaxrl))
    for name in jaxrl.__all__:
        assert getattr(jaxrl, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'trian'"):
        jaxrl.trian  # noqa: B018


def test_resolve_preset_and_overrides():
    agent, env, cfg, agent_cfg, run = jaxrl.resolve("ppo-toy-cpu", total_env_steps=1234,
                                                    learning_rate=0.5, seed=7)
    preset = jaxrl.get_preset("ppo-toy-cpu")
    assert (agent, env) == (preset.agent, preset.env)
    assert cfg.total_env_steps == 1234 and cfg.num_envs == preset.train.num_envs
    assert agent_cfg.learning_rate == 0.5 and run == jaxrl.RunConfig(seed=7)
    assert jaxrl.resolve("pql-cheetah-cpu")[4].max_train_seconds == 1800.0  # the preset's
    assert agent_cfg.value_hidden == dict(preset.agent_overrides)["value_hidden"]
    # another agent on the preset's env starts from that agent's defaults
    _, _, _, sac_cfg, _ = jaxrl.resolve("ppo-toy-cpu", agent="sac")
    assert sac_cfg == jaxrl.SACConfig()
    with pytest.raises(ValueError, match="Did you mean learning_rate"):
        jaxrl.resolve("ppo-toy-cpu", learning_rat=1.0)
    with pytest.raises(ValueError, match="name a preset"):
        jaxrl.resolve(agent="ppo")
    with pytest.raises(ValueError, match="Unknown preset 'ppo-toy-cpy'.*ppo-toy-cpu"):
        jaxrl.resolve("ppo-toy-cpy")


def test_train_evaluate_resume_match_the_runner(tmp_path):
    run_dir = str(tmp_path / "api")
    result = jaxrl.train("ppo-toy-cpu", run_dir=run_dir, **SMALL)
    agent, env, cfg, agent_cfg, run = jaxrl.resolve("ppo-toy-cpu", **SMALL)
    direct = runner.train(agent, env, cfg, agent_cfg, progress=False, run=run)
    assert_trees_equal(result.runner.agent_state, direct.runner.agent_state)
    with open(os.path.join(run_dir, "config.json")) as f:
        assert json.load(f)["preset"] == "ppo-toy-cpu"

    summary = jaxrl.evaluate(run_dir, num_episodes=8)
    by_hand = evaluation.summarize_eval(
        evaluation.evaluate_run(checkpoint.load_run(run_dir), 8))
    assert summary == by_hand and summary["num_episodes"] == 8
    assert np.isfinite(summary["return_mean"])

    more = jaxrl.resume(run_dir, total_env_steps=2 * SMALL["total_env_steps"])
    assert more.env_steps == 2 * SMALL["total_env_steps"]
    assert jaxrl.load_run(run_dir).chunk == 4


def test_sweep_grid_names_checked(tmp_path):
    with pytest.raises(ValueError, match="static field"):
        jaxrl.sweep("ppo-toy-cpu", sweep_dir=str(tmp_path / "s"), grid={"num_epochs": [1, 2]})
    with pytest.raises(ValueError, match="Did you mean learning_rate"):
        jaxrl.sweep("ppo-toy-cpu", sweep_dir=str(tmp_path / "s"), grid={"learning_rat": [1.0]})
    result = jaxrl.sweep("ppo-toy-cpu", sweep_dir=str(tmp_path / "s"),
                         grid={"learning_rate": [1e-3, 3e-3]}, seeds=[0, 1], **SMALL)
    assert len(result.summary["members"]) == 4
    lrs = jax.device_get(result.runner.agent_state.hp["learning_rate"])
    np.testing.assert_allclose(lrs, [1e-3, 1e-3, 3e-3, 3e-3], rtol=1e-6)


def test_root_names_are_the_api():
    from jaxrl import api

    assert list(jaxrl._API) == api.__all__
