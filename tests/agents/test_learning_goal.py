"""Learning (slow, still run in CI): contrastive agents reach goals with no reward.

CRL and CPPO reach an eval success rate (`eval/episode_success_any`, 256 deterministic episodes)
of at least 0.8 on `PointMaze` (a random policy: ~0.2) and twice the straight-line policy's on
`DetourMaze`; CRL beats a random policy on
`ReacherGoal` by a clear margin (with JAXRL_TEST_ALL_AGENTS=1). Budgets (env steps, wall time on
2 cores) are in `benchmarks/RESULTS.md`.
"""

import dataclasses
import os
import time

import jax
import pytest

from jaxrl import configs, envs
from jaxrl.engine import rollout, wrappers
from jaxrl.run import runner


def _train(name, **train_overrides):
    preset = configs.get(name)
    cfg, train = preset.agent_config, dataclasses.replace(preset.train, **train_overrides)
    start = time.time()
    result = runner.train(preset.agent, preset.env, train, cfg, run_dir=None, progress=False)
    rates = [round(r["eval/episode_success_any"], 3) for r in result.records]
    steps = [round(r["eval/episode_success"], 1) for r in result.records]
    print(f"{name}: wall {time.time() - start:.0f} s, compile {result.compile_seconds:.0f} s, "
          f"{result.env_steps} env steps, success_any {rates}, time near goal {steps}")
    assert result.records[-1]["eval/num_episodes"] == train.num_eval_envs
    return rates, steps


def _random_policy(env_name, num_episodes=256):
    env = envs.make(env_name)
    batch = wrappers.wrap_for_eval(env, num_episodes, env.episode_length)

    def policy(obs, key):
        return jax.random.uniform(key, (obs.shape[0], env.action_size), minval=-1.0,
                                  maxval=1.0), {}

    out = jax.jit(lambda k: rollout.evaluate(batch, policy, k, env.episode_length))(
        jax.random.PRNGKey(0))
    return float(out["eval/episode_success_any"]), float(out["eval/episode_success"])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["crl-pointmaze-cpu", "cppo-pointmaze-cpu"])
def test_point_maze_success_rate(name):
    rates, _ = _train(name)
    # "Reaches": the best evaluation of the run (one per chunk), as the off-policy tests. A
    # straight-line policy that ignores the central block scores ~0.87 here; see RESULTS.md.
    # CPPO's preset reaches 0.84-0.89 on seeds 0-7 (AMD EPYC; RESULTS, "CPPO across seeds and
    # CPUs"); with CPPO's default log-std floor two of six seeds sat at 0.54 and 0.71.
    assert max(rates) >= 0.8, rates


@pytest.mark.slow
@pytest.mark.parametrize("name,steps,threshold", [("crl-detourmaze-cpu", 600_000, 0.6),
                                                  ("cppo-detourmaze-cpu", 1_280_000, 0.35)])
def test_detour_maze_beats_straight_line(name, steps, threshold):
    """The first 0.6M (CRL) or 1.28M (CPPO) env steps of the DetourMaze presets (their settings,
    two chunks): every goal lies at least 5 cells away along the maze, where a straight-line
    policy that ignores walls reaches 0.176 and a random one 0.002
    (tests/envs/test_goal_envs.py); twice the straight line takes detours. CRL asks 0.6, which
    needs its `random_goals` (without them 2-layer encoders read 0.36 / 0.43 over 1.2M steps):
    the preset's 8-layer encoders read 0.75 / 0.79 over its first two 300k chunks on seed 0 (AMD
    EPYC), the mean of seeds 0-2 0.74 / 0.72 and of seeds 3-5 0.61 / 0.82. CPPO asks twice the
    straight line (0.35), which each of three seeds passes with the preset's log-std floor of
    -1: the two chunks read 0.36 / 0.57, 0.29 / 0.55 and 0.30 / 0.39 on seeds 0-2 (AMD EPYC).
    The same seed takes another path on another CPU: at CPPO's default floor of -2 seed 0 read
    0.39 / 0.71 on an Intel Xeon and 0.32 / 0.49 on the EPYC (benchmarks/RESULTS.md, "CPPO
    across seeds and CPUs")."""
    rates, _ = _train(name, total_env_steps=steps, num_chunks=2)
    assert max(rates) >= threshold, rates


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("JAXRL_TEST_ALL_AGENTS"),
                    reason="set JAXRL_TEST_ALL_AGENTS=1 (a Brax env compile; CRL's default-suite "
                    "learning test is PointMaze)")
def test_crl_beats_random_on_reacher():
    random_rate, random_steps = _random_policy("ReacherGoal")
    rates, steps = _train("crl-reacher-cpu")
    print(f"random policy: success_any {random_rate:.3f}, time near goal {random_steps:.1f}")
    # Time near the goal is the clear margin: a random arm sweeps past the target (success_any
    # ~0.5) but stays there a few steps only.
    assert steps[-1] >= 3.0 * random_steps and steps[-1] >= 10.0, (steps, random_steps)
    assert rates[-1] > random_rate + 0.2, (rates, random_rate)
