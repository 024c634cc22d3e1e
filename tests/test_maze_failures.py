"""`benchmarks/maze_failures.py`: the failure summary of `DetourMaze` episodes, on positions
written by hand."""

import os
import sys

import numpy as np

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
sys.path.insert(0, BENCH)

import maze_failures as mf  # noqa: E402

from jaxrl.envs.maze import DetourMaze  # noqa: E402


def test_failure_summary_by_hand():
    env = DetourMaze()
    steps = 12
    pos = np.zeros((steps + 1, 3, 2), np.float32)
    # Episode 0 walks from r1c1 and reaches its goal; episode 1 starts in r3c4 and stops at
    # the edge of the opening below r3c1 (pressing into the wall under r3c2); episode 2 starts
    # in r5c5 and wanders in r5c4 without stopping.
    pos[:, 0] = np.linspace([1.5, 1.5], [5.5, 1.5], steps + 1)
    pos[:, 1] = np.linspace([4.5, 3.5], [2.02, 3.95], steps + 1)
    pos[-10:, 1] = [2.02, 3.95]
    pos[:, 2] = [5.5, 5.5]
    pos[1:, 2, 0] = 4.5 + 0.1 * (np.arange(steps) % 2)
    goal = np.array([[5.5, 1.5], [4.5, 5.5], [1.5, 1.5]], np.float32)
    success = np.zeros((steps, 3), np.float32)
    success[-1, 0] = 1.0
    out = mf.failure_summary(env, pos, goal, success)
    assert out["success_any"] == 1 / 3
    # Path lengths start -> goal: r1c1 -> r1c5 is 4 cells; r3c4 -> r5c4 is 3 + 2 + 3 = 8;
    # r5c5 -> r1c1 is 16.
    assert out["by_path_length"] == {4: 1.0, 8: 0.0, 16: 0.0}
    assert out["failed"] == 2
    # Cells left at the end: r3c2 -> r5c4 is 6 (r3c1, r4c1, r5c1, r5c2, r5c3, r5c4);
    # r5c4 -> r1c1 is 15.
    left = [0] * 17
    left[6] = left[15] = 1
    assert out["cells_left"] == left
    assert out["still_share"] == 0.5  # episode 1 is still, episode 2 is not
    assert sorted(out["top_pairs"]) == [(("r3c2", "r5c4"), 1), (("r5c4", "r1c1"), 1)]
    (point, g), = out["still_points"]
    np.testing.assert_allclose(point, [2.02, 3.95])
    np.testing.assert_allclose(g, [4.5, 5.5])
