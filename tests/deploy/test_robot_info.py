"""Robot controller facts in the export sidecar (`jaxrl.deploy.robot_info`).

Go1 and G1 joystick envs are built (no compile: `jaxrl.envs.make` loads the MJCF, and the
observation sizes come from `jax.eval_shape`), and every field is compared with the env object's
own attributes (`_config`, `_default_pose`, `mj_model`).
"""

from __future__ import annotations

import functools
import json

import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import envs
from jaxrl.deploy import export, robot_info
from jaxrl.engine import loop

ROBOTS = ("Go1JoystickFlatTerrain", "G1JoystickFlatTerrain")


@functools.cache
def _make(name):
    return envs.make(name)  # ~5-15 s each: built once per module


@pytest.fixture(scope="module", params=ROBOTS)
def robot(request):
    env = _make(request.param)
    return request.param, env, robot_info.robot_info(env, ["state"])


def test_robot_section_is_json_and_names_the_playground_source(robot):
    name, env, info = robot
    assert json.loads(json.dumps(info)) == info
    module = type(env.env).__module__
    assert info["playground_class"] == f"{module}.Joystick"
    folder = "go1" if name.startswith("Go1") else "g1"
    assert info["step_source"] == f"mujoco_playground/_src/locomotion/{folder}/joystick.py"


def test_observation_layout_matches_env(robot):
    _, env, info = robot
    sizes = env.env.observation_size  # Playground: {key: shape}
    assert info["observation"]["sizes"] == {k: list(v) for k, v in sizes.items()}
    assert set(sizes) == {"state", "privileged_state"}
    assert info["observation"]["keys_read"] == ["state"]


def test_action_to_motor_target_matches_env(robot):
    _, env, info = robot
    inner = env.env
    mapping = info["action_to_motor_target"]
    assert mapping["formula"] == "motor_target = default_pose + action_scale * action"
    assert mapping["default_pose_source"] == "env._default_pose"
    np.testing.assert_array_equal(np.asarray(mapping["default_pose"], np.float32),
                                  np.asarray(inner._default_pose))
    assert len(mapping["default_pose"]) == inner.mj_model.nu == env.action_size
    assert mapping["action_scale"] == inner._config.action_scale
    assert mapping["ctrl_clamped_to_ctrl_range"] is True


def test_timing_matches_env(robot):
    _, env, info = robot
    inner = env.env
    assert info["ctrl_dt"] == inner._config.ctrl_dt == inner.dt == env.dt
    assert info["sim_dt"] == pytest.approx(inner._config.sim_dt)
    assert info["sim_dt"] == inner.mj_model.opt.timestep
    assert info["n_substeps"] == inner.n_substeps == round(inner.dt / inner.sim_dt)


def test_actuators_match_mj_model(robot):
    _, env, info = robot
    m = env.env.mj_model
    act = info["actuators"]
    assert act["names"] == [m.actuator(i).name for i in range(m.nu)]
    joints = [int(m.actuator_trnid[i, 0]) for i in range(m.nu)]
    assert act["joint_names"] == [m.joint(j).name for j in joints]
    assert act["joint_qpos_index"] == [int(m.jnt_qposadr[j]) for j in joints]
    assert act["default_pose_in_actuator_order"] is True  # qpos[7:] order = actuator order
    np.testing.assert_array_equal(np.asarray(act["ctrl_range"]), m.actuator_ctrlrange)
    # The env maps [-1, 1] to motor targets itself: our adapter passes the action unchanged.
    np.testing.assert_array_equal(env.action_low, -1.0)
    np.testing.assert_array_equal(env.action_high, 1.0)
    for i, rng in enumerate(act["force_range"]):
        assert rng == (list(m.actuator_forcerange[i]) if m.actuator_forcelimited[i] else None)


