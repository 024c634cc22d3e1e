"""Env registry: every Playground/Brax env loads (unless the registry names it unavailable, with
its reason), traces, steps; the jnp.clip fix of three upstream modules gives hand-computed
values."""

import copy
import functools
import math
import os
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.engine import wrappers
from jaxrl.envs import (
    EnvAssetError,
    UnknownEnvError,
    assets,
    compat,
    list_envs,
    make,
    make_spec,
    registry,
)

ALL = [n for names in list_envs().values() for n in names]
# Compiled and run on every CI run (one per simulator family, plus a manipulation robot; Go1 and
# G1 take real steps in tests/agents/test_robot_presets.py); `JAXRL_TEST_ALL_ENVS=1` compiles
# every env (about an hour on 2 cores).
JIT_SUBSET = ["PointMass", "ReacherEasy", "ant", "inverted_pendulum", "DoneAfterK",
              "PandaPickCube"]
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


@functools.cache
def _unavailable():
    return registry.unavailable()


# Envs that more than one test builds: made once per module (the others are not kept, so the
# sweep does not hold every model in memory).
_REUSED = set(JIT_SUBSET) | {"CartpoleBalance"}
_make_once = functools.cache(make)


def _make_or_skip(name):
    """`make(name)`; skips only an env that the registry names unavailable here (with its
    reason, e.g. robot assets not installed): any other load error fails the test."""
    if name in _unavailable():
        pytest.skip(f"{name} unavailable here: {_unavailable()[name]}")
    return _make_once(name) if name in _REUSED else make(name)


def _trace_once(env):
    """A copy of `env` whose `reset` / `step` are jitted, so each is traced once for the test:
    `make_spec`'s reset, the vmapped reset and the auto-reset inside the wrapped step reuse one
    jaxpr of `reset` (vmap batches the jaxpr instead of tracing the env again). Same code and
    shapes as without jit; tracing (not loading) is where the time goes, about 40% less for the
    slowest robot envs (Go1Getup 38 s -> 23 s of CPU)."""
    env = copy.copy(env)
    env.reset, env.step = jax.jit(env.reset), jax.jit(env.step)
    return env


@pytest.mark.parametrize("name", _quick_or_slow(ALL))
def test_env_loads_and_traces(name):
    """Loads offline and traces reset + step through the training wrappers (no compile)."""
    env = _trace_once(_make_or_skip(name))
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
    env = _make_or_skip(name)
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


def test_playground_reward_terms_are_summed_into_a_metric():
    from jaxrl.envs import adapters

    state = types.SimpleNamespace(
        data=None, obs=jnp.zeros(2), reward=0.0, done=0.0, info={},
        metrics={"reward/tracking": 1.5, "reward/torques": -4.0, "swing_peak": 9.0})
    out = adapters._from_playground(state)
    assert float(out.metrics["reward_terms"]) == -2.5  # 1.5 - 4.0; other metrics left out
    assert out.metrics["swing_peak"] == 9.0
    plain = types.SimpleNamespace(**dict(vars(state), metrics={"x": 1.0}))
    assert "reward_terms" not in adapters._from_playground(plain).metrics


def test_unknown_env_suggests_close_names():
    with pytest.raises(UnknownEnvError, match="CartpoleBalance"):
        make("CartPoleBalance")
    with pytest.raises(UnknownEnvError, match="jaxrl list envs"):
        make("NoSuchEnvAtAll")


