"""Seeds sharded over (simulated) devices give the same result as one device."""

import json
import os
import subprocess
import sys

import pytest

SCRIPT = r"""
import dataclasses, json, sys
import jax, numpy as np
from jaxrl import configs
from jaxrl.run import runner
from jaxrl.agents import PPOConfig
p = configs.get("ppo-toy-cpu")
cfg = dataclasses.replace(p.train, total_env_steps=2 * 64 * 16, num_chunks=2, num_seeds=4,
                          num_eval_envs=8)
res = runner.train("ppo", "PointMass1D", cfg, p.agent_config,
                   progress=False)
leaf = jax.tree.leaves(res.runner.agent_state.params)[0]
print(json.dumps({"devices": len(jax.devices()),
                  "shards": len(leaf.sharding.device_set),
                  "sum": [float(x) for x in np.asarray(leaf).reshape(4, -1).sum(1)]}))
"""


def _run(devices: int) -> dict:
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
               JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                         text=True, timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # two subprocesses that compile a run each: in the default suite only
def test_seed_axis_sharded_over_devices_matches_one_device():
    one, four = _run(1), _run(4)
    assert (one["devices"], one["shards"]) == (1, 1)
    assert (four["devices"], four["shards"]) == (4, 4)
    for a, b in zip(one["sum"], four["sum"], strict=True):
        assert abs(a - b) < 1e-4 * max(1.0, abs(a))
    assert len(set(round(x, 5) for x in four["sum"])) == 4  # seeds differ
