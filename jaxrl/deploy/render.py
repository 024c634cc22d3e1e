"""Rollout videos: `jaxrl render RUN_DIR [--out FILE.mp4|.gif] [--steps N]`.

A deterministic rollout of the policy runs in the jitted env (one env, the run's action repeat
and time limit); the MuJoCo states it visits are drawn on the host with `mujoco.Renderer` and
written as MP4 (imageio + imageio-ffmpeg, which ships its own ffmpeg) or GIF (Pillow). Works
for Playground envs and Brax envs that carry a MuJoCo model (`sys.mj_model`); toy envs have
nothing to draw.

Headless OpenGL: MuJoCo reads `MUJOCO_GL` once, when it is imported. `setup_gl` sets it to `egl`
when unset and no display is present (call it before anything imports mujoco, as the CLI does);
if MuJoCo was already imported with a backend that cannot create a context here, it probes EGL
then OSMesa and hands the first one that works to `mujoco.Renderer`. On a CPU machine EGL runs
on Mesa's software renderer (Debian `libegl1 libegl-mesa0 libgl1-mesa-dri`); on NVIDIA GPUs it
uses the driver's EGL. OSMesa needs `libosmesa6`. Both need PyOpenGL (a mujoco dependency).
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import os
import sys
import warnings

import jax
import numpy as np

from jaxrl.engine import wrappers

GL_BACKENDS = ("egl", "osmesa")
GL_HELP = ("install a headless OpenGL backend: EGL (Debian: apt-get install libegl1 "
           "libegl-mesa0 libgl1-mesa-dri; NVIDIA drivers ship their own) or OSMesa (apt-get "
           "install libosmesa6), then run with MUJOCO_GL=egl or MUJOCO_GL=osmesa.")
_GL_CHOSEN: list[str] = []


class RenderError(RuntimeError):
    """No usable OpenGL backend, an env without a MuJoCo model, or a bad output path."""


@dataclasses.dataclass(frozen=True)
class RenderResult:
    """A written video: path, frame count, frames per second, OpenGL backend used."""

    path: str
    num_frames: int
    fps: float
    gl_backend: str


def setup_gl() -> str:
    """Makes `mujoco.Renderer` usable headless; returns the backend name (`egl`, `osmesa`, ...).

    Each candidate (the one MuJoCo picked at import, then EGL, then OSMesa; GLFW only with a
    display) is probed by rendering one frame of a one-sphere model.

    Raises:
        RenderError: no backend can render (the message says what to install).
    """
    if _GL_CHOSEN:
        return _GL_CHOSEN[0]
    display = bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    if "mujoco" not in sys.modules and not os.environ.get("MUJOCO_GL") and not display:
        os.environ["MUJOCO_GL"] = "egl"
    try:
        from mujoco.rendering.classic import gl_context
    except Exception as err:  # noqa: BLE001  (PyOpenGL fails with AttributeError, OSError, ...)
        raise RenderError(f"MuJoCo could not load MUJOCO_GL={os.environ.get('MUJOCO_GL')!r} "
                          f"({type(err).__name__}: {err}); " + GL_HELP) from err

    current = (os.environ.get("MUJOCO_GL") or "glfw").lower()
    candidates = [(current, getattr(gl_context, "GLContext", None))]
    candidates += [(name, None) for name in GL_BACKENDS if name != current]
    errors = []
    for name, cls in candidates:
        if name == "glfw" and not display:
            errors.append("glfw: no display")
            continue
        try:
            cls = cls or importlib.import_module(f"mujoco.{name}").GLContext
            _probe(gl_context, cls)
        except Exception as err:  # noqa: BLE001  (each backend fails in its own way)
            errors.append(f"{name}: {type(err).__name__}: {str(err)[:120]}")
            continue
        _GL_CHOSEN.append(name)
        return name
    raise RenderError("no OpenGL backend could render (" + "; ".join(errors) + "); " + GL_HELP)


def _probe(gl_context, cls) -> None:
    """Installs `cls` as MuJoCo's context class and renders one frame; restores it on error."""
    import mujoco

    previous = getattr(gl_context, "GLContext", None)
    gl_context.GLContext = cls
    try:
        model = mujoco.MjModel.from_xml_string(
            "<mujoco><worldbody><light pos='0 0 1'/><geom size='0.1'/></worldbody></mujoco>")
        data = mujoco.MjData(model)
        mujoco.mj_forward(model, data)
        with mujoco.Renderer(model, height=8, width=8) as renderer:
            renderer.update_scene(data)
            renderer.render()
    except BaseException:
        gl_context.GLContext = previous
        raise


def mujoco_model(env):
    """The `mujoco.MjModel` behind a jaxrl env (Playground `mj_model`, Brax `sys.mj_model`).

    Raises:
        RenderError: the env has no MuJoCo model (toy envs).
    """
    inner = getattr(env.unwrapped, "env", env.unwrapped)
    model = getattr(inner, "mj_model", None)
    if model is None:
        sys_ = getattr(inner, "sys", None)
        model = getattr(sys_, "mj_model", None)
    if model is None:
        raise RenderError(f"env {getattr(env, 'name', type(env).__name__)!r} has no MuJoCo "
                          "model to render (toy envs cannot be rendered).")
    return model


def _render_fields(data) -> dict:
    """The state fields a frame needs, from MJX `Data` (qpos, ...) or a Brax pipeline state."""
    qpos = getattr(data, "qpos", None)
    out = {"qpos": qpos if qpos is not None else data.q}
    for name in ("mocap_pos", "mocap_quat"):
        if getattr(data, name, None) is not None:
            out[name] = getattr(data, name)
    return out


