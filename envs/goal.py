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
| `AntGoal` | qpos, qvel (29) | torso xy | (0, 1) | 0.5 m | 1000 |
| `PusherGoal` | arm q, arm qd, tip xyz, object xyz (20) | goal xyz | (17, 18, 19) | 0.1 m | 1000 |

`DetourMazeDense` and `ReacherGoalDense` are the same tasks with the reward `-dist` (baselines).

Sources: JaxGCRL (Bortkiewicz et al., ICLR 2025) `jaxgcrl/envs/{reacher,ant,pusher}.py` and
`jaxgcrl/utils/env.py` (backends: `generalized` for reacher and pusher, `spring` for ant);
Brax 0.14.2 `brax/envs/{reacher,ant,pusher}.py` for the models, reset noise and the reacher
target distribution. `PointMaze` and `DetourMaze` are ours.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.engine.types import State
from jaxrl.envs.adapters import BraxEnv

RING_MAZE = "#####\n#...#\n#.#.#\n#...#\n#####"
"""Default `PointMaze` layout: 5 x 5 cells, walls on the border and in the centre, free cells
forming a ring of 8 around the central wall block."""

SERPENTINE_MAZE = "#######\n#.....#\n#####.#\n#.....#\n#.#####\n#.....#\n#######"
"""Default `DetourMaze` layout: three corridors of 5 cells joined at alternate ends (17 free
cells, a path of 16 cells from one end to the other)."""


def path_lengths(walls: np.ndarray, free: np.ndarray) -> np.ndarray:
    """`[F, F]` shortest-path lengths in cells (4-neighbour moves through free cells) between
    the free cells `free` (`[F, 2]`, row and column) of a wall grid; -1 where unreachable."""
    index = {tuple(c): i for i, c in enumerate(free)}
    out = -np.ones((len(free), len(free)), np.int64)
    for i, cell in enumerate(index):
        out[i, i], frontier = 0, [cell]
        while frontier:
            nxt = []
            for r, c in frontier:
                for nb in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
                    j = index.get(nb)
                    if j is not None and out[i, j] < 0:
                        out[i, j] = out[i, index[(r, c)]] + 1
                        nxt.append(nb)
            frontier = nxt
    return out


def _goal_terms(state_vec: jax.Array, goal: jax.Array, goal_indices: tuple[int, ...],
                threshold: float, dense_reward: bool):
    """`(obs, reward, metrics)` of the contract from one state vector and goal.

    Distances are computed from the float32 observation itself, so `success` agrees with what
    a learner recomputes from `obs`.
    """
    obs = jnp.concatenate([state_vec, goal]).astype(jnp.float32)
    state_dim = state_vec.shape[0]
    achieved = obs[jnp.asarray(goal_indices)]
    dist = jnp.sqrt(jnp.sum(jnp.square(achieved - obs[state_dim:])))
    success = (dist < threshold).astype(jnp.float32)
    reward = -dist if dense_reward else success
    return obs, reward.astype(jnp.float32), {"success": success, "dist": dist}


