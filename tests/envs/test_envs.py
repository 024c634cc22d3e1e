"""Env registry: every Playground/Brax env loads (or names the asset variable), traces, steps."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.engine import wrappers
from jaxrl.envs import EnvAssetError, UnknownEnvError, list_envs, make, make_spec, registry

ALL = [n for names in list_envs().values() for n in names]
# Compiled and run on every CI run (one per simulator family); `JAXRL_TEST_ALL_ENVS=1` compiles
# every env (about an hour on 2 cores).
JIT_SUBSET = ["PointMass", "ReacherEasy", "ant", "inverted_pendulum", "DoneAfterK"]
JIT_NAMES = ALL if os.environ.get("JAXRL_TEST_ALL_ENVS") else JIT_SUBSET
# The quick loop (`-m "not slow"`) traces one env per family and compiles a toy env; the rest
# run in the default suite.
QUICK = {"CartpoleBalance", "ant", "DoneAfterK", "PointMaze"}
QUICK_JIT = {"DoneAfterK"}


def _quick_or_slow(names, quick=QUICK):
    return [pytest.param(n, marks=() if n in quick else pytest.mark.slow) for n in names]


def test_registry_lists_both_simulators():
    envs = list_envs()
    assert "CartpoleBalance" in envs["playground"] and "G1JoystickFlatTerrain" in envs["playground"]
    assert "ant" in envs["brax"] and len(envs["playground"]) >= 50


@pytest.mark.parametrize("name", _quick_or_slow(ALL))
def test_env_loads_and_traces(name):
    """Loads offline and traces reset + step through the training wrappers (no compile), or
    fails with an error that names $JAXRL_MENAGERIE_PATH."""
    try:
        env = make(name)
    except EnvAssetError as err:
        assert "JAXRL_MENAGERIE_PATH" in str(err) and name in str(err)
        return
    spec = make_spec(env, name)
    assert spec.action_size > 0 and len(spec.action_low) == spec.action_size
    venv = wrappers.wrap_for_training(env, num_envs=2, episode_length=5)
    state = jax.eval_shape(venv.reset, jax.random.PRNGKey(0))
    nxt = jax.eval_shape(venv.step, state, jnp.zeros((2, spec.action_size)))
    assert jax.tree.map(lambda x: x.shape, nxt.info["final_obs"]) == jax.tree.map(
        lambda x: x.shape, state.obs)
    assert nxt.reward.shape == (2,)


@pytest.mark.parametrize("name", _quick_or_slow(JIT_NAMES, QUICK_JIT))
def test_env_resets_and_steps_under_jit(name):
    try:
        env = make(name)
    except EnvAssetError:
        pytest.skip("asset missing offline (the error is checked in test_env_loads_and_traces)")
    venv = wrappers.wrap_for_training(env, num_envs=2, episode_length=3)
    state = jax.jit(venv.reset)(jax.random.PRNGKey(0))
    step = jax.jit(venv.step)
    action = jnp.full((2, env.action_size), 0.5)
    ended = np.zeros(2)
    for _ in range(3):
        state = step(state, action)
        ended = np.maximum(ended, np.asarray(state.done))
    for leaf in jax.tree.leaves(state.obs):
        assert np.all(np.isfinite(np.asarray(leaf)))
    np.testing.assert_array_equal(ended, 1.0)  # terminated early or hit the time limit of 3


def test_unknown_env_suggests_close_names():
    with pytest.raises(UnknownEnvError, match="CartpoleBalance"):
        make("CartPoleBalance")
    with pytest.raises(UnknownEnvError, match="jaxrl list envs"):
        make("NoSuchEnvAtAll")


def test_missing_asset_names_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXRL_MENAGERIE_PATH", str(tmp_path))
    with pytest.raises(EnvAssetError, match="JAXRL_MENAGERIE_PATH"):
        make("G1JoystickFlatTerrain")
    monkeypatch.setenv("JAXRL_MENAGERIE_PATH", str(tmp_path / "missing"))
    with pytest.raises(EnvAssetError, match="not a directory"):
        make("G1JoystickFlatTerrain")


def test_cpu_uses_pure_jax_mjx():
    assert registry.default_impl() == "jax"
    assert make("CartpoleBalance").env._config.impl == "jax"


@pytest.mark.parametrize("name,scales_itself", [("inverted_pendulum", True), ("pusher", True),
                                                 ("reacher", False)])
def test_brax_actions_scaled_once(name, scales_itself):
    """Brax envs that map [-1, 1] to their actuator range themselves (inverted_pendulum [-3, 3],
    pusher [-2, 2]) get the normalized action, not one scaled twice; others get env units."""
    from jaxrl.engine.types import State

    env = make(name)
    seen = {}

    class Recorder:  # stands in for the Brax env: records the action, returns the state
        def step(self, state, action):
            seen["action"] = action
            return state

    env.env = Recorder()
    zero = jnp.zeros(())
    env.step(State(data=None, obs=zero, reward=zero, done=zero), jnp.full(env.action_size, 0.5))
    low, high = env.action_low, env.action_high
    expected = 0.5 if scales_itself else low + 0.75 * (high - low)
    assert scales_itself == (high.max() > 1.0)
    np.testing.assert_allclose(seen["action"], expected, rtol=1e-6)
