"""Robot presets (`configs/robots.py`): each resolves through the CLI and validates against its
env without compiling; the PPO GPU presets carry Playground's published `brax_ppo_config`
numbers; the Go1 and G1 CPU presets train 2 tiny chunks from the CLI (slow, still run in CI)
and log every reward term of the env per episode (`episode/reward/<term>` in metrics.jsonl).
"""

import dataclasses
import functools
import math
import os

import numpy as np
import pytest

from jaxrl import configs, envs
from jaxrl.configs import robots
from jaxrl.engine import contract, loop
from jaxrl.run import assemble, cli
from jaxrl.run.logging import read_jsonl

NAMES = tuple(robots.PRESET_NAMES)
# The quick loop (`-m "not slow"`) loads Go1 only; the other robots load (3-15 s each, no
# compile) in the default suite, as in `tests/envs/test_envs.py`.
QUICK_ENV = "Go1JoystickFlatTerrain"
PPO_GPU = [n for n in NAMES if n.startswith("ppo-") and n.endswith("-gpu")]
# Settings a CPU preset may change relative to its GPU preset (the batch layout only).
_MAKE, _MAKE_SPEC = envs.make, envs.make_spec  # before the validation test patches them (cached)
CPU_SIZES = {"num_envs", "unroll_length", "unrolls_per_update", "total_env_steps", "num_chunks",
             "num_eval_envs"}


@pytest.fixture
def no_compile(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("make_train was reached: validation must not compile")

    monkeypatch.setattr(loop, "make_train", boom)


@functools.cache
def _make(name, impl=None, episode_length=None):
    if name in envs.registry.unavailable():
        pytest.skip(f"{name} unavailable here: {envs.registry.unavailable()[name]}")
    return _MAKE(name, impl=impl, episode_length=episode_length)


@functools.cache
def _spec(name):
    return _MAKE_SPEC(_make(name), name)


def _obs_keys(config) -> set[str]:
    return {getattr(config, k) for k in ("policy_obs_key", "value_obs_key", "critic_obs_key")
            if hasattr(config, k)}


def test_pairs_share_algorithm_settings():
    """Every `-gpu` preset has a `-cpu` twin with the same agent, env, agent settings (but
    `num_minibatches`) and train settings (but the batch layout)."""
    assert len(NAMES) == len(set(NAMES)) >= 16
    for name in (n for n in NAMES if n.endswith("-gpu")):
        gpu, cpu = configs.get(name), configs.get(name[: -len("gpu")] + "cpu")
        assert (gpu.agent, gpu.env) == (cpu.agent, cpu.env)
        diff = {f.name for f in dataclasses.fields(gpu.train)
                if getattr(gpu.train, f.name) != getattr(cpu.train, f.name)}
        assert diff <= CPU_SIZES, (name, diff)
        if gpu.agent == "ppo":
            gpu_agent, cpu_agent = dict(gpu.agent_overrides), dict(cpu.agent_overrides)
            assert {k for k in gpu_agent if gpu_agent[k] != cpu_agent[k]} <= {"num_minibatches"}


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=() if configs.get(n).env == QUICK_ENV else pytest.mark.slow)
    for n in NAMES])
def test_preset_resolves_and_validates(name, monkeypatch, no_compile):
    """`jaxrl train --preset NAME` resolves (TrainConfig.validate), and `assemble.build` (env,
    spec, randomizer, agent.validate) passes; the obs keys exist in the env's dict obs; PPO
    presets randomize exactly the envs that have a Playground randomizer."""
    preset = configs.get(name)
    _, agent, env, cfg, agent_cfg = cli.resolve(["--preset", name])
    assert (agent, env, cfg) == (preset.agent, preset.env, preset.train)
    assert agent_cfg == contract.lookup(agent)[1](**dict(preset.agent_overrides))
    monkeypatch.setattr(envs, "make", _make)
    monkeypatch.setattr(envs, "make_spec", lambda e, n: _spec(n))
    built, _, spec = assemble.build(agent, env, cfg, agent_cfg)
    assert built.config == agent_cfg
    if spec.obs_is_dict:
        assert _obs_keys(agent_cfg) <= set(spec.obs_shape), (spec.obs_shape, agent_cfg)
    if agent == "ppo":  # as Playground trains them; the off-policy releases train without
        has_randomizer = _make(env).domain_randomizer() is not None
        assert (cfg.domain_randomization == "playground") == has_randomizer
    else:
        assert cfg.domain_randomization is None


def _playground_ppo_config(env):
    from mujoco_playground import registry
    from mujoco_playground.config import locomotion_params, manipulation_params

    suite = locomotion_params if env in registry.locomotion.ALL_ENVS else manipulation_params
    return suite.brax_ppo_config(env)


