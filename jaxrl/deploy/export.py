"""Policy export for deployment (sim-to-real): ONNX, or serialized StableHLO via `jax.export`.

`jaxrl export RUN_DIR --format onnx` writes `policy.onnx` plus a JSON sidecar `policy.onnx.json`.
The exported function is any agent's deterministic policy,

    action_env = to_env_units(agent.act(agent_state, obs, fixed_key, deterministic=True)[0]),

traced with `jax.make_jaxpr` and converted primitive by primitive (`jaxrl.deploy.onnx_convert`),
so no agent needs export code of its own. Observation normalization, parameters and action scaling
are part of the graph: feed raw observations, get actions in the env's actuator units (the
same mapping `envs/adapters.py` applies: `low + (clip(a, -1, 1) + 1) / 2 * (high - low)`,
none when the bounds are [-1, 1]).

Inputs: one float32 tensor `[batch_size, *obs_shape]` named `obs`; for dict observations one per
key the policy reads (named by the key; keys it ignores are left out, found by liveness on the
traced graph). Output: `action`, float32 `[batch_size, action_size]`.

Parity: before anything is written, the exported model runs (onnxruntime, or the deserialized
`jax.export` artifact) on `NUM_PARITY_OBS` observations recorded from a deterministic rollout of
the same policy in the env, and its actions are compared with the JAX policy's; a maximum
absolute error above the tolerance (1e-5) raises `ParityError`. The same holds on observations
far outside the training distribution (`far_observations`: recorded ones times 10 to 1e6, and
Gaussian draws of those scales), where the normalizer's output is huge: the exported graph must
match XLA's float32 computation there too, within 10x the tolerance (`FAR_FACTOR`: float32
reordering grows with the magnitudes). Both errors are printed by the CLI and stored in the
sidecar.

Policy info: the sidecar's `policy_info` says what the exported policy computes. It is
`{"deterministic": true}` updated with the agent's optional `export_info()` (a method, or a
property, returning a JSON-friendly dict), looked up with `getattr(agent, "export_info", None)`.
Flow policies use it for their sampler, e.g. `{"policy": "flow", "integration_steps": 10,
"sampler": "euler", "deterministic": true, "initial_noise": "zeros"}`: the K-step sampler
(`lax.scan`) is unrolled into the ONNX graph, so K is fixed at export time.

Robot envs (MuJoCo Playground locomotion and manipulation): the sidecar's `robot` section holds
what the controller on the robot needs, read from the env object by
`jaxrl.deploy.robot_info.robot_info`: observation sizes per key and the keys read, the action to
motor target mapping (`default_pose + action_scale * action`), ctrl_dt and sim_dt, actuator and
joint names, ctrl and force ranges, and PD gains. Other envs have no `robot` key.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import math
import os
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl._version import __version__
from jaxrl.deploy.robot_info import robot_info
from jaxrl.engine import wrappers
from jaxrl.engine.types import EnvSpec

FORMATS = ("onnx", "jax")
EXTENSIONS = {"onnx": ".onnx", "jax": ".jaxexport"}
NUM_PARITY_OBS = 1000
NUM_FAR_OBS = 64  # per scale, recorded and drawn each (`far_observations`)
FAR_SCALES = (10.0, 1e3, 1e6)
# The far check's tolerance over the recorded one's: there a flow policy's K integration steps
# of huge pre-activations carry float32 reordering between XLA and onnxruntime to ~1.5e-5
# (flow_sac, PointMass1D, 2 CPU cores); a converter bug (a clip, an overflow) is off by far more.
FAR_FACTOR = 10.0
TOLERANCE = 1e-5
DEFAULT_PLATFORMS = ("cpu", "cuda")  # jax format: a robot's CPU or a Jetson-class GPU


class ParityError(RuntimeError):
    """The exported policy disagrees with the JAX policy by more than the tolerance."""


@dataclasses.dataclass(frozen=True)
class ExportResult:
    """Paths written and the measured parity error.

    Attributes:
        path: the exported model (`.onnx` or `.jaxexport`).
        sidecar_path: the JSON sidecar (`<path>.json`).
        max_abs_error: max |exported - JAX| over the parity observations, in env action units.
        metadata: the sidecar's content.
    """

    path: str
    sidecar_path: str
    max_abs_error: float
    metadata: dict


def to_env_units(action: jax.Array, low, high) -> jax.Array:
    """Maps actions in [-1, 1] to `[low, high]` as the env adapters do (identity for +-1)."""
    low, high = np.asarray(low, np.float32), np.asarray(high, np.float32)
    if np.allclose(low, -1.0) and np.allclose(high, 1.0):
        return action
    return low + (jnp.clip(action, -1.0, 1.0) + 1.0) * 0.5 * (high - low)


def deterministic_policy(agent, agent_state, spec: EnvSpec, key: jax.Array | None = None
                         ) -> Callable:
    """`obs [B, ...] (array or dict) -> action [B, A]` in env units, deterministic.

    Args:
        agent: any registered agent.
        agent_state: its state for ONE seed (no leading seed axis).
        spec: the env's spec (action bounds).
        key: the fixed PRNG key passed to `act` (unused by deterministic policies).
    """
    key = jax.random.PRNGKey(0) if key is None else key

    def policy(obs):
        action, _ = agent.act(agent_state, obs, key, True)
        return to_env_units(action, spec.action_low, spec.action_high)

    return policy


def policy_info(agent) -> dict:
    """The sidecar's `policy_info`: `{"deterministic": True}` updated with the agent's optional
    `export_info()` (method or property returning a dict).

    Raises:
        TypeError: `export_info` gives something other than a JSON-serializable dict.
    """
    extra = getattr(agent, "export_info", None)
    if callable(extra):
        extra = extra()
    if extra is not None and not isinstance(extra, dict):
        raise TypeError(f"{type(agent).__name__}.export_info must give a dict, got "
                        f"{type(extra).__name__}.")
    info = {"deterministic": True, **(extra or {})}
    try:
        json.dumps(info)
    except TypeError as err:
        raise TypeError(f"{type(agent).__name__}.export_info is not JSON-serializable: {err}"
                        ) from err
    return info


def record_observations(agent, agent_state, env, num: int = NUM_PARITY_OBS, num_envs: int = 10,
                        seed: int = 0):
    """Observations from a deterministic rollout of the policy in `env` (auto-reset on).

    Args:
        agent, agent_state: the policy (one seed).
        env: the unbatched env (`jaxrl.envs.make`); the episode length and action repeat are the
            run's (`agent.train`, `agent.spec`).
        num: observations to return; num_envs: parallel envs in the rollout.
        seed: PRNG seed of the resets.

    Returns:
        Observation pytree with leaves `[num, *obs_shape]` (time-major: step t of all envs,
        then step t + 1).
    """
    cfg = agent.train
    length = cfg.episode_length or agent.spec.episode_length
    venv = wrappers.wrap_for_training(env, num_envs, length, cfg.action_repeat)
    key = jax.random.PRNGKey(seed)

    def step(state, _):
        action, _ = agent.act(agent_state, state.obs, key, True)
        return venv.step(state, action), state.obs

    @jax.jit
    def run(k):
        _, obs = jax.lax.scan(step, venv.reset(k), None, math.ceil(num / num_envs))
        return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:])[:num], obs)

    return jax.device_get(run(key))


@dataclasses.dataclass(frozen=True)
class TracedPolicy:
    """A policy traced on flat observation leaves.

    Attributes:
        fn: `(*leaves [B, ...]) -> action [B, A]` over all observation leaves.
        closed_jaxpr: `jax.make_jaxpr(fn)` at batch size B.
        names: one input name per leaf (`obs`, or the dict keys in sorted order).
        used: whether the action depends on each leaf.
        shapes: per-leaf shapes `[B, ...]`.
    """

    fn: Callable
    closed_jaxpr: object
    names: tuple[str, ...]
    used: tuple[bool, ...]
    shapes: tuple[tuple[int, ...], ...]

    def used_fn(self) -> Callable:
        """`(*used leaves) -> action`; unread leaves are fed zeros."""
        def fn(*used):
            it = iter(used)
            leaves = [next(it) if u else jnp.zeros(s, jnp.float32)
                      for u, s in zip(self.used, self.shapes, strict=True)]
            return self.fn(*leaves)

        return fn


def trace_policy(policy: Callable, spec: EnvSpec, batch_size: int = 1) -> TracedPolicy:
    """Traces `policy(obs)` for float32 observations shaped by `spec`, batch `batch_size`."""
    from jaxrl.deploy.onnx_convert import used_inputs

    if spec.obs_is_dict:
        names = tuple(sorted(spec.obs_shape))
        shapes = tuple((batch_size, *spec.obs_shape[k]) for k in names)
        fn = lambda *leaves: policy(dict(zip(names, leaves, strict=True)))
    else:
        names, shapes = ("obs",), ((batch_size, *spec.obs_shape),)
        fn = lambda leaf: policy(leaf)
    closed = jax.make_jaxpr(fn)(*[jnp.zeros(s, jnp.float32) for s in shapes])
    used = used_inputs(closed.jaxpr)
    used = tuple(used) if any(used) else (True,) * len(used)
    return TracedPolicy(fn, closed, names, used, shapes)


def far_observations(obs, num: int = NUM_FAR_OBS, scales=FAR_SCALES, seed: int = 0):
    """Observations far outside what the policy was trained on (a sensor fault, a robot fallen
    over): for each scale, the first `num` recorded observations times the scale and as many
    draws of N(0, scale^2), per leaf (`[2 * num * len(scales), ...]`). The normalizer maps them
    far beyond its statistics, where a graph that reorders or fuses float32 operations
    differently from XLA would show it."""
    rng = np.random.default_rng(seed)

    def one(x):
        base = np.asarray(x, np.float32)[:num]
        parts = [p for s in scales for p in (
            base * np.float32(s), (rng.standard_normal(base.shape) * s).astype(np.float32))]
        return np.concatenate(parts)

    return jax.tree.map(one, obs)


def _parity(traced: TracedPolicy, blob: bytes, fmt: str, names: list[str], obs,
            batch_size: int) -> tuple[float, int]:
    """(max abs error of the exported model against the JAX policy, observations compared)."""
    batches = _batches(_leaves(obs, traced.names), batch_size)
    used = [b for b, u in zip(batches, traced.used, strict=True) if u]
    # Full float32 matmuls on both sides: GPUs default to TF32 (`jax_default_matmul_precision`),
    # which is off by ~5e-4 on a 512-256-128 net (H200) although the exported model is exact.
    with jax.default_matmul_precision("highest"):
        reference = np.asarray(jax.jit(jax.vmap(traced.fn))(*batches))
        got = _onnx_outputs(blob, names, used) if fmt == "onnx" else _jax_outputs(blob, used)
    error = float(np.max(np.abs(got.astype(np.float64) - reference)))
    return error, reference.shape[0] * batch_size


def _leaves(obs, names: tuple[str, ...]) -> list[np.ndarray]:
    if isinstance(obs, dict):
        return [np.asarray(obs[k], np.float32) for k in names]
    return [np.asarray(obs, np.float32)]


def _batches(leaves: list[np.ndarray], batch_size: int) -> list[np.ndarray]:
    """`[num, ...]` -> `[num // B, B, ...]` (a remainder smaller than B is dropped)."""
    k = leaves[0].shape[0] // batch_size
    return [x[: k * batch_size].reshape((k, batch_size) + x.shape[1:]) for x in leaves]


def onnx_session(model, purpose: str = "the ONNX parity check"):
    """A single-threaded CPU onnxruntime session for `model` (a path or the model's bytes).

    Raises:
        ImportError: onnxruntime is not installed (the message names the `export` extra).
    """
    try:
        import onnxruntime as ort
    except ImportError as err:
        raise ImportError(f"{purpose} needs onnxruntime, the `export` extra: from the jaxrl "
                          f"checkout, pip install -e '.[export]' ({err}).") from err
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def _onnx_outputs(model_bytes: bytes, names: list[str], batches: list[np.ndarray]) -> np.ndarray:
    session = onnx_session(model_bytes)
    outs = [session.run(["action"], {n: x[i] for n, x in zip(names, batches, strict=True)})[0]
            for i in range(batches[0].shape[0])]
    return np.stack(outs)


def _jax_outputs(blob: bytes, batches: list[np.ndarray]) -> np.ndarray:
    """Runs the deserialized `jax.export` artifact on every batch (round trip)."""
    loaded = jax.export.deserialize(bytearray(blob))
    run = jax.jit(lambda xs: jax.lax.map(lambda args: loaded.call(*args), xs))
    return np.asarray(run(tuple(batches)))


def _serialize(traced: TracedPolicy, fmt: str, platforms) -> tuple[bytes, dict]:
    """(model bytes, format facts for the sidecar)."""
    if fmt == "onnx":
        from jaxrl.deploy.onnx_convert import IR_VERSION, OPSET, jaxpr_to_onnx

        model = jaxpr_to_onnx(traced.closed_jaxpr, list(traced.names), ["action"],
                              doc="jaxrl deterministic policy; see the JSON sidecar.")
        return model.SerializeToString(), {"opset": OPSET, "onnx_ir_version": IR_VERSION,
                                           "onnx_nodes": len(model.graph.node)}
    used_shapes = [s for s, u in zip(traced.shapes, traced.used, strict=True) if u]
    args = [jax.ShapeDtypeStruct(s, jnp.float32) for s in used_shapes]
    exported = jax.export.export(jax.jit(traced.used_fn()),
                                 platforms=platforms or DEFAULT_PLATFORMS)(*args)
    return bytes(exported.serialize()), {
        "serialization": "jax.export (StableHLO); load with jax.export.deserialize(...).call",
        "platforms": list(exported.platforms),
        "calling_convention_version": exported.calling_convention_version}


def export_policy(agent, agent_state, env, out: str, fmt: str = "onnx", *,
                  batch_size: int = 1, tolerance: float = TOLERANCE,
                  num_parity_obs: int = NUM_PARITY_OBS, platforms: tuple[str, ...] | None = None,
                  info: dict | None = None) -> ExportResult:
    """Exports the deterministic policy of one agent state, checks parity, writes the sidecar.

    Args:
        agent: any registered agent (its `spec` and run `train` config describe the env's I/O
            and control rate); agent_state: its state for ONE seed.
        env: the unbatched env used to record the parity observations.
        out: output path (`.onnx` / `.jaxexport` by convention); the sidecar is `out + ".json"`.
        fmt: `onnx` or `jax`.
        batch_size: the fixed leading dimension of every input (1 for one robot).
        tolerance: the largest max-abs-error accepted (env action units).
        num_parity_obs: recorded observations in the parity check.
        platforms: `jax.export` target platforms (`jax` format); None: `DEFAULT_PLATFORMS`.
        info: extra sidecar fields (source run dir, agent and env names, seed, chunk).

    Returns:
        `ExportResult` with the paths and the measured error.

    Raises:
        ValueError: unknown format or non-positive batch size.
        TypeError: the agent's `export_info` is not a JSON-serializable dict.
        ParityError: the exported policy is off by more than `tolerance`; nothing is written.
        jaxrl.deploy.onnx_convert.UnsupportedPrimitiveError: the policy uses an unconvertible
            primitive.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}.")
    if batch_size <= 0:
        raise ValueError(f"batch_size must be positive, got {batch_size}.")
    about, spec = policy_info(agent), agent.spec
    policy = deterministic_policy(agent, agent_state, spec)
    traced = trace_policy(policy, spec, batch_size)
    blob, facts = _serialize(traced, fmt, platforms)
    obs = record_observations(agent, agent_state, env, num_parity_obs)
    names = [n for n, u in zip(traced.names, traced.used, strict=True) if u]
    error, count = _parity(traced, blob, fmt, names, obs, batch_size)
    far_error, far_count = _parity(traced, blob, fmt, names, far_observations(obs), batch_size)
    for err, n, what, tol in ((error, count, "recorded", tolerance),
                              (far_error, far_count, "far (x10 to x1e6)", FAR_FACTOR * tolerance)):
        if not err <= tol:
            raise ParityError(f"exported policy differs from the JAX policy by {err:.3g} (max "
                              f"abs over {n} {what} observations), above the tolerance "
                              f"{tol:g}.")
    meta = sidecar(traced, spec, agent.train, fmt, os.path.basename(out), error, tolerance, count,
                   dict(facts, **(info or {})), policy=about,
                   robot=robot_info(env, names if spec.obs_is_dict else None))
    meta["parity"].update(far_max_abs_error=far_error, far_num_observations=far_count,
                          far_tolerance=FAR_FACTOR * tolerance,
                          far_observations=f"{NUM_FAR_OBS} recorded observations times each of "
                          f"{list(FAR_SCALES)}, and as many N(0, scale^2) draws")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "wb") as f:
        f.write(blob)
    with open(out + ".json", "w") as f:
        json.dump(meta, f, indent=2)
    return ExportResult(out, out + ".json", error, meta)


