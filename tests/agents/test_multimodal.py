"""Multimodality, the reason to pick a flow policy: on the one-step `TwoModes` bandit (reward 1 at
a = -0.7 and a = +0.7, ~0 at a = 0) the trained stochastic policy keeps mass on both modes.

Each preset trains in seconds; 4,000 actions are then sampled for the bandit's observation.
Thresholds: at least 25% of the mass within 0.2 of each mode, and at least 80% near one of
them (the untrained flows, tanh of about N(0, 1), hold roughly 22% near each mode and 16% near 0,
so training must concentrate the mass on both), for at least 2 of 3 seeds trained together
(vmapped): whether one seed ends on one mode or on both depends on float rounding (FPO's seed 0
kept both modes on an AVX-512 CPU and collapsed on an AVX2 one, while all 6 seeds vmapped together
kept both there). Gaussian PPO is trained and reported beside
them (printed, and recorded in `benchmarks/RESULTS.md`): a tanh-Gaussian has one mode.
"""

import dataclasses
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import configs
from jaxrl.envs.toy import TwoModes
from jaxrl.run import runner

# SAC Flow does not keep both modes (measured; `benchmarks/RESULTS.md`): strict xfail, so a
# change that makes it pass shows up and the marker must go.
_FLOW_SAC_COLLAPSES = pytest.mark.xfail(strict=True, reason=(
    "SAC Flow concentrates on one mode or stays a broad noise-dominated spread: its entropy "
    "surrogate (the path log-likelihood) scores only the injected noise, not the spread of the "
    "map A_0 -> A_K; Flow-G and Flow-T, fixed or tuned alpha, reward width 0.15 or 0.3"))
# PolicyFlow's run on the same bandit, with the same criterion: tests/agents/test_policyflow.py.
# The two runs whose outcome is recorded in benchmarks/RESULTS.md (SAC Flow's collapse, Gaussian
# PPO) run with JAXRL_TEST_ALL_AGENTS=1, to keep the default suite inside its time budget.
_ALL_AGENTS = pytest.mark.skipif(not os.environ.get("JAXRL_TEST_ALL_AGENTS"),
                                 reason="set JAXRL_TEST_ALL_AGENTS=1 (recorded in RESULTS.md)")
FLOW_PRESETS = ["fpo-twomodes-cpu",
                pytest.param("flow-sac-twomodes-cpu", marks=[_FLOW_SAC_COLLAPSES, _ALL_AGENTS])]


def _mode_masses(name: str, num_seeds: int = 1, num_samples: int = 4000) -> list[tuple]:
    """Per seed: (mass near the low mode, near the high mode, near 0) of the trained policy."""
    preset = configs.get(name)
    agent_cfg = preset.agent_config
    cfg = dataclasses.replace(preset.train, num_seeds=num_seeds)
    result = runner.train(preset.agent, preset.env, cfg, agent_cfg, run_dir=None, progress=False)
    agent, _, _ = runner.build(preset.agent, preset.env, cfg, agent_cfg)
    act = jax.jit(lambda s, o, k: agent.act(s, o, k, False))
    low, high = TwoModes.modes
    out = []
    for i in range(num_seeds):
        state = jax.tree.map(lambda x, i=i: x[i], result.runner.agent_state)
        a = np.asarray(act(state, jnp.ones((num_samples, 1)), jax.random.key(7))[0][:, 0])
        masses = (np.mean(np.abs(a - low) < 0.2), np.mean(np.abs(a - high) < 0.2),
                  np.mean(np.abs(a) < 0.2))
        print(f"{name} seed {i}: mass near {low}: {masses[0]:.3f}, near {high}: "
              f"{masses[1]:.3f}, near 0: {masses[2]:.3f}; histogram on [-1, 1] (10 bins): "
              f"{np.histogram(a, bins=10, range=(-1, 1))[0].tolist()}")
        out.append(masses)
    return out


def _both_modes(masses) -> bool:
    low, high, _ = masses
    return low >= 0.25 and high >= 0.25 and low + high >= 0.8


@pytest.mark.slow
@pytest.mark.parametrize("name", FLOW_PRESETS)
def test_flow_policies_keep_both_modes(name):
    per_seed = _mode_masses(name, num_seeds=3)
    assert sum(map(_both_modes, per_seed)) >= 2, per_seed


@pytest.mark.slow
@_ALL_AGENTS
def test_gaussian_ppo_on_the_same_bandit_is_reported():
    """The comparison: PPO's tanh-Gaussian has one mode. Even centred at 0 with the best std
    (about 0.9), a tanh-Gaussian holds at most ~22% within 0.2 of each of +-0.7, so it cannot
    meet the flow policies' criterion; after training it sits on one mode (printed)."""
    low, high, _ = _mode_masses("ppo-twomodes-cpu")[0]
    assert min(low, high) < 0.25, (low, high)