@pytest.mark.parametrize("name", PPO_GPU)
def test_gpu_preset_is_playgrounds_brax_ppo_config(name):
    """Field by field against the installed `mujoco_playground.config` (Brax defaults where
    Playground sets nothing: clip 0.3, no gradient clipping, 128 eval envs)."""
    preset = configs.get(name)
    rl, t, a = _playground_ppo_config(preset.env), preset.train, dict(preset.agent_overrides)
    net = rl.network_factory
    assert (t.num_envs, t.unroll_length, t.total_env_steps, t.num_chunks, t.action_repeat) == (
        rl.num_envs, rl.unroll_length, rl.num_timesteps, rl.num_evals, rl.action_repeat)
    assert t.unrolls_per_update * t.num_envs == rl.batch_size * rl.num_minibatches
    assert t.episode_length is None  # the env's default, which Playground passes as well
    assert t.num_eval_envs == rl.get("num_eval_envs", 128)
    assert (a["num_minibatches"], a["num_epochs"]) == (rl.num_minibatches,
                                                       rl.num_updates_per_batch)
    for ours, theirs in (("gamma", "discounting"), ("learning_rate", "learning_rate"),
                         ("entropy_cost", "entropy_cost"), ("reward_scaling", "reward_scaling")):
        assert math.isclose(a[ours], rl[theirs]), (ours, a[ours], rl[theirs])
    assert a["clipping_epsilon"] == rl.get("clipping_epsilon", 0.3)
    assert a["max_grad_norm"] == rl.get("max_grad_norm", None)
    assert a["normalize_observations"] == rl.normalize_observations
    assert a["policy_hidden"] == tuple(net.policy_hidden_layer_sizes)
    assert a["value_hidden"] == tuple(net.value_hidden_layer_sizes)
    if "policy_obs_key" in a:
        assert (a["policy_obs_key"], a["value_obs_key"]) == (net.policy_obs_key,
                                                             net.value_obs_key)
    else:
        assert net.value_obs_key == "state"


def _reward_config(env_name):
    """(reward term names, control step): Playground's reward is `dt * sum of the terms`."""
    from mujoco_playground import registry

    cfg = registry.get_default_config(env_name)
    return set(cfg.reward_config.scales), float(cfg.ctrl_dt)


def _train_tiny(name, run_dir):
    """2 chunks of 10 env steps in 8 envs, 10-step episodes (they end inside each chunk)."""
    cli.main(["train", "--preset", name, "--run-dir", str(run_dir), "--no-progress",
              "--num-envs", "8", "--unroll-length", "5", "--total-env-steps", "160",
              "--num-chunks", "2", "--num-eval-envs", "0", "--episode-length", "10",
              "--checkpoint-every", "2", "--ppo.num-minibatches", "2"])
    return read_jsonl(str(run_dir / "metrics.jsonl"))


@pytest.mark.slow
@pytest.mark.parametrize("name,clipped", [
    pytest.param("ppo-go1-flat-cpu", True, id="go1"),
    # G1 repeats Go1's path with another robot: JAXRL_TEST_ALL_ENVS=1 (the suite's time budget).
    pytest.param("ppo-g1-flat-cpu", False, id="g1", marks=pytest.mark.skipif(
        not os.environ.get("JAXRL_TEST_ALL_ENVS"), reason="set JAXRL_TEST_ALL_ENVS=1"))])
def test_cpu_preset_trains_and_logs_reward_terms_per_episode(name, clipped, tmp_path, capsys):
    """The preset as is (networks, privileged critic, Playground's randomizer) at tiny size:
    finite metrics, and each of the env's reward terms summed per finished episode, so that
    the return is `dt *` their total (Go1 clips each step's reward at 0: at least that)."""
    env = configs.get(name).env
    _make(env)  # skips when the robot's assets are not installed
    records = _train_tiny(name, tmp_path)
    assert "done:" in capsys.readouterr().out
    assert [r["chunk"] for r in records] == [1, 2]
    terms, dt = _reward_config(env)
    for rec in records:
        numbers = {k: v for k, v in rec.items() if isinstance(v, float)}
        assert all(np.isfinite(v) for v in numbers.values()), numbers
        assert rec["episode/count"] >= 8 and 0 < rec["episode/length"] <= 10
        logged = {k[len("episode/reward/"):]: v for k, v in rec.items()
                  if k.startswith("episode/reward/")}
        assert set(logged) == terms, set(logged) ^ terms
        total = dt * sum(logged.values())
        # Their unclipped sum, logged beside the return (the clip is visible, not a puzzle).
        assert math.isclose(rec["episode/reward_terms"], sum(logged.values()), rel_tol=1e-4,
                            abs_tol=1e-4)
        if clipped:
            assert rec["episode/return"] >= total - 1e-4
        else:
            assert math.isclose(rec["episode/return"], total, rel_tol=1e-3, abs_tol=1e-4)
