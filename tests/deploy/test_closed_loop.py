"""Closed-loop parity (`jaxrl eval RUN --policy onnx`, `jaxrl.deploy.closed_loop`).

One tiny PPO run on CartpoleBalance (preset `ppo-dmc-cpu`, 256 env steps, 200-step episodes, no
training-time eval) is trained and exported once per module; the exported ONNX model then drives
the env for a few episodes next to the JAX policy from the same initial states.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrl
from jaxrl import api, configs
from jaxrl.deploy import closed_loop, onnx_convert
from jaxrl.engine import loop
from jaxrl.run import checkpoint, cli, runner

PRESET = configs.get("ppo-dmc-cpu")
CFG = dataclasses.replace(PRESET.train, num_envs=16, unroll_length=8, total_env_steps=256,
                          num_chunks=1, num_eval_envs=0, episode_length=200)
EPISODES = 3


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(run dir, closed-loop result, sidecar) of the trained, exported tiny run."""
    run_dir = str(tmp_path_factory.mktemp("closed_loop") / "run")
    runner.train("ppo", "CartpoleBalance", CFG, PRESET.agent_config,
                 run_dir=run_dir, progress=False)
    cli.main(["export", run_dir])
    result, loaded, path, meta = jaxrl.closed_loop(run_dir, EPISODES)
    return run_dir, result, loaded, path, meta


def test_onnx_return_equals_jax_return(exported):
    run_dir, res, _, path, meta = exported
    assert path == os.path.join(run_dir, "export", "policy.onnx")
    assert meta["batch_size"] == res.batch_size == 1 and "robot" not in meta  # not a robot
    assert res.onnx_return.shape == res.jax_return.shape == (EPISODES,)
    assert res.onnx_done.all() and res.jax_done.all()
    np.testing.assert_array_equal(res.onnx_length, CFG.episode_length)
    np.testing.assert_allclose(res.onnx_return, res.jax_return, rtol=1e-3)
    assert np.unique(np.round(res.jax_return, 3)).size == EPISODES  # different initial states
    assert 0.0 <= res.max_action_diff <= 1e-5  # the export's parity tolerance
    assert res.num_compared == EPISODES * CFG.episode_length
    s = res.summary()
    assert s["max_return_rel_diff"] <= 1e-3
    assert s["onnx_return_mean"] == pytest.approx(float(res.onnx_return.mean()))


def test_batched_model_pads_the_last_batch(tmp_path):
    """A batch-2 model with dict inputs: 3 rows run as 2 + (1 padded), each row's own action."""
    w = np.array([[1.0, -0.5], [0.25, 2.0], [-1.0, 0.0]], np.float32)
    closed = jax.make_jaxpr(lambda state: jnp.tanh(state @ w))(jnp.zeros((2, 3)))
    path = str(tmp_path / "b2.onnx")
    with open(path, "wb") as f:
        f.write(onnx_convert.jaxpr_to_onnx(closed, ["state"], ["action"]).SerializeToString())
    meta = {"inputs": [{"name": "state", "obs_key": "state"}], "batch_size": 2}
    policy = closed_loop.OnnxPolicy(path, meta)
    obs = {"state": np.random.RandomState(0).randn(3, 3).astype(np.float32),
           "privileged_state": np.zeros((3, 5), np.float32)}
    got = policy(obs)
    assert got.shape == (3, 2)
    np.testing.assert_allclose(got, np.tanh(obs["state"] @ w), atol=1e-6)


def test_env_units_round_trip():
    low, high = np.array([-2.0, 0.0]), np.array([2.0, 4.0])
    a = np.array([[-1.0, 0.5], [0.25, 1.0]], np.float32)
    u = low + (a + 1.0) * 0.5 * (high - low)
    np.testing.assert_allclose(closed_loop.from_env_units(u, low, high), a, atol=1e-7)
    assert closed_loop.from_env_units(a, [-1.0, -1.0], [1.0, 1.0]).dtype == np.float32


def test_cli_prints_both_returns(exported, capsys, monkeypatch):
    run_dir, res, loaded, path, meta = exported
    seen = {}

    def fake(*args):
        seen["args"] = args
        return res, loaded, path, meta

    monkeypatch.setattr(api, "closed_loop", fake)
    cli.main(["eval", run_dir, "--policy", "onnx", "--episodes", str(EPISODES)])
    out = capsys.readouterr().out
    assert seen["args"] == (run_dir, EPISODES, 0, None, None, None)
    assert "onnx: return" in out and "jax:  return" in out
    assert "largest per-step action difference" in out and path in out


@pytest.fixture
def no_compile(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("make_train was reached: the check must come before compiling")

    monkeypatch.setattr(loop, "make_train", boom)


def test_never_exported_run_names_jaxrl_export(exported, tmp_path, capsys, no_compile):
    run_dir = str(tmp_path / "unexported")
    shutil.copytree(exported[0], run_dir, ignore=shutil.ignore_patterns("export"))
    assert checkpoint.existing_steps(run_dir) == [1]
    with pytest.raises(SystemExit) as exc:
        cli.main(["eval", run_dir, "--policy", "onnx"])
    msg = str(exc.value.code)
    assert msg.startswith("error: no exported policy at") and f"`jaxrl export {run_dir}`" in msg


@pytest.mark.parametrize("flags,match", [
    (["--seed-index", "1"], "re-export with `jaxrl export RUN --seed-index 1`"),
    (["--episodes", "0"], "--episodes must be positive"),
])
def test_cli_rejects_another_seed_or_no_episodes(exported, capsys, no_compile, flags, match):
    run_dir = exported[0]
    with pytest.raises(SystemExit) as exc:
        cli.main(["eval", run_dir, "--policy", "onnx", *flags])
    assert match.replace("RUN", run_dir) in str(exc.value.code)


def test_jax_format_export_is_not_accepted(exported, tmp_path):
    run_dir = str(tmp_path / "jaxfmt")
    os.makedirs(os.path.join(run_dir, "export"))
    shutil.copy(os.path.join(exported[0], "config.json"), run_dir)
    open(os.path.join(run_dir, "export", "policy.onnx"), "wb").close()
    with open(os.path.join(run_dir, "export", "policy.onnx.json"), "w") as f:
        json.dump({"format": "jax"}, f)
    with pytest.raises(closed_loop.NotExportedError, match="not ONNX"):
        closed_loop.read_export(run_dir)