class PointMaze:
    """A 2-D point in a grid maze: pure JAX, compiles in seconds; for CI learning tests.

    Geometry: `layout` is a grid of cells, one row per line, `#` a wall and `.` free. Cell
    (row r, column c) covers `x in [c, c + 1)`, `y in [r, r + 1)` (cell size 1, y grows with
    the row index); outside the grid counts as wall. The default `RING_MAZE` is a ring of 8 free
    cells around a central wall block.

    Dynamics: the action `a` (float32 `[2]`, clipped to [-1, 1]) moves the point by
    `step_size * a` per step. A move whose end point, or either axis-aligned corner point, lies
    in a wall is replaced by the x-only move, else the y-only move, else no move: the point
    slides along walls and never cuts a wall corner.

    Reset: start and goal are uniform over free cells (the goal in a different cell than the
    start whenever the maze has two or more free cells), each uniform inside its cell at least
    `margin` away from the cell's edges. With `min_path_cells = d > 1` the goal cell is uniform
    over the cells at least `d` cells from the start's along the maze (`path_lengths`), so walls
    stand between start and goal (`DetourMaze`).

    Contract: `state = [x, y]` (`state_dim = 2`), `goal = [gx, gy]`, `goal_indices = (0, 1)`,
    `obs = [x, y, gx, gy]` float32 `[4]`; `success` when `dist < threshold` (0.5 cells).
    Never terminates; time limit `episode_length` (50) steps.

    Difficulty (defaults): a uniform random policy reaches the goal at least once
    (`eval/episode_success_any`) in 0.195 of 256 episodes of 50 steps (seed 0; 0.16 to 0.21 over
    seeds 0-2; about 2 steps near the goal per episode), while the shortest path between two
    points of the ring is at most about 4.2 cells (17 steps) and a shortest-path policy succeeds
    in every episode (tests/test_goal_envs.py), so a learned policy has room to exceed 0.8.
    """

    name = "PointMaze"
    action_size = 2
    goal_indices = (0, 1)
    state_dim = 2
    dt = 0.1  # nominal control period (s); the maze itself has no time scale

    def __init__(self, layout: str = RING_MAZE, step_size: float = 0.25, threshold: float = 0.5,
                 margin: float = 0.1, episode_length: int = 50, dense_reward: bool = False,
                 min_path_cells: int = 1):
        rows = [r.strip() for r in layout.strip().splitlines() if r.strip()]
        if not rows or len({len(r) for r in rows}) != 1 or set("".join(rows)) - set("#."):
            raise ValueError("layout must be a rectangle of '#' (wall) and '.' (free) cells, "
                             f"one row per line; got {layout!r}")
        walls = np.array([[ch == "#" for ch in r] for r in rows], bool)
        free = np.argwhere(~walls)
        if len(free) == 0:
            raise ValueError("layout has no free cell")
        if not 0.0 <= margin < 0.5:
            raise ValueError(f"margin must be in [0, 0.5), got {margin}")
        self.min_path_cells = int(min_path_cells)
        self.far = None  # bool [F, F]: goal cells allowed from each start cell
        if self.min_path_cells > 1:
            lengths = path_lengths(walls, free)
            if (lengths < 0).any():
                raise ValueError("min_path_cells needs a layout whose free cells are connected")
            self.far = lengths >= self.min_path_cells
            if not self.far.any(axis=1).all():
                raise ValueError(f"min_path_cells = {min_path_cells}: some free cell has no "
                                 f"cell that far (longest path {lengths.max()} cells)")
        self.layout = "\n".join(rows)
        self.walls = walls
        self.free_cells = free  # int [F, 2]: (row, column)
        self.step_size = float(step_size)
        self.threshold = float(threshold)
        self.margin = float(margin)
        self.episode_length = int(episode_length)
        self.dense_reward = bool(dense_reward)
        self.action_low = -np.ones(2, np.float32)
        self.action_high = np.ones(2, np.float32)

    @property
    def unwrapped(self):
        return self

    def is_free(self, pos: jax.Array) -> jax.Array:
        """True where the point `pos` (float `[..., 2]`, x and y) lies in a free cell."""
        h, w = self.walls.shape
        col = jnp.floor(pos[..., 0]).astype(jnp.int32)
        row = jnp.floor(pos[..., 1]).astype(jnp.int32)
        inside = (row >= 0) & (row < h) & (col >= 0) & (col < w)
        wall = jnp.asarray(self.walls)[jnp.clip(row, 0, h - 1), jnp.clip(col, 0, w - 1)]
        return inside & ~wall

    def _sample_point(self, key, cell):
        offset = self.margin + jax.random.uniform(key, (2,)) * (1.0 - 2.0 * self.margin)
        corner = jnp.stack([cell[1], cell[0]]).astype(jnp.float32)  # (x, y) = (column, row)
        return corner + offset

    def reset(self, key: jax.Array) -> State:
        key_start, key_goal, key_pos, key_gpos = jax.random.split(key, 4)
        cells = jnp.asarray(self.free_cells)
        n = len(self.free_cells)
        start = jax.random.randint(key_start, (), 0, n)
        goal_cell = start
        if self.far is not None:
            allowed = jnp.asarray(self.far)[start]
            goal_cell = jax.random.categorical(key_goal, jnp.where(allowed, 0.0, -jnp.inf))
        elif n > 1:
            goal_cell = (start + 1 + jax.random.randint(key_goal, (), 0, n - 1)) % n
        pos = self._sample_point(key_pos, cells[start])
        goal = self._sample_point(key_gpos, cells[goal_cell])
        obs, _, metrics = _goal_terms(pos, goal, self.goal_indices, self.threshold,
                                      self.dense_reward)
        zero = jnp.zeros((), jnp.float32)
        return State(data={"pos": pos}, obs=obs, reward=zero, done=zero, metrics=metrics,
                     info={"goal": goal})

    def step(self, state: State, action: jax.Array) -> State:
        pos = state.data["pos"]
        move = self.step_size * jnp.clip(action, -1.0, 1.0)
        x_only = pos + move * jnp.array([1.0, 0.0])
        y_only = pos + move * jnp.array([0.0, 1.0])
        full_ok = self.is_free(pos + move) & self.is_free(x_only) & self.is_free(y_only)
        new = jnp.where(full_ok, pos + move,
                        jnp.where(self.is_free(x_only), x_only,
                                  jnp.where(self.is_free(y_only), y_only, pos)))
        goal = state.info["goal"]
        obs, reward, metrics = _goal_terms(new, goal, self.goal_indices, self.threshold,
                                           self.dense_reward)
        return state.replace(data={"pos": new}, obs=obs, reward=reward,
                             done=jnp.zeros((), jnp.float32), metrics=metrics)


