"""What a controller on the robot needs, read from a MuJoCo Playground env object.

`robot_info(env, keys_read)` gives the export sidecar's `robot` section for Playground robot
envs (locomotion and manipulation, e.g. `Go1JoystickFlatTerrain`, `G1JoystickFlatTerrain`).
Every value is read from the env object (its `_config`, `_default_pose`, `mj_model`), never
from a table here; a field the env does not define is None. Other envs (DM Control suite,
Brax, toy) get no section (None).

How Playground maps an action to a motor target (Playground 0.x sources, under
`mujoco_playground/_src/`):

- `locomotion/go1/joystick.py` and `locomotion/g1/joystick.py`, `Joystick.step`:
  `motor_targets = self._default_pose + action * self._config.action_scale`, then
  `mjx_env.step(self.mjx_model, state.data, motor_targets, self.n_substeps)`;
- `mjx_env.py`, `step`: `data.ctrl = action` for each of `n_substeps` physics steps
  (`n_substeps = round(ctrl_dt / sim_dt)`), so `ctrl` is held for one control period; MuJoCo
  clamps `ctrl` to `actuator_ctrlrange` for `ctrllimited` actuators;
- `locomotion/go1/joystick.py`, `_post_init`: `_default_pose = keyframe("home").qpos[7:]`
  (G1: `keyframe("knees_bent")`), in qpos order of the actuated joints;
- `locomotion/go1/base.py`, `Go1Env.__init__`: `opt.timestep = sim_dt`, `dof_damping[6:] = Kd`,
  `actuator_gainprm[:, 0] = Kp`, `actuator_biasprm[:, 1] = -Kp` (config `Kp`, `Kd`);
  `locomotion/g1/base.py` keeps the gains of the XML (no `Kp`/`Kd` in its config).

A MuJoCo position actuator (gain type fixed, bias type affine, `biasprm[1] = -gainprm[0]`)
applies `force = kp * (ctrl - q) - kd * qdot` with `kp = gainprm[0]`, `kd = -biasprm[2]`
(clamped to `forcerange` when `forcelimited`); passive joint damping `dof_damping` adds
`-damping * qdot` (Go1's `Kd` lives there, its actuator `kd` is 0).

The model's `action` output (env units, see `jaxrl.deploy.export`) is the `action` that the
env's `step` receives, so on the robot: `motor_target = default_pose + action_scale * action`.
"""

from __future__ import annotations

import inspect
import os

import numpy as np

# `step` source fragments of the Playground action mappings recognized, and the env attribute
# that holds the offset. Others are reported with `formula: None`.
_OFFSET_PATTERNS = (("self._default_pose + action * self._config.action_scale", "_default_pose"),
                    ("self._default_ctrl + action * self._config.action_scale", "_default_ctrl"))
_ROBOT_SUITES = (".locomotion.", ".manipulation.")
_GAIN_FIXED, _BIAS_AFFINE, _TRN_JOINT = 0, 1, 0  # mjtGain, mjtBias, mjtTrn values


def playground_env(env):
    """The MuJoCo Playground env object under jaxrl wrappers and adapters, or None.

    Args:
        env: a jaxrl env (`jaxrl.envs.make`, possibly wrapped); its `unwrapped` adapter holds
            the Playground env as `.env` (`envs/adapters.py`, `PlaygroundEnv`).
    """
    inner = getattr(env, "unwrapped", env)
    inner = getattr(inner, "env", inner)
    try:
        return inner if getattr(inner, "mj_model", None) is not None else None
    except Exception:  # noqa: BLE001  (a property that cannot be read: not a Playground env)
        return None


def is_robot_env(inner) -> bool:
    """A Playground env of the locomotion or manipulation suites, or one with a default pose."""
    module = type(inner).__module__
    return hasattr(inner, "_default_pose") or any(s in module for s in _ROBOT_SUITES)


