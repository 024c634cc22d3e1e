"""Grid mazes for goal reaching: `PointMaze` (a ring) and `DetourMaze` (goals behind walls),
pure JAX, and `goal_terms`, the goal contract's observation, reward and metrics that every env of
`jaxrl.envs.goal` computes (the contract and the table of envs are in that module's docstring).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.engine.types import State

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


def goal_terms(state_vec: jax.Array, goal: jax.Array, goal_indices: tuple[int, ...],
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
        obs, _, metrics = goal_terms(pos, goal, self.goal_indices, self.threshold,
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
        obs, reward, metrics = goal_terms(new, goal, self.goal_indices, self.threshold,
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


class DetourMazeDense(DetourMaze):
    """`DetourMaze` with the dense reward `-dist(pos, goal)` (straight-line, so walls make it
    misleading) for reward-based baselines such as PPO; success metrics as `DetourMaze`."""

    name = "DetourMazeDense"

    def __init__(self, **kwargs):
        super().__init__(**{"dense_reward": True, **kwargs})