def sidecar(traced: TracedPolicy, spec: EnvSpec, cfg, fmt: str, file: str, error: float,
            tolerance: float, num_obs: int, info: dict | None, policy: dict | None = None,
            robot: dict | None = None) -> dict:
    """The JSON sidecar: I/O layout, action bounds, control rate, provenance, parity,
    `policy_info` (`policy`, default `{"deterministic": True}`; see `policy_info`) and, for
    robot envs, `robot` (`jaxrl.deploy.robot_info.robot_info`; left out when None)."""
    repeat = int(cfg.action_repeat)
    control_dt = None if spec.dt is None else float(spec.dt) * repeat
    inputs = [{"name": n, "obs_key": n if spec.obs_is_dict else None, "shape": list(s),
               "dtype": "float32"}
              for n, s, u in zip(traced.names, traced.shapes, traced.used, strict=True) if u]
    obs_shapes = ({k: list(v) for k, v in spec.obs_shape.items()} if spec.obs_is_dict
                  else list(spec.obs_shape))
    meta = {
        "format": fmt, "file": file, "inputs": inputs,
        "observation": {"is_dict": spec.obs_is_dict, "shapes": obs_shapes,
                        "keys_read": [i["obs_key"] for i in inputs] if spec.obs_is_dict else None,
                        "normalization": "folded into the model: feed raw observations"},
        "output": {"name": "action", "shape": [traced.shapes[0][0], spec.action_size],
                   "dtype": "float32", "action_size": spec.action_size,
                   "low": list(spec.action_low), "high": list(spec.action_high),
                   "units": "env actuator units (policy's [-1, 1] action mapped to [low, high])"},
        "deterministic": True, "policy_info": policy or {"deterministic": True},
        "batch_size": traced.shapes[0][0],
        "env_dt": spec.dt, "action_repeat": repeat, "control_dt": control_dt,
        "control_frequency_hz": None if not control_dt else 1.0 / control_dt,
        "parity": {"max_abs_error": error, "tolerance": tolerance, "num_observations": num_obs,
                   "observations": "deterministic rollout of this policy in the env",
                   "runtime": "onnxruntime (CPU)" if fmt == "onnx" else "jax.export round trip"},
        "versions": _versions(fmt),
    }
    if robot is not None:
        meta["robot"] = robot
    meta.update(info or {})
    return meta


def _versions(fmt: str) -> dict:
    out = {"jaxrl": __version__, "jax": jax.__version__}
    names = ("onnx", "onnxruntime") if fmt == "onnx" else ("jaxlib",)
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def default_out(run_dir: str, fmt: str) -> str:
    """`RUN_DIR/export/policy.onnx` or `RUN_DIR/export/policy.jaxexport`."""
    return os.path.join(run_dir, "export", "policy" + EXTENSIONS[fmt])