def test_pd_gains_match_config_and_mj_model(robot):
    name, env, info = robot
    inner, m = env.env, env.env.mj_model
    pd = info["pd_gains"]
    np.testing.assert_array_equal(pd["kp"], m.actuator_gainprm[:, 0])
    np.testing.assert_array_equal(pd["kd"], -m.actuator_biasprm[:, 2])
    dofs = [int(m.jnt_dofadr[m.actuator_trnid[i, 0]]) for i in range(m.nu)]
    np.testing.assert_array_equal(pd["joint_damping"], m.dof_damping[dofs])
    np.testing.assert_array_equal(pd["joint_armature"], m.dof_armature[dofs])
    if name.startswith("Go1"):  # go1/base.py writes config Kp / Kd into the model
        assert (pd["config_kp"], pd["config_kd"]) == (inner._config.Kp, inner._config.Kd)
        assert pd["kp"] == [inner._config.Kp] * m.nu
        assert pd["joint_damping"] == [inner._config.Kd] * m.nu
    else:  # G1: gains from the XML, no Kp / Kd in the config
        assert "Kp" not in inner._config and pd["config_kp"] is None and pd["config_kd"] is None
        assert min(pd["kp"]) > 0


def test_sidecar_carries_the_robot_section(robot):
    """`export.sidecar` with the robot section (traced with `jax.make_jaxpr`, no compile)."""
    _, env, info = robot
    spec = envs.make_spec(env)  # jax.eval_shape of reset
    policy = lambda obs: jnp.tanh(obs["state"][:, : spec.action_size])  # noqa: E731
    traced = export.trace_policy(policy, spec)
    keys = [n for n, u in zip(traced.names, traced.used, strict=True) if u]
    assert keys == ["state"]
    meta = export.sidecar(traced, spec, loop.TrainConfig(), "onnx", "p.onnx", 0.0, 1e-5, 0, {},
                          robot=info)
    assert meta["robot"] == info and info["observation"]["keys_read"] == keys
    assert info["observation"]["sizes"] == {k: list(v) for k, v in spec.obs_shape.items()}
    assert meta["observation"]["keys_read"] == meta["robot"]["observation"]["keys_read"]
    json.dumps(meta)


def test_non_robot_envs_have_no_section():
    assert robot_info.robot_info(envs.make("PointMass1D")) is None
    assert robot_info.robot_info(envs.make("CartpoleBalance")) is None  # DM Control suite
    assert robot_info.playground_env(envs.make("PointMass1D")) is None


def test_missing_fields_are_none():
    """An env that defines only part of the facts: the rest is None, nothing raises."""

    class Bare:
        """A Playground-like env with a model but no config or default pose."""

        __module__ = "mujoco_playground._src.locomotion.fake"

        def __init__(self, model):
            self.mj_model = model

        def step(self, state, action):
            return state

    model = _make("Go1JoystickFlatTerrain").env.mj_model
    info = robot_info.robot_info(Bare(model))
    mapping = info["action_to_motor_target"]
    assert mapping["formula"] is None and mapping["default_pose"] is None
    assert mapping["action_scale"] is None and info["pd_gains"]["config_kp"] is None
    assert info["observation"]["sizes"] is None and info["n_substeps"] is None
    assert info["ctrl_dt"] is None and info["sim_dt"] == 0.004
    assert len(info["actuators"]["names"]) == model.nu


def test_robot_actions_reach_playground_unchanged(robot):
    """Playground's robot envs map [-1, 1] to motor targets themselves (Go1: `default_pose +
    action_scale * action`): the adapter must not first map the action to the ctrl range."""
    from jaxrl.engine.types import State
    from jaxrl.envs.adapters import PlaygroundEnv

    _, env, _ = robot
    seen = {}

    class Recorder:  # stands in for the Playground env: records the action it is given
        action_size, dt, mj_model = env.action_size, env.dt, env.env.mj_model

        def step(self, state, action):
            seen["action"] = action
            return state

    zero = np.zeros(())
    state = State(data=None, obs=zero, reward=zero, done=zero)
    action = np.linspace(-0.9, 0.9, env.action_size)
    PlaygroundEnv(env.name, Recorder(), 10, self_scaling=True).step(state, action)
    np.testing.assert_array_equal(np.asarray(seen["action"]), action)
    PlaygroundEnv(env.name, Recorder(), 10).step(state, action)  # DM Control: to ctrl range
    low, high = env.env.mj_model.actuator_ctrlrange.T
    np.testing.assert_allclose(np.asarray(seen["action"]), low + (action + 1) / 2 * (high - low),
                               rtol=1e-5, atol=1e-5)