def rollout_states(agent, agent_state, env, num_steps: int, seed: int = 0) -> dict:
    """Deterministic single-env rollout; returns host arrays `[F, ...]` of the visited states.

    Frame i is the state before policy step i; the rollout stops after the step that ends the
    episode (its resulting state is the last frame), so `F = num_steps` unless it ends earlier.
    """
    cfg = agent.train
    length = cfg.episode_length or env.episode_length
    single = wrappers.Episode(env, length, cfg.action_repeat)

    def step(state, key):
        obs = jax.tree.map(lambda x: x[None], state.obs)
        action, _ = agent.act(agent_state, obs, key, True)
        nxt = single.step(state, action[0])
        return nxt, (_render_fields(state.data), nxt.done, _render_fields(nxt.data))

    @jax.jit
    def run(key):
        k_reset, k_run = jax.random.split(key)
        return jax.lax.scan(step, single.reset(k_reset), jax.random.split(k_run, num_steps))[1]

    before, done, after = jax.device_get(run(jax.random.PRNGKey(seed)))
    ends = np.flatnonzero(np.asarray(done) > 0)
    if ends.size == 0:
        return before
    k = int(ends[0])
    return {n: np.concatenate([before[n][: k + 1], after[n][k: k + 1]]) for n in before}


def render_frames(model, states: dict, width: int = 320, height: int = 240,
                  camera: str | int | None = None) -> np.ndarray:
    """Draws each state: uint8 `[F, height, width, 3]`.

    Args:
        model: `mujoco.MjModel`.
        states: `qpos [F, nq]` and optional `mocap_pos` / `mocap_quat` (from `rollout_states`).
        camera: camera name or id; None uses the model's first camera, or the free camera.
    """
    import mujoco

    setup_gl()
    if camera is None:
        camera = 0 if model.ncam > 0 else -1
    data = mujoco.MjData(model)
    frames = []
    with mujoco.Renderer(model, height=height, width=width) as renderer:
        for i in range(states["qpos"].shape[0]):
            data.qpos[:] = states["qpos"][i]
            if "mocap_pos" in states and model.nmocap:
                data.mocap_pos[:] = states["mocap_pos"][i]
                data.mocap_quat[:] = states["mocap_quat"][i]
            mujoco.mj_forward(model, data)
            renderer.update_scene(data, camera=camera)
            frames.append(renderer.render().copy())
    return np.stack(frames)


def write_video(frames: np.ndarray, out: str, fps: float) -> str:
    """Writes uint8 `[F, H, W, 3]` frames to `.mp4` (H.264 via imageio-ffmpeg) or `.gif`.

    Raises:
        RenderError: another extension.
    """
    try:
        import imageio.v2 as imageio
    except ImportError as err:
        raise RenderError("writing videos needs the `export` extra: from the "
                          f"jaxrl checkout, pip install -e '.[export]' ({err}).") from err

    ext = os.path.splitext(out)[1].lower()
    if ext not in (".mp4", ".gif"):
        raise RenderError(f"unsupported video extension {ext!r}: use .mp4 or .gif.")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with warnings.catch_warnings():
        # imageio-ffmpeg starts ffmpeg with fork+exec; the child runs no JAX code.
        warnings.filterwarnings("ignore", message="os.fork", category=RuntimeWarning)
        if ext == ".mp4":
            imageio.mimwrite(out, list(frames), fps=fps, codec="libx264", quality=7,
                             macro_block_size=1, ffmpeg_log_level="error")
        else:
            imageio.mimwrite(out, list(frames), duration=1000.0 / fps, loop=0)
    return out


def render_policy(agent, agent_state, env, out: str, num_steps: int | None = None,
                  width: int = 320, height: int = 240, camera: str | int | None = None,
                  max_fps: float = 50.0, seed: int = 0) -> RenderResult:
    """Renders a deterministic rollout of one agent state (no seed axis) to `out` (episode
    length, action repeat and control rate: the run's, `agent.train` and `agent.spec`).

    Args:
        num_steps: policy steps to roll out; None: the episode length, at most 1000.
        max_fps: frames are the control steps, thinned by an integer stride so the video plays in
            real time at no more than this rate (CartpoleBalance: 100 Hz control -> every second
            state at 50 fps).

    Returns:
        `RenderResult`; `num_frames = ceil(F / stride)` for `F` states from `rollout_states`.

    Raises:
        RenderError: see `mujoco_model`, `setup_gl`, `write_video`.
    """
    ext = os.path.splitext(out)[1].lower()
    if ext not in (".mp4", ".gif"):
        raise RenderError(f"unsupported video extension {ext!r}: use .mp4 or .gif.")
    backend = setup_gl()
    model = mujoco_model(env)
    cfg, spec = agent.train, agent.spec
    length = cfg.episode_length or spec.episode_length
    num_steps = num_steps or min(length, 1000)
    control_hz = 1.0 / (float(spec.dt or 0.02) * cfg.action_repeat)
    stride = max(1, math.ceil(control_hz / max_fps))
    states = rollout_states(agent, agent_state, env, num_steps, seed)
    states = {k: v[::stride] for k, v in states.items()}
    frames = render_frames(model, states, width, height, camera)
    fps = control_hz / stride
    write_video(frames, out, fps)
    return RenderResult(out, int(frames.shape[0]), fps, backend)