def test_missing_asset_names_the_variable(tmp_path, monkeypatch):
    """An empty $JAXRL_MENAGERIE_PATH no longer hides G1 (the wheel fills in); with no wheel
    either, `make` names the variable and the extra before Playground reads any file."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the merged view goes here
    monkeypatch.setenv("JAXRL_MENAGERIE_PATH", str(tmp_path))
    assert assets.missing_folders("G1JoystickFlatTerrain") == []
    assert "G1JoystickFlatTerrain" not in registry.unavailable()
    monkeypatch.setattr(assets, "wheel_roots", lambda: [])
    monkeypatch.setattr(assets, "playground_root", lambda: None)
    with pytest.raises(EnvAssetError, match=r"unitree_g1.*jaxrl\[robots\].*JAXRL_MENAGERIE_PATH"):
        make("G1JoystickFlatTerrain")
    monkeypatch.setenv("JAXRL_MENAGERIE_PATH", str(tmp_path / "missing"))
    with pytest.raises(EnvAssetError, match="not a directory"):
        make("G1JoystickFlatTerrain")


def test_cpu_uses_pure_jax_mjx():
    assert registry.default_impl() == "jax"
    assert _make_once("CartpoleBalance").env._config.impl == "jax"


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


def test_compat_clip_takes_old_and_new_keywords():
    x = jnp.array([-2.0, 0.5, 3.0])
    np.testing.assert_array_equal(compat.clip(x, a_min=0.0, a_max=1.0), [0.0, 0.5, 1.0])
    np.testing.assert_array_equal(compat.clip(x, a_max=1.0), [-2.0, 0.5, 1.0])
    np.testing.assert_array_equal(compat.clip(x, a_min=-1.0), [-1.0, 0.5, 3.0])
    np.testing.assert_array_equal(compat.clip(x, min=0.0, max=2.0), [0.0, 0.5, 2.0])
    np.testing.assert_array_equal(compat.clip(x, -1.0, 1.0), [-1.0, 0.5, 1.0])


def test_compat_fixes_the_upstream_modules_only():
    """After `patch_all`, the three upstream functions that call `jp.clip(..., a_max=)` /
    `a_min=` run on small arrays with hand-computed results; `jax.numpy.clip` is unchanged."""
    from brax import fluid
    from brax.base import Motion, Transform
    from mujoco_playground._src.manipulation.franka_emika_panda_robotiq import push_cube
    from mujoco_playground._src.manipulation.leap_hand import reorient

    clip_before = jnp.clip
    compat.patch_all()
    assert jnp.clip is clip_before and jax.numpy.clip is clip_before
    with pytest.raises(TypeError):
        jnp.clip(jnp.ones(2), a_max=1.0)  # jax itself still rejects the old keywords
    assert reorient.jp.sum is jnp.sum and reorient.jp.clip is compat.clip
    # 90 degrees about z against the identity goal: 2 * asin(sin(45 deg)) = pi / 2.
    quarter = jnp.array([math.cos(math.pi / 4), 0.0, 0.0, math.sin(math.pi / 4)])
    identity = jnp.array([1.0, 0.0, 0.0, 0.0])
    cube = types.SimpleNamespace(get_cube_orientation=lambda data: quarter,
                                 get_cube_goal_orientation=lambda data: identity)
    np.testing.assert_allclose(reorient.CubeReorient._cube_orientation_error(cube, None),
                               math.pi / 2, rtol=1e-5)
    np.testing.assert_allclose(
        push_cube.PandaRobotiqPushCube._orientation_error(None, quarter, identity),
        math.pi / 2, rtol=1e-5)
    # One body, inertia diag (1, .1, .1), mass 1: box^2 = 6 * max((-.8, 1, 1), 1e-12); moving at
    # unit x speed in a fluid of viscosity 1 (density 0): force -3 pi mean(box) along x.
    pose = Transform.create(pos=jnp.zeros((1, 3)), rot=jnp.array([[1.0, 0.0, 0.0, 0.0]]))
    sys = types.SimpleNamespace(link=types.SimpleNamespace(
        inertia=types.SimpleNamespace(transform=pose)), viscosity=jnp.array(1.0),
        density=jnp.array(0.0))
    vel = Motion(ang=jnp.zeros((1, 3)), vel=jnp.array([[1.0, 0.0, 0.0]]))
    frc = fluid.force(sys, pose, vel, jnp.array([1.0]), jnp.diag(jnp.array([1.0, 0.1, 0.1]))[None])
    diam = (math.sqrt(6e-12) + 2 * math.sqrt(6.0)) / 3
    np.testing.assert_allclose(frc.vel, [[-3 * math.pi * diam, 0.0, 0.0]], rtol=1e-5)
    np.testing.assert_allclose(frc.ang, 0.0)


def test_gpu_without_warp_falls_back_to_pure_jax_mjx(monkeypatch):
    """Playground's default on GPU is Warp; a GPU install without warp-lang (the device kit)
    gets MJX's JAX implementation instead of failing at the first env."""
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(registry.jax, "default_backend", lambda: "gpu")
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "warp" else find_spec(name, *a))
    assert registry.default_impl() == "jax"
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "warp" else find_spec(name, *a))
    assert registry.default_impl() == "warp"
