"""Learning (slow, still run in CI): the README default reaches eval return >= 800."""

import time

import pytest

from jaxrl.run import cli, runner


@pytest.mark.slow
def test_default_preset_learns_cartpole_balance():
    """`jaxrl train` with no arguments: PPO, CartpoleBalance, preset ppo-dmc-cpu.

    Random policy ~280, max 1000. Deterministic eval on 64 full 1000-step episodes.
    """
    _, agent, env, cfg, agent_cfg = cli.resolve([])
    assert (agent, env) == ("ppo", "CartpoleBalance")
    start = time.time()
    result = runner.train(agent, env, cfg, agent_cfg, run_dir=None, progress=False)
    final = result.records[-1]
    print(f"wall {time.time() - start:.0f} s, compile {result.compile_seconds:.0f} s, "
          f"train {result.train_seconds:.0f} s, eval {final['eval/episode_return']:.1f}")
    assert final["eval/num_episodes"] == cfg.num_eval_envs
    assert final["eval/episode_return"] >= 800.0, [r.get("eval/episode_return")
                                                   for r in result.records]
