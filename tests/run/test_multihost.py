"""Two processes on loopback (gloo CPU collectives), 2 host devices each, are one run of 4
devices: a data-parallel PPO run gives what one process with 4 devices gives, and process 0
writes the logs once."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

SCRIPT = r"""
import dataclasses, json, os, sys
pid, nproc, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
from jaxrl.run import distributed
distributed.initialize(f"127.0.0.1:{port}" if nproc > 1 else None,
                       nproc if nproc > 1 else None, pid if nproc > 1 else None, timeout_s=120)
import jax, numpy as np
from jaxrl import configs
from jaxrl.agents import PPOConfig
from jaxrl.engine import parallel
from jaxrl.run import runner

p = configs.get("ppo-toy-cpu")
agent_cfg = PPOConfig(**dict(p.agent_overrides))
cfg = dataclasses.replace(p.train, total_env_steps=2 * 3 * 64 * 16, num_chunks=2,
                          num_eval_envs=8, num_devices=4)
res = runner.train("ppo", "PointMass1D", cfg, agent_cfg, run_dir=os.path.join(out, "train"),
                   progress=False)
params = parallel.fetch(res.runner.agent_state.params)
flat = np.concatenate([np.asarray(x, np.float64).ravel() for x in jax.tree.leaves(params)])
result = {"process": jax.process_index(), "processes": jax.process_count(),
          "devices": len(jax.devices()), "local_devices": len(jax.local_devices()),
          "params": flat.tolist(), "return": res.records[-1]["eval/episode_return"]}
print("RESULT " + json.dumps(result))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(nproc: int, devices: int, out: str) -> list[dict]:
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}")
    port = str(_free_port())
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT, str(i), str(nproc), port, out],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(nproc)]
    results = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=900)
        assert proc.returncode == 0, stderr[-4000:]
        line = [x for x in stdout.splitlines() if x.startswith("RESULT ")][-1]
        results.append(json.loads(line[len("RESULT "):]))
    return results


@pytest.mark.slow  # three processes that each compile a small run and a small sweep
def test_two_processes_equal_one_process_with_four_devices(tmp_path):
    (one,) = _launch(1, 4, str(tmp_path / "one"))
    two = _launch(2, 2, str(tmp_path / "two"))
    assert (one["processes"], one["devices"]) == (1, 4)
    assert [(r["process"], r["processes"], r["devices"], r["local_devices"]) for r in two] == [
        (0, 2, 4, 2), (1, 2, 4, 2)]
    for r in two:  # same program, same collectives: equal up to float reassociation
        diff = max(abs(a - b) for a, b in zip(r["params"], one["params"], strict=True))
        assert diff < 1e-5, diff
        assert abs(r["return"] - one["return"]) < 1e-3
    # Process 0 wrote the logs once; the checkpoints hold both processes' shards.
    lines = open(tmp_path / "two" / "train" / "metrics.jsonl").read().splitlines()
    assert [json.loads(x)["chunk"] for x in lines] == [1, 2]
    assert sorted(os.listdir(tmp_path / "two" / "train" / "checkpoints")) == ["1", "2"]
