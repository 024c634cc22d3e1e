"""Two processes on loopback (gloo CPU collectives), 2 host devices each, are one run of 4
devices: a data-parallel PPO run gives what one process with 4 devices gives, and process 0
writes the logs once; a sweep of 4 members puts 2 on each process, and every member's run dir is
written once (logs by process 0, checkpoints by the process that holds the member)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

SCRIPT = r"""
import dataclasses, faulthandler, json, os, sys
faulthandler.dump_traceback_later(800, exit=True)  # a hung process shows where it waits
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
agent_cfg = p.agent_config
cfg = dataclasses.replace(p.train, total_env_steps=2 * 3 * 64 * 16, num_chunks=2,
                          num_eval_envs=8, num_devices=4)
res = runner.train("ppo", "PointMass1D", cfg, agent_cfg, run_dir=os.path.join(out, "train"),
                   progress=False)
params = parallel.fetch(res.runner.agent_state.params)
flat = np.concatenate([np.asarray(x, np.float64).ravel() for x in jax.tree.leaves(params)])
from jaxrl.run import member_state, sweep, sweep_spec

grid = sweep_spec.parse_grid(["ppo.learning_rate=3e-4,1e-3"], "ppo", ("learning_rate",), ())
members = sweep_spec.members(sweep_spec.points(grid, {}, 0, 0), [0, 1])
swept = sweep.run_sweep("ppo", "PointMass1D", dataclasses.replace(cfg, num_devices=1),
                        agent_cfg, members, os.path.join(out, "sweep"), progress=False)
member_params = parallel.fetch(swept.runner.agent_state.params)
member_flat = np.concatenate([np.asarray(x, np.float64).reshape(4, -1)
                              for x in jax.tree.leaves(member_params)], axis=1)
result = {"process": jax.process_index(), "processes": jax.process_count(),
          "devices": len(jax.devices()), "local_devices": len(jax.local_devices()),
          "params": flat.tolist(), "return": res.records[-1]["eval/episode_return"],
          "members": [m.name for m in members], "member_params": member_flat.tolist(),
          "owners": member_state.owners(swept.runner)}
from jaxrl.run import pbt
pbt_members = sweep_spec.members(sweep_spec.points(grid, {}, 0, 0), [0, 1], distinct_seeds=True)
pbt_dir = os.path.join(out, "pbt")
sweep.run_sweep("ppo", "PointMass1D", dataclasses.replace(cfg, num_devices=1), agent_cfg,
                pbt_members, pbt_dir, progress=False, search={"grid": grid},
                pbt_config=pbt.PBTConfig(interval=1, fraction=0.5))
result["pbt_lineage"] = pbt.read_lineage(pbt_dir)
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
    # Output to files, not pipes: a process blocked on a full pipe that nobody reads stalls the
    # others at their next collective or at the shutdown barrier.
    logs = [open(os.path.join(out + f".p{i}.log"), "w+") for i in range(nproc)]
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT, str(i), str(nproc), port, out],
                              env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
             for i, log in enumerate(logs)]
    for proc in procs:
        proc.wait(timeout=900)
    outputs = []
    for log in logs:
        log.seek(0)
        outputs.append(log.read())
        log.close()
    assert all(p.returncode == 0 for p in procs), "\n".join(
        f"process {i} (exit {p.returncode}): ...{text[-3000:]}"
        for i, (p, text) in enumerate(zip(procs, outputs, strict=True)))
    return [json.loads([x for x in text.splitlines() if x.startswith("RESULT ")][-1][7:])
            for text in outputs]


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
    # The sweep: members 0, 1 on process 0's devices, 2, 3 on process 1's; each member as in
    # one process (one member per device in both: the same unbatched program).
    assert two[0]["owners"] == two[1]["owners"] == [0, 0, 1, 1] and one["owners"] == [0] * 4
    for r in two:
        diff = max(abs(a - b) for x, y in zip(r["member_params"], one["member_params"],
                                              strict=True) for a, b in zip(x, y, strict=True))
        assert diff < 1e-5, diff
    for name in one["members"]:
        member = tmp_path / "two" / "sweep" / "members" / name
        lines = open(member / "metrics.jsonl").read().splitlines()
        assert [json.loads(x)["chunk"] for x in lines] == [1, 2]
        assert sorted(os.listdir(member / "checkpoints")) == ["1", "2"]
        assert (member / "final_params").is_dir() and (member / "summary.json").is_file()
    summary = json.load(open(tmp_path / "two" / "sweep" / "summary.json"))
    assert len(summary["members"]) == 4
    # A PBT sweep across the two processes: its round gathers members from the other process;
    # process 0 writes the lineage once, with the same parents as in one process.
    rows = two[0]["pbt_lineage"]
    assert [r["chunk"] for r in rows] == [0] * 4 + [1] * 4
    assert sum(r["copied"] for r in rows) == 2
    assert [r["parent"] for r in rows] == [r["parent"] for r in one["pbt_lineage"]]
    assert "pbt" in json.load(open(tmp_path / "two" / "pbt" / "summary.json"))