def robot_info(env, keys_read: list[str] | None = None) -> dict | None:
    """The sidecar's `robot` section, or None for a non-robot env.

    Args:
        env: the jaxrl env the policy was trained on (see `playground_env`).
        keys_read: the observation keys the exported policy reads (dict observations).

    Returns:
        JSON-friendly dict: `playground_class`, `step_source` (file of the env's `step`),
        `observation` (`sizes` per key, `[D]` lists, and `keys_read`), `action_to_motor_target`
        (see `action_mapping`), `ctrl_dt` / `sim_dt` (s), `n_substeps`, `actuators` (see
        `actuators`) and `pd_gains` (see `pd_gains`). Missing facts are None.
    """
    inner = playground_env(env)
    if inner is None or not is_robot_env(inner):
        return None
    model = inner.mj_model
    config = getattr(inner, "_config", None)
    ctrl_dt = _number(_config_value(config, "ctrl_dt"), _attr(inner, "dt"))
    sim_dt = _number(float(model.opt.timestep), _config_value(config, "sim_dt"))
    return {
        "playground_class": f"{type(inner).__module__}.{type(inner).__qualname__}",
        "step_source": _source_file(type(inner)),
        "observation": observation_layout(inner, keys_read),
        "action_to_motor_target": action_mapping(inner),
        "ctrl_dt": ctrl_dt, "sim_dt": sim_dt,
        "n_substeps": _number(_attr(inner, "n_substeps")),
        "actuators": actuators(model),
        "pd_gains": pd_gains(model, config),
    }


def observation_layout(inner, keys_read: list[str] | None) -> dict:
    """`{"sizes": {key: [D]} (or {"obs": [D]}), "keys_read": [...] or None}` from the env's
    `observation_size` (Playground traces `reset` with `jax.eval_shape`; nothing compiles)."""
    try:
        size = inner.observation_size
    except Exception:  # noqa: BLE001
        size = None
    if isinstance(size, dict):
        sizes = {k: [int(d) for d in np.atleast_1d(v)] for k, v in size.items()}
    elif size is None:
        sizes = None
    else:
        sizes = {"obs": [int(d) for d in np.atleast_1d(size)]}
    return {"sizes": sizes, "keys_read": list(keys_read) if keys_read is not None else None}


def action_mapping(inner) -> dict:
    """How the env's `step` turns `action [A]` into the actuator target `ctrl [nu]`.

    Returns:
        `formula` (`motor_target = default_pose + action_scale * action`, or None when the
        env's `step` source matches no known mapping), `input` (what `action` is),
        `default_pose` (`[nu]`, joint positions in rad or m, or None), `default_pose_source`
        (the env attribute read), `action_scale` (float or per-actuator list, or None),
        `ctrl_clamped_to_ctrl_range` (MuJoCo clamps `ctrl` of `ctrllimited` actuators).
    """
    source = _step_source(type(inner))
    hit = next(((p, a) for p, a in _OFFSET_PATTERNS if p in source), None)
    attr = hit[1] if hit else ("_default_pose" if hasattr(inner, "_default_pose") else None)
    pose = _array(getattr(inner, attr, None)) if attr else None
    scale = _config_value(getattr(inner, "_config", None), "action_scale")
    model = inner.mj_model
    return {
        "formula": (f"motor_target = {attr.lstrip('_')} + action_scale * action" if hit
                    else None),
        "input": "the model's `action` output in [-1, 1], passed unchanged to the env's step()",
        "default_pose": pose, "default_pose_source": f"env.{attr}" if attr else None,
        "action_scale": _json_number(scale),
        "ctrl_clamped_to_ctrl_range": bool(np.all(model.actuator_ctrllimited)),
    }