class DetourMaze(PointMaze):
    """`PointMaze` on `SERPENTINE_MAZE` with every goal at least 5 cells from the start along
    the maze (`min_path_cells`), so reaching it needs a detour around walls; 100-step episodes
    (the longest path is 16 cells, about 64 steps at full speed).

    Baselines (`eval/episode_success_any` over 512 episodes, key 0,
    tests/envs/test_goal_envs.py): a straight-line policy that ignores walls
    (`a = clip((goal - pos) / step_size, -1, 1)`, sliding along them) 0.176, a uniform random
    policy 0.002, the shortest-path policy 1.0. On the ring `PointMaze` the straight line
    scores 0.873, so success there does not show that an agent learned detours.
    """

    name = "DetourMaze"

    def __init__(self, layout: str = SERPENTINE_MAZE, step_size: float = 0.25,
                 threshold: float = 0.5, margin: float = 0.1, episode_length: int = 100,
                 dense_reward: bool = False, min_path_cells: int = 5):
        super().__init__(layout, step_size, threshold, margin, episode_length, dense_reward,
                         min_path_cells)


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
    """

    goal_indices = (6, 7)
    state_dim = 8

    def __init__(self, episode_length: int = 50, threshold: float = 0.05,
                 dense_reward: bool = False, backend: str = "generalized"):
        from brax import envs as brax_envs

        super().__init__("ReacherGoal", brax_envs.get_environment("reacher", backend=backend),
                         episode_length)
        self.threshold = float(threshold)
        self.dense_reward = bool(dense_reward)
        self._target = self.env.sys.link_names.index("target")

    def _terms(self, ps, goal):
        q, qd = ps.q[:2], ps.qd[:2]
        tip = _point_in_link(ps, 1, (0.11, 0.0, 0.0))
        state_vec = jnp.concatenate([jnp.cos(q), jnp.sin(q), qd, tip[:2]])
        return _goal_terms(state_vec, goal, self.goal_indices, self.threshold, self.dense_reward)

    def reset(self, key: jax.Array) -> State:
        ps = self.env.reset(key).pipeline_state
        return _first_state(self, ps, ps.x.pos[self._target, :2].astype(jnp.float32))

    step = _pipeline_step


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
        obs, reward, gm = _goal_terms(state_vec, goal, self.goal_indices, self.threshold,
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
    """

    goal_indices = (17, 18, 19)
    state_dim = 20
    _GOAL_RANGES = {"easy": ((-0.55, -0.25), (-0.2, 0.2)),
                    "hard": ((-0.65, 0.35), (-0.55, 0.45))}

    def __init__(self, episode_length: int = 1000, threshold: float = 0.1, kind: str = "easy",
                 dense_reward: bool = False, backend: str = "generalized"):
        from brax import envs as brax_envs

        if kind not in self._GOAL_RANGES:
            raise ValueError(f"kind must be one of {sorted(self._GOAL_RANGES)}, got {kind!r}")
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
        return _goal_terms(state_vec, goal, self.goal_indices, self.threshold, self.dense_reward)

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
        direction = jnp.where(norm > 1e-6, gap / jnp.maximum(norm, 1e-6), jnp.array([1.0, 0.0]))
        obj_off = jnp.where(norm < 0.17, goal_off + 0.17 * direction, obj_off)
        q = self.env.sys.init_q.at[-4:].set(jnp.concatenate([obj_off, goal_off]))
        qd = jax.random.uniform(k_vel, (self.env.sys.qd_size(),), minval=-0.005, maxval=0.005)
        ps = self.env.pipeline_init(q, qd.at[-4:].set(0.0))
        return _first_state(self, ps, self._inertial_pos(ps, self._goal).astype(jnp.float32))

    step = _pipeline_step


class DetourMazeDense(DetourMaze):
    """`DetourMaze` with the dense reward `-dist(pos, goal)` (straight-line, so walls make it
    misleading) for reward-based baselines such as PPO; success metrics as `DetourMaze`."""

    name = "DetourMazeDense"

    def __init__(self, **kwargs):
        super().__init__(**{"dense_reward": True, **kwargs})


class ReacherGoalDense(ReacherGoal):
    """`ReacherGoal` with the dense reward `-dist(tip, target)` (m) for reward-based baselines
    such as PPO; success metrics as `ReacherGoal`."""

    def __init__(self, **kwargs):
        super().__init__(**{"dense_reward": True, **kwargs})
        self.name = "ReacherGoalDense"


GOAL_ENVS = {"PointMaze": PointMaze, "DetourMaze": DetourMaze, "ReacherGoal": ReacherGoal,
             "AntGoal": AntGoal, "PusherGoal": PusherGoal, "DetourMazeDense": DetourMazeDense,
             "ReacherGoalDense": ReacherGoalDense}
