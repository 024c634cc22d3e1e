"""`TrainConfig.num_devices`: one run split over 4 simulated CPU devices (`jit` shardings).

One subprocess with `--xla_force_host_platform_device_count=4` runs every check, so the device
count is fixed before JAX starts: PPO on 4 devices equals PPO on 1 device of the same process
(same global batch) within 1e-5 after 3 updates; SAC's sharded run is bit-stable across two runs,
its replay is split over the devices and its counters add up; a SAC run killed after chunk 1
resumes onto the same mesh and ends bit-identical; every agent's state gets shardings that
divide its arrays.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SCRIPT = r"""
import dataclasses, json, os, shutil, sys
import jax, numpy as np
from jaxrl import configs
from jaxrl.engine import contract
from jaxrl.run import runner
from jaxrl.agents import PPOConfig, SACConfig

out = {"devices": len(jax.devices())}
tmp = sys.argv[1]

def flat(tree):
    return np.concatenate([np.asarray(x, np.float64).ravel() for x in jax.tree.leaves(tree)])

p = configs.get("ppo-toy-cpu")
steps = 3 * p.train.num_envs * p.train.unroll_length  # 3 updates
ppo = {}
for nd in (1, 4):
    cfg = dataclasses.replace(p.train, total_env_steps=steps, num_chunks=1, num_eval_envs=8,
                              num_devices=nd)
    res = runner.train("ppo", "PointMass1D", cfg, p.agent_config,
                       progress=False)
    ppo[nd] = res
    assert res.runner.iteration.tolist() == [3], res.runner.iteration
out["ppo_max_diff"] = float(np.abs(flat(ppo[1].runner.agent_state.params)
                                   - flat(ppo[4].runner.agent_state.params)).max())
obs = jax.tree.leaves(ppo[4].runner.env_state)[0]
out["ppo_env_shards"] = len({s.device for s in obs.addressable_shards})
out["ppo_layout"] = ppo[4].records[-1]["layout"]
out["ppo_eval_diff"] = abs(ppo[1].records[-1]["eval/episode_return"]
                           - ppo[4].records[-1]["eval/episode_return"])

s = configs.get("sac-toy-cpu")
sac_cfg = SACConfig(**dict(dict(s.agent_overrides), learning_starts=64))
cfg = dataclasses.replace(s.train, num_envs=16, unroll_length=4, num_chunks=2, num_eval_envs=4,
                          total_env_steps=2 * 4 * 16 * 4, num_devices=4)
a = runner.train("sac", "PointMass1D", cfg, sac_cfg, run_dir=os.path.join(tmp, "a"),
                 progress=False)
b = runner.train("sac", "PointMass1D", cfg, sac_cfg, progress=False)
out["sac_bit_stable"] = bool((flat(a.runner) == flat(b.runner)).all())
buf = a.runner.agent_state.buffer
obs = buf.data["obs"]
out["sac_buffer_shards"] = sorted({tuple(sh.data.shape) for sh in obs.addressable_shards})
out["sac_buffer_size"] = int(np.asarray(buf.size)[0])
out["sac_iterations"] = int(np.asarray(a.runner.iteration)[0])
out["sac_env_steps"] = a.env_steps
shutil.copytree(os.path.join(tmp, "a"), os.path.join(tmp, "c"))
shutil.rmtree(os.path.join(tmp, "c", "checkpoints", "2"))
c = runner.resume(os.path.join(tmp, "c"), progress=False)
out["resume_bit_identical"] = bool((flat(a.runner) == flat(c.runner)).all())
out["resume_layout"] = c.records[-1]["layout"]
out["resume_shards"] = len({sh.device for sh in c.runner.agent_state.buffer.data["obs"]
                            .addressable_shards})

bad = []
for name in contract.list_agents():
    env = "PointMaze" if name in ("crl", "cppo") else "PointMass1D"
    cls = contract.lookup(name)[1]
    preset = next(q for q in configs.PRESETS.values() if q.agent == name and "cpu" in q.name)
    tcfg = dataclasses.replace(preset.train, num_devices=4)
    try:
        agent, e, spec = runner.build(name, env, tcfg, cls(**dict(preset.agent_overrides)))
    except ValueError as err:  # an agent with its own multi-device layout
        bad.append(f"{name}: {err}")
        continue
    mesh, shardings = runner.placement(agent, e)
    abstract = runner.checkpoint.abstract_runner(agent, e, None)[0]
    for x, sh in zip(jax.tree.leaves(abstract), jax.tree.leaves(shardings)):
        sh.shard_shape(x.shape)  # raises when a sharded dimension does not divide
out["agents_checked"] = len(contract.list_agents())
out["agents_refused"] = bad
print("RESULT " + json.dumps(out))
"""


def _run(tmp_path) -> dict:
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4",
               JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


@pytest.mark.slow  # one subprocess, a few small compiles (~2 min on 2 cores)
def test_data_parallel_runs_on_four_devices(tmp_path):
    r = _run(tmp_path)
    assert r["devices"] == 4
    # PPO: the same global batch on 4 devices as on 1, after 3 updates.
    assert r["ppo_max_diff"] < 1e-5, r["ppo_max_diff"]
    assert r["ppo_env_shards"] == 4 and r["ppo_layout"] == "data:4"
    assert r["ppo_eval_diff"] < 1e-3
    # SAC: bit-stable, replay split over the devices (16 envs -> 4 per device), counters add up.
    assert r["sac_bit_stable"]
    (shard,) = r["sac_buffer_shards"]  # [member, capacity per env, envs, obs]
    assert shard[0] == 1 and shard[2] == 4
    assert r["sac_iterations"] == 2 * 4 and r["sac_buffer_size"] == 2 * 4 * 4  # rows of 16 envs
    assert r["sac_env_steps"] == 2 * 4 * 16 * 4
    # Killed after chunk 1: resumes onto the same mesh, bit-identical.
    assert r["resume_bit_identical"] and r["resume_layout"] == "data:4"
    assert r["resume_shards"] == 4
    # Every agent's CPU preset: shardings that divide its arrays (PQL's presets keep its own
    # layout at `single`, so it is not refused either).
    assert r["agents_checked"] >= 10 and r["agents_refused"] == []