def actuators(model) -> dict:
    """Per-actuator facts of a `mujoco.MjModel`, in actuator (= action) order.

    Returns:
        `names` `[nu]`, `joint_names` `[nu]` (the joint each drives, None if not a joint
        transmission), `joint_qpos_index` `[nu]` (qpos address of that joint), `ctrl_range`
        `[nu, 2]` (None where not ctrllimited), `force_range` `[nu, 2]` (N or N m; None where
        not forcelimited), `default_pose_in_actuator_order` (whether the actuated joints'
        qpos addresses are 7, 8, ..., the order of Playground's `qpos[7:]` default pose).
    """
    nu = int(model.nu)
    joints = [int(model.actuator_trnid[i, 0]) if model.actuator_trntype[i] == _TRN_JOINT
              else None for i in range(nu)]
    qpos_index = [int(model.jnt_qposadr[j]) if j is not None else None for j in joints]
    return {
        "names": [model.actuator(i).name for i in range(nu)],
        "joint_names": [model.joint(j).name if j is not None else None for j in joints],
        "joint_qpos_index": qpos_index,
        "ctrl_range": [_pair(model.actuator_ctrlrange[i]) if model.actuator_ctrllimited[i]
                       else None for i in range(nu)],
        "force_range": [_pair(model.actuator_forcerange[i]) if model.actuator_forcelimited[i]
                        else None for i in range(nu)],
        "default_pose_in_actuator_order": qpos_index == list(range(7, 7 + nu)),
    }


def pd_gains(model, config) -> dict:
    """PD gains: the env config's `Kp` / `Kd` where it defines them, and the model's.

    Returns:
        `config_kp`, `config_kd` (float, list or None), `kp` `[nu]` (`gainprm[0]`, N/rad or
        N m/rad) and `kd` `[nu]` (`-biasprm[2]`) of position actuators (None for other
        actuators), `joint_damping` `[nu]` (`dof_damping` of the driven joint, None without
        one), `joint_armature` `[nu]`, and `law` (the actuator force law).
    """
    nu = int(model.nu)
    position = [model.actuator_gaintype[i] == _GAIN_FIXED
                and model.actuator_biastype[i] == _BIAS_AFFINE
                and np.isclose(model.actuator_biasprm[i, 1], -model.actuator_gainprm[i, 0])
                for i in range(nu)]
    dofs = [int(model.jnt_dofadr[model.actuator_trnid[i, 0]])
            if model.actuator_trntype[i] == _TRN_JOINT else None for i in range(nu)]
    return {
        "config_kp": _json_number(_config_value(config, "Kp")),
        "config_kd": _json_number(_config_value(config, "Kd")),
        "kp": [float(model.actuator_gainprm[i, 0]) if position[i] else None for i in range(nu)],
        "kd": [0.0 - float(model.actuator_biasprm[i, 2]) if position[i] else None
               for i in range(nu)],
        "joint_damping": [float(model.dof_damping[d]) if d is not None else None for d in dofs],
        "joint_armature": [float(model.dof_armature[d]) if d is not None else None
                           for d in dofs],
        "law": "force = kp * (ctrl - q) - kd * qdot (position actuators), clamped to "
               "force_range; plus passive joint damping -joint_damping * qdot",
    }


def _config_value(config, name: str):
    """`config[name]` of an ml_collections ConfigDict (or dict), None when absent."""
    if config is None:
        return None
    try:
        return config[name]
    except (KeyError, AttributeError, TypeError):
        return None


def _attr(obj, name: str):
    try:
        return getattr(obj, name, None)
    except Exception:  # noqa: BLE001  (a property raising)
        return None


def _number(*candidates):
    """The first candidate that is not None, as a float (int for whole-number types)."""
    for c in candidates:
        if c is not None:
            return int(c) if isinstance(c, (int, np.integer)) else float(c)
    return None


def _json_number(x):
    if x is None:
        return None
    arr = np.asarray(x, np.float64)
    return float(arr) if arr.ndim == 0 else arr.tolist()


def _array(x) -> list | None:
    return None if x is None else np.asarray(x, np.float64).ravel().tolist()


def _pair(row) -> list[float]:
    return [float(row[0]), float(row[1])]


def _step_source(cls) -> str:
    try:
        return inspect.getsource(cls.step)
    except (OSError, TypeError, AttributeError):
        return ""


def _source_file(cls) -> str | None:
    """The file defining `cls.step`, from `mujoco_playground/` on (else the full path)."""
    try:
        path = inspect.getsourcefile(cls.step)
    except (TypeError, AttributeError):
        return None
    if path is None:
        return None
    marker = os.sep + "mujoco_playground" + os.sep
    return "mujoco_playground/" + path.split(marker, 1)[1].replace(os.sep, "/") if (
        marker in path) else path
