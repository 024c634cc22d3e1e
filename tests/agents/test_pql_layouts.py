"""PQL across (simulated) devices: the `role` split equals the `pipelined` schedule on one
device, the `data` layout equals one device with the same global batch, and a `data`-layout
run trains, evaluates, checkpoints and resumes exactly through the runner."""

import json
import os
import subprocess
import sys

import pytest

SCRIPT = r"""
import dataclasses, json, os, shutil, sys, tempfile
import jax, jax.numpy as jnp
from jaxrl.agents.pql import PQLConfig
from jaxrl.engine import loop
from jaxrl.run import runner

cfg = loop.TrainConfig(num_envs=8, unroll_length=2, total_env_steps=8 * 2 * 5, num_chunks=1,
                       num_eval_envs=0)
base = PQLConfig(actor_hidden=(16,), critic_hidden=(16,), batch_size=16, buffer_size=256,
                 learning_starts=16, critic_updates_per_step=2,
                 critic_updates_per_actor_update=2)

def run(config, emulate=False, devices=1):
    agent, env, spec = runner.build("pql", "PointMass1D",
                                    dataclasses.replace(cfg, num_devices=devices), config)
    init, chunk = loop.make_train(agent, env, emulate_devices=emulate)
    start = jax.jit(init)(jax.random.PRNGKey(0), agent.default_hp())
    return jax.jit(chunk)(start)

def diff(a, b):
    return max(float(jnp.max(jnp.abs(x - y))) for x, y in
               zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True))

out = {"devices": len(jax.devices())}
pipelined = dataclasses.replace(base, schedule="pipelined")
one, m_one = run(pipelined)
out["iterations"] = int(one.iteration)
out["actor_updates"] = int(one.agent_state.actor_updates)
for n in (2, 3):
    split, m_split = run(dataclasses.replace(pipelined, layout="role"), devices=n)
    out[f"role{n}"] = diff(one.agent_state, split.agent_state)
    out[f"role{n}_metrics"] = diff(m_one, m_split)
data = dataclasses.replace(base, layout="data")
sharded, m_sharded = run(data, devices=2)
emulated, m_emulated = run(data, emulate=True, devices=2)
out["data"] = diff(sharded.agent_state, emulated.agent_state)
out["data_env"] = diff(sharded.env_state.obs, emulated.env_state.obs)
out["data_metrics"] = diff(m_sharded, m_emulated)
out["data_critic_updates"] = int(sharded.agent_state.critic_updates)
leaf = sharded.agent_state.buffer.data["obs"]
out["buffer_shards"] = len(leaf.sharding.device_set)

# Through the runner: 2 seeds, evaluation, checkpoints and the warm-start store; resume after
# chunk 1 is exact, and a resume or a second run loads the stored programs (env never built).
rcfg = dataclasses.replace(cfg, total_env_steps=8 * 2 * 8, num_chunks=2, num_eval_envs=4,
                           num_seeds=2, num_devices=2)
d = tempfile.mkdtemp()
store = d + "/store"
full = runner.train("pql", "PointMass1D", rcfg, data, run_dir=d + "/a", progress=False,
                    programs=store)
shutil.copytree(d + "/a", d + "/b")
shutil.rmtree(d + "/b/checkpoints/2")
built, runner.build = runner.build, None  # the stored programs must be used
resumed = runner.resume(d + "/b", progress=False, programs=store)
warm = runner.train("pql", "PointMass1D", rcfg, data, run_dir=d + "/c", progress=False,
                    programs=store)
runner.build = built
out["resume"] = diff(full.runner.agent_state, resumed.runner.agent_state)
out["warm"] = diff(full.runner.agent_state, warm.runner.agent_state)
out["warm_shards"] = len(warm.runner.agent_state.buffer.data["obs"].sharding.device_set)
out["eval"] = full.records[-1]["eval/episode_return"]
out["config_layout"] = json.load(open(d + "/a/config.json"))["agent_config"]["layout"]
out["record_layouts"] = sorted({r["layout"] for r in resumed.records})
out["summary_layout"] = json.load(open(d + "/b/summary.json"))["layout"]
role = dataclasses.replace(pipelined, layout="role")
first = runner.train("pql", "PointMass1D", rcfg, role, progress=False, programs=store)
again = runner.train("pql", "PointMass1D", rcfg, role, progress=False, programs=store)
out["role_warm"] = diff(first.runner.agent_state, again.runner.agent_state)
out["role_layouts"] = sorted({r["layout"] for r in again.records})
generic = [runner.train("pql", "PointMass1D", rcfg, base, progress=False, programs=store)
           for _ in range(2)]  # layout single: the data parallelism every agent gets
out["generic_warm"] = diff(generic[0].runner.agent_state, generic[1].runner.agent_state)
out["store_entries"] = len(os.listdir(store))
print(json.dumps(out))
"""


@pytest.mark.slow  # a subprocess with 3 host devices that compiles 10 programs (~2 min)
def test_role_and_data_layouts_match_one_device():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=3",
               JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["devices"] == 3 and out["iterations"] == 5
    assert out["actor_updates"] == 8  # 4 learning iterations x 2: the split did learn
    for n in (2, 3):
        assert out[f"role{n}"] <= 1e-6 and out[f"role{n}_metrics"] <= 1e-6
    assert out["data"] <= 1e-5 and out["data_env"] <= 1e-5 and out["data_metrics"] <= 1e-5
    assert out["buffer_shards"] == 2
    # learning_starts (16) counts all devices' transitions: 16 after iteration 1 (8 per device),
    # so all 5 iterations learn, 2 x 2 critic steps each.
    assert out["data_critic_updates"] == 5 * 4
    assert out["resume"] == 0.0 and out["warm"] == 0.0 and out["warm_shards"] == 2
    assert out["role_warm"] == 0.0 and out["role_layouts"] == ["role:2"]
    assert out["generic_warm"] == 0.0
    assert out["store_entries"] == 3  # one per layout; resume and the second runs loaded them
    assert out["eval"] == out["eval"]  # finite evaluation of the sharded run
    assert out["config_layout"] == "data"
    assert out["record_layouts"] == ["data:2"] and out["summary_layout"] == "data:2"
