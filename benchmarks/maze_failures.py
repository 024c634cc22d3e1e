"""Where a `DetourMaze` policy fails: success by path length, where failed episodes end, and
the contrastive critic at the points where they stop, for the mode and for sampled actions.

    .venv/bin/python benchmarks/maze_failures.py RUN_DIR [--chunks 2 8] [--seed-index 0]

`RUN_DIR` is a `jaxrl train` run on `DetourMaze` (any agent; `--keep-checkpoints` keeps the
chunks to compare). For each chunk and each way of acting (`mode`: `act(deterministic=True)`,
what `jaxrl eval` and the in-training evaluation use; `sample`: actions drawn as in training)
it rolls out `--episodes` episodes from the same starts and prints:

- success_any overall and by the start-to-goal path length in cells (5-16);
- for failed episodes, how many cells along the maze they end from the goal, whether they end
  still (the last 10 positions within 0.01: a fixed point of the policy), and the most common
  (end cell, goal cell) pairs, cells named `r<row>c<column>` of `SERPENTINE_MAZE`;
- with `--critic` (CRL and CPPO), at the first few still end points: the critic's best action
  over a 21 x 21 grid of `[-1, 1]^2` and its values for left, right, up (-y), down (+y) and no
  move, against the action the mode takes there.

Findings are in `benchmarks/RESULTS.md` ("Why success drifts on `DetourMaze`").
"""

from __future__ import annotations

import argparse
from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl import api
from jaxrl.envs.maze import DetourMaze, path_lengths

GRID = np.stack(np.meshgrid(np.linspace(-1, 1, 21), np.linspace(-1, 1, 21)), -1)
GRID = GRID.reshape(-1, 2).astype(np.float32)
NAMED = {"left": (-1.0, 0.0), "right": (1.0, 0.0), "up": (0.0, -1.0), "down": (0.0, 1.0),
         "none": (0.0, 0.0)}


def cell_index(env: DetourMaze, pos: np.ndarray) -> np.ndarray:
    """Free-cell index `[...]` of positions `[..., 2]` (x = column, y = row)."""
    lookup = -np.ones(env.walls.shape, np.int64)
    for i, (r, c) in enumerate(env.free_cells):
        lookup[r, c] = i
    return lookup[np.floor(pos[..., 1]).astype(int), np.floor(pos[..., 0]).astype(int)]


def rollout(agent, state, env: DetourMaze, key, episodes: int, deterministic: bool):
    """Positions `[T + 1, E, 2]`, goals `[E, 2]` and per-step success `[T, E]` of `episodes`
    episodes without reset."""

    @jax.jit
    def run(key):
        k_reset, k_act = jax.random.split(key)
        s0 = jax.vmap(env.reset)(jax.random.split(k_reset, episodes))

        def step(s, k):
            action, _ = agent.act(state, s.obs, k, deterministic)
            s = jax.vmap(env.step)(s, action)
            return s, (s.data["pos"], s.metrics["success"])

        _, (pos, success) = jax.lax.scan(step, s0, jax.random.split(k_act, env.episode_length))
        return jnp.concatenate([s0.data["pos"][None], pos]), s0.info["goal"], success

    return tuple(np.asarray(x) for x in run(key))


def failure_summary(env: DetourMaze, pos: np.ndarray, goal: np.ndarray,
                    success: np.ndarray) -> dict:
    """Success by path length and where failed episodes end (see the module docstring)."""
    lengths = path_lengths(env.walls, env.free_cells)
    start, end, goal_cell = (cell_index(env, pos[0]), cell_index(env, pos[-1]),
                             cell_index(env, goal))
    hit = success.max(0) > 0
    by_length = {int(d): float(hit[lengths[start, goal_cell] == d].mean())
                 for d in np.unique(lengths[start, goal_cell])}
    fail = ~hit
    still = np.abs(pos[-10:] - pos[-1]).max(axis=(0, 2)) < 0.01
    names = [f"r{r}c{c}" for r, c in env.free_cells]
    pairs = Counter((names[e], names[g]) for e, g in zip(end[fail], goal_cell[fail], strict=True))
    return {"success_any": float(hit.mean()), "by_path_length": by_length,
            "failed": int(fail.sum()),
            "cells_left": np.bincount(lengths[end[fail], goal_cell[fail]],
                                      minlength=lengths.max() + 1).tolist(),
            "still_share": float(still[fail].mean()) if fail.any() else 0.0,
            "top_pairs": pairs.most_common(6),
            "still_points": [(pos[-1, i], goal[i]) for i in np.where(fail & still)[0]]}


def critic_at(agent, state, points) -> list[str]:
    """The critic's grid argmax and named-action values against the mode's action."""
    from jaxrl.agents.common.contrastive import CRITIC_KEYS

    nets = agent.nets
    critic = {k: state.params[k] for k in CRITIC_KEYS if k in state.params}
    lines = []
    for s, g in points:
        s_, g_ = (jnp.tile(jnp.asarray(x, jnp.float32)[None], (len(GRID), 1)) for x in (s, g))
        f = np.asarray(nets.q_value(critic, s_, jnp.asarray(GRID), g_))
        named = {n: f[np.abs(GRID - np.asarray(a)).sum(1).argmin()] for n, a in NAMED.items()}
        mode = np.asarray(agent.act(state, jnp.concatenate([s_[:1], g_[:1]], -1),
                                    jax.random.PRNGKey(0), True)[0][0])
        f_mode = float(nets.q_value(critic, s_[:1], jnp.asarray(mode)[None], g_[:1])[0])
        lines.append(f"    at {np.round(s, 2)} goal {np.round(g, 2)}: critic best "
                     f"{np.round(GRID[f.argmax()], 1)} ({f.max():.2f}); "
                     + " ".join(f"{n} {v:.2f}" for n, v in named.items())
                     + f" | mode {np.round(mode, 2)} ({f_mode:.2f})")
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir")
    p.add_argument("--chunks", type=int, nargs="+", default=None,
                   help="checkpoints to read (default: the latest)")
    p.add_argument("--seed-index", type=int, default=0)
    p.add_argument("--episodes", type=int, default=1024)
    p.add_argument("--critic", action="store_true", help="probe the contrastive critic too")
    args = p.parse_args()
    env = DetourMaze()
    for chunk in args.chunks or [None]:
        run = api.load_run(args.run_dir, chunk)
        state = jax.tree.map(lambda x: x[args.seed_index], run.runner.agent_state)
        for label, det in (("mode", True), ("sample", False)):
            out = failure_summary(env, *rollout(run.agent, state, env, jax.random.PRNGKey(0),
                                                args.episodes, det))
            by = " ".join(f"{k}:{v:.2f}" for k, v in out["by_path_length"].items())
            print(f"chunk {run.chunk} {label}: success_any {out['success_any']:.3f}; "
                  f"by path length {by}")
            print(f"  failed {out['failed']}: cells left {out['cells_left']}, still at the "
                  f"end {out['still_share']:.2f}; (end, goal) {out['top_pairs']}")
            if args.critic and det:
                print("\n".join(critic_at(run.agent, state, out["still_points"][:4])))


if __name__ == "__main__":
    main()
