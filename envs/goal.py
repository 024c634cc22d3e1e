"""Goal-conditioned envs for contrastive RL (CRL, CPPO): the contract and five envs.

Contract (every env here; CRL/CPPO rely on it, `jaxrl.engine.types.EnvSpec` repeats it):

- `obs = concat(state, goal)`, a flat float32 vector `[obs_dim]` with
  `obs_dim = state_dim + len(goal_indices)`.
- `goal_indices` (class attribute, tuple of ints, read by `registry.make_spec` into
  `EnvSpec.goal_indices`) are the entries of `state` that the goal refers to: the goal
  condition compares `obs[goal_indices]` with `obs[state_dim:]`. `state_dim` is an env
  attribute too (`state_dim = obs_dim - len(goal_indices)`).
- Per-step metrics (float32 scalars, in `State.metrics` after every `reset` and `step`):
  `dist`, the Euclidean distance `||obs[goal_indices] - obs[state_dim:]||` (env units, m for
  the Brax envs), and `success`, exactly 1.0 when `dist < threshold` and 0.0 otherwise.
- The goal is drawn from the reset key on **every** reset (jaxrl's `AutoReset` passes a fresh
  key each time), is constant within an episode, and is also kept in `info["goal"]`
  (float32 `[len(goal_indices)]`). This avoids JaxGCRL's one-goal-per-slot defect under Brax's
  cached auto-reset (JaxGCRL issue #53).
- Reward: sparse `success` by default (CRL never reads it); `dense_reward=True` gives `-dist`.
- Actions are normalized to [-1, 1] (`action_low` / `action_high` give the env units).

Envs (thresholds from the JaxGCRL paper, Table 1, and `jaxgcrl/envs/*.py`):

| env | state (`state_dim`) | goal | `goal_indices` | threshold | episode |
|---|---|---|---|---|---|
| `PointMaze` | x, y (2) | x, y | (0, 1) | 0.5 | 50 |
| `DetourMaze` | x, y (2) | x, y | (0, 1) | 0.5 | 100 |
| `ReacherGoal` | cos q, sin q, qvel, fingertip xy (8) | target xy | (6, 7) | 0.05 m | 50 |
| `ReacherGoalJaxGCRL` | cos q, sin q, tip xyz, vel (10) | target xyz | (4, 5, 6) | 0.05 m | 50 |
| `AntGoal` | qpos, qvel (29) | torso xy | (0, 1) | 0.5 m | 1000 |
| `PusherGoal` | arm q, arm qd, tip xyz, object xyz (20) | goal xyz | (17, 18, 19) | 0.1 m | 1000 |

`DetourMazeDense` and `ReacherGoalDense` are the same tasks with the reward `-dist` (baselines).
`ReacherGoalJaxGCRL` and `PusherGoalJaxGCRL` (JaxGCRL's reset rule for close starts) build
JaxGCRL's tasks for side-by-side runs.

Sources: JaxGCRL (Bortkiewicz et al., ICLR 2025) `jaxgcrl/envs/{reacher,ant,pusher}.py` and
`jaxgcrl/utils/env.py` (backends: `generalized` for reacher and pusher, `spring` for ant);
Brax 0.14.2 `brax/envs/{reacher,ant,pusher}.py` for the models, reset noise and the reacher
target distribution. `PointMaze` and `DetourMaze` are ours (`jaxrl.envs.maze`, re-exported
here).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl.engine.types import State
from jaxrl.envs.adapters import BraxEnv
from jaxrl.envs.maze import (  # noqa: F401 (re-exported)
    RING_MAZE,
    SERPENTINE_MAZE,
    DetourMaze,
    DetourMazeDense,
    PointMaze,
    goal_terms,
    path_lengths,
)


def _point_in_link(pipeline_state, link: int, offset) -> jax.Array:
    """World position (m, `[3]`) of a point fixed in link `link` at `offset` (link frame)."""
    from brax import math

    return pipeline_state.x.pos[link] + math.rotate(jnp.asarray(offset, jnp.float32),
                                                    pipeline_state.x.rot[link])


def _first_state(env, ps, goal: jax.Array) -> State:
    """Reset state of a non-terminating Brax goal env from its pipeline state and goal."""
    obs, _, metrics = env._terms(ps, goal)
    zero = jnp.zeros((), jnp.float32)
    return State(data=ps, obs=obs, reward=zero, done=zero, metrics=metrics, info={"goal": goal})


def _pipeline_step(env, state: State, action: jax.Array) -> State:
    """`step` of a non-terminating Brax goal env: one pipeline step with the scaled action."""
    ps = env.env.pipeline_step(state.data, env._scale(action))
    obs, reward, metrics = env._terms(ps, state.info["goal"])
    return state.replace(data=ps, obs=obs, reward=reward, done=jnp.zeros((), jnp.float32),
                         metrics=metrics)


class ReacherGoal(BraxEnv):
    """Brax `reacher` (2-link planar arm) as a goal-reaching task.

    State (`state_dim = 8`, float32): `[cos q0, cos q1, sin q0, sin q1, qd0, qd1, tip_x, tip_y]`
    with q the joint angles (rad), qd their velocities (rad/s) and tip the fingertip position
    (m; the point 0.11 m along link `body1`, as Brax computes it). Goal: the target's x-y
    position (m), drawn by Brax's own reset (uniform angle, radius `0.2 * U(0, 1)`) and left in
    the target body's slide joints, so renders show it. `goal_indices = (6, 7)`,
    `obs` float32 `[10]`; `success` when the fingertip-target distance is below 0.05 m
    (JaxGCRL `jaxgcrl/envs/reacher.py`; tip and target share one height, so its 3-D distance
    equals our x-y one). Never terminates; time limit 50 steps of 0.02 s (Gym's Reacher limit;
    JaxGCRL runs every env with one `--episode_length`, 1000 in `scripts/train.sh`).

    `obs_layout="jaxgcrl"` (`ReacherGoalJaxGCRL`) gives JaxGCRL's observation instead:
    `[cos q0, cos q1, sin q0, sin q1, tip xyz, tip velocity xyz]` (`state_dim = 10`), goal the
    target's xyz (its z is constant), `goal_indices = (4, 5, 6)`, `obs` `[13]`. The velocity
    is JaxGCRL's `Transform.create(pos=(0.11, 0, 0)).do(xd.take(1)).vel`, i.e. `v1 + w1 x
    (0.11, 0, 0)` with link 1's linear and angular velocity and the offset in world axes (not
    turned with the link, so it is not exactly the fingertip's velocity).
    """

    goal_indices = (6, 7)
    state_dim = 8
    OBS_LAYOUTS = ("ours", "jaxgcrl")

    def __init__(self, episode_length: int = 50, threshold: float = 0.05,
                 dense_reward: bool = False, backend: str = "generalized",
                 obs_layout: str = "ours"):
        from brax import envs as brax_envs

        if obs_layout not in self.OBS_LAYOUTS:
            raise ValueError(f"obs_layout must be one of {self.OBS_LAYOUTS}, got {obs_layout!r}")
        super().__init__("ReacherGoal", brax_envs.get_environment("reacher", backend=backend),
                         episode_length)
        self.threshold = float(threshold)
        self.dense_reward = bool(dense_reward)
        self.obs_layout = obs_layout
        if obs_layout == "jaxgcrl":
            self.goal_indices, self.state_dim = (4, 5, 6), 10
        self._target = self.env.sys.link_names.index("target")

    def _terms(self, ps, goal):
        from brax import base

        q, qd = ps.q[:2], ps.qd[:2]
        tip = _point_in_link(ps, 1, (0.11, 0.0, 0.0))
        if self.obs_layout == "jaxgcrl":
            tip_vel = base.Transform.create(pos=jnp.array([0.11, 0.0, 0.0])).do(ps.xd.take(1))
            state_vec = jnp.concatenate([jnp.cos(q), jnp.sin(q), tip, tip_vel.vel])
        else:
            state_vec = jnp.concatenate([jnp.cos(q), jnp.sin(q), qd, tip[:2]])
        return goal_terms(state_vec, goal, self.goal_indices, self.threshold, self.dense_reward)

    def reset(self, key: jax.Array) -> State:
        ps = self.env.reset(key).pipeline_state
        target = ps.x.pos[self._target, :len(self.goal_indices)]
        return _first_state(self, ps, target.astype(jnp.float32))

    step = _pipeline_step


class ReacherGoalJaxGCRL(ReacherGoal):
    """`ReacherGoal` with JaxGCRL's observation and 3-D goal (`obs_layout="jaxgcrl"`), for runs
    in JaxGCRL's exact setting (`benchmarks/crl_vs_jaxgcrl.py`)."""

    def __init__(self, **kwargs):
        super().__init__(**{"obs_layout": "jaxgcrl", **kwargs})
        self.name = "ReacherGoalJaxGCRL"


class AntGoal(BraxEnv):
    """Brax `ant` (quadruped) walking to a goal 10 m away.

    State (`state_dim = 29`, float32): Brax's ant observation with
    `exclude_current_positions_from_observation=False`, i.e. qpos (15: torso position x, y, z
    in m, torso quaternion w, x, y, z, 8 hip and ankle angles in rad) then qvel (14: torso
    linear and angular velocity, 8 joint velocities). Goal: torso x-y (m) on the circle of
    radius `goal_distance` (10) around the origin at a uniform angle (JaxGCRL
    `jaxgcrl/envs/ant.py`); `goal_indices = (0, 1)`, `obs` float32 `[31]`. `success` when the
    torso's x-y distance to the goal is below 0.5 m; also `success_easy` (below 2 m, JaxGCRL's
    metric) and Brax's ant metrics. Terminates when the torso height leaves [0.2, 1.0] m
    (Brax's default); time limit 1000 steps of 0.05 s. The stock Brax model has no target body,
    so renders do not show the goal.
    """

    goal_indices = (0, 1)
    state_dim = 29

    def __init__(self, episode_length: int = 1000, threshold: float = 0.5,
                 goal_distance: float = 10.0, dense_reward: bool = False,
                 backend: str = "spring"):
        from brax import envs as brax_envs

        env = brax_envs.get_environment("ant", backend=backend,
                                        exclude_current_positions_from_observation=False)
        super().__init__("AntGoal", env, episode_length)
        self.threshold = float(threshold)
        self.goal_distance = float(goal_distance)
        self.dense_reward = bool(dense_reward)

    def _terms(self, state_vec, goal, metrics):
        obs, reward, gm = goal_terms(state_vec, goal, self.goal_indices, self.threshold,
                                      self.dense_reward)
        metrics = dict(metrics, **gm, success_easy=(gm["dist"] < 2.0).astype(jnp.float32))
        return obs, reward, {k: jnp.asarray(v, jnp.float32) for k, v in metrics.items()}

    def reset(self, key: jax.Array) -> State:
        key_env, key_goal = jax.random.split(key)
        s = self.env.reset(key_env)
        angle = 2.0 * jnp.pi * jax.random.uniform(key_goal)
        goal = self.goal_distance * jnp.stack([jnp.cos(angle), jnp.sin(angle)])
        obs, _, metrics = self._terms(s.obs, goal, s.metrics)
        zero = jnp.zeros((), jnp.float32)
        return State(data=s.pipeline_state, obs=obs, reward=zero, done=zero, metrics=metrics,
                     info={"goal": goal})

    def step(self, state: State, action: jax.Array) -> State:
        from brax.envs.base import State as BState

        brax_metrics = {k: v for k, v in state.metrics.items()
                        if k not in ("success", "dist", "success_easy")}
        inner = BState(pipeline_state=state.data, obs=state.obs[:self.state_dim],
                       reward=state.reward, done=state.done, metrics=brax_metrics, info={})
        s = self.env.step(inner, self._scale(action))
        obs, reward, metrics = self._terms(s.obs, state.info["goal"], s.metrics)
        return state.replace(data=s.pipeline_state, obs=obs, reward=reward,
                             done=jnp.asarray(s.done, jnp.float32), metrics=metrics)


class PusherGoal(BraxEnv):
    """Brax `pusher` (7-DoF arm) pushing a puck to a goal.

    State (`state_dim = 20`, float32): arm joint angles q (7, rad), their velocities (7,
    rad/s), the arm tip position (3, m: the inertial frame of `r_wrist_flex_link`, as Brax and
    JaxGCRL use it) and the object position (3, m). Goal: the goal body's position (3, m).
    `goal_indices = (17, 18, 19)` (object xyz), `obs` float32 `[23]`; `success` when the
    3-D object-goal distance is below 0.1 m (JaxGCRL `jaxgcrl/envs/pusher.py`; the goal body sits
    0.048 m below the object, so this needs an x-y distance below about 0.088 m).

    Reset: arm at rest with velocity noise U(-0.005, 0.005) (Brax). Brax keeps the goal at its
    default place, so the goal offset (m, from the model's goal position 0.45, -0.05) is drawn
    from JaxGCRL's ranges: `kind="easy"` y in [-0.55, -0.25), x in [-0.2, 0.2];
    `kind="hard"` y in [-0.65, 0.35), x in [-0.55, 0.45]. The object offset is Brax's
    (y in [-0.3, 0), x in [-0.2, 0.2]), pushed out radially to at least 0.17 m from the goal.
    Both offsets go into the slide joints, so renders show them. Never terminates; time limit
    1000 steps of 0.05 s (JaxGCRL `scripts/train.sh`).

    `min_gap_rule="jaxgcrl"` (`PusherGoalJaxGCRL`) keeps JaxGCRL's own rule instead: when the
    object-goal gap is below 0.17 m, the object's *offset* is multiplied by `0.17 / gap`, which
    moves it away from the model's object position, not from the goal, so some starts stay
    closer than 0.17 m (or begin inside the success radius). For runs in JaxGCRL's task. Left
    as ours there: the observation's order (JaxGCRL: q, tip, object, qd; the same entries) and
    the success step (JaxGCRL's is that of the state before each step, one step late).
    """

    goal_indices = (17, 18, 19)
    state_dim = 20
    _GOAL_RANGES = {"easy": ((-0.55, -0.25), (-0.2, 0.2)),
                    "hard": ((-0.65, 0.35), (-0.55, 0.45))}

    def __init__(self, episode_length: int = 1000, threshold: float = 0.1, kind: str = "easy",
                 dense_reward: bool = False, backend: str = "generalized",
                 min_gap_rule: str = "radial"):
        from brax import envs as brax_envs

        if kind not in self._GOAL_RANGES:
            raise ValueError(f"kind must be one of {sorted(self._GOAL_RANGES)}, got {kind!r}")
        if min_gap_rule not in ("radial", "jaxgcrl"):
            raise ValueError(f"min_gap_rule must be 'radial' or 'jaxgcrl', got {min_gap_rule!r}")
        self.min_gap_rule = min_gap_rule
        super().__init__("PusherGoal", brax_envs.get_environment("pusher", backend=backend),
                         episode_length)
        self.threshold = float(threshold)
        self.kind = kind
        self.dense_reward = bool(dense_reward)
        names = self.env.sys.link_names
        self._tip = names.index("r_wrist_flex_link")
        self._object = names.index("object")
        self._goal = names.index("goal")

    def _inertial_pos(self, ps, link: int) -> jax.Array:
        return _point_in_link(ps, link, self.env.sys.link.inertia.transform.pos[link])

    def _terms(self, ps, goal):
        state_vec = jnp.concatenate([ps.q[:7], ps.qd[:7], self._inertial_pos(ps, self._tip),
                                     self._inertial_pos(ps, self._object)])
        return goal_terms(state_vec, goal, self.goal_indices, self.threshold, self.dense_reward)

    def reset(self, key: jax.Array) -> State:
        k_obj, k_goal, k_vel = jax.random.split(key, 3)
        # Slide-joint offsets, in the model's joint order (y first, then x).
        (gy0, gy1), (gx0, gx1) = self._GOAL_RANGES[self.kind]
        goal_off = jax.random.uniform(k_goal, (2,), minval=jnp.array([gy0, gx0]),
                                      maxval=jnp.array([gy1, gx1]))
        obj_off = jax.random.uniform(k_obj, (2,), minval=jnp.array([-0.3, -0.2]),
                                     maxval=jnp.array([-1e-6, 0.2]))
        gap = obj_off - goal_off
        norm = jnp.sqrt(jnp.sum(jnp.square(gap)))
        if self.min_gap_rule == "jaxgcrl":
            obj_off = obj_off * jnp.where(norm < 0.17, 0.17 / jnp.maximum(norm, 1e-6), 1.0)
        else:
            direction = jnp.where(norm > 1e-6, gap / jnp.maximum(norm, 1e-6),
                                  jnp.array([1.0, 0.0]))
            obj_off = jnp.where(norm < 0.17, goal_off + 0.17 * direction, obj_off)
        q = self.env.sys.init_q.at[-4:].set(jnp.concatenate([obj_off, goal_off]))
        qd = jax.random.uniform(k_vel, (self.env.sys.qd_size(),), minval=-0.005, maxval=0.005)
        ps = self.env.pipeline_init(q, qd.at[-4:].set(0.0))
        return _first_state(self, ps, self._inertial_pos(ps, self._goal).astype(jnp.float32))

    step = _pipeline_step


class ReacherGoalDense(ReacherGoal):
    """`ReacherGoal` with the dense reward `-dist(tip, target)` (m) for reward-based baselines
    such as PPO; success metrics as `ReacherGoal`."""

    def __init__(self, **kwargs):
        super().__init__(**{"dense_reward": True, **kwargs})
        self.name = "ReacherGoalDense"


class PusherGoalJaxGCRL(PusherGoal):
    """`PusherGoal` with JaxGCRL's reset rule for close starts (`min_gap_rule="jaxgcrl"`), for
    runs in JaxGCRL's exact task (`benchmarks/crl_vs_jaxgcrl.py`)."""

    def __init__(self, **kwargs):
        super().__init__(**{"min_gap_rule": "jaxgcrl", **kwargs})
        self.name = "PusherGoalJaxGCRL"


GOAL_ENVS = {"PointMaze": PointMaze, "DetourMaze": DetourMaze, "ReacherGoal": ReacherGoal,
             "AntGoal": AntGoal, "PusherGoal": PusherGoal, "DetourMazeDense": DetourMazeDense,
             "ReacherGoalDense": ReacherGoalDense, "ReacherGoalJaxGCRL": ReacherGoalJaxGCRL,
             "PusherGoalJaxGCRL": PusherGoalJaxGCRL}
