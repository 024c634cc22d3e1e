"""A stuck run says so: a blocking env makes the run exit with the watchdog's stack dump."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from jaxrl.run import watchdog

SCRIPT = r"""
import dataclasses, sys, threading
import jax, jax.numpy as jnp
from jaxrl import configs, envs
from jaxrl.agents import PPOConfig
from jaxrl.engine.loop import RunConfig
from jaxrl.run import runner

CALLS = {"n": 0}

def block_forever_in_chunk_two(x):
    # The first chunk's steps return; then the host callback never does (a stuck run).
    CALLS["n"] += 1
    if CALLS["n"] > STEPS_PER_CHUNK:
        threading.Event().wait()
    return x

class Blocking:
    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def step(self, state, action):
        state = self.inner.step(state, action)
        reward = jax.pure_callback(block_forever_in_chunk_two,
                                   jax.ShapeDtypeStruct(state.reward.shape, state.reward.dtype),
                                   state.reward, vmap_method="broadcast_all")
        return state.replace(reward=reward)

envs.registry.register_family(
    "blocking", ("BlockingPointMass",),
    lambda name, **kw: Blocking(envs.make("PointMass1D", **kw)))
p = configs.get("ppo-toy-cpu")
cfg = dataclasses.replace(p.train, num_envs=8, unroll_length=4, total_env_steps=2 * 8 * 4 * 2,
                          num_chunks=2, num_eval_envs=0)
STEPS_PER_CHUNK = cfg.iterations_per_chunk * cfg.unroll_length
runner.train("ppo", "BlockingPointMass", cfg, p.agent_config,
             run_dir=sys.argv[1], progress=False,
             run=RunConfig(watchdog_seconds=float(sys.argv[2])))
print("finished (the watchdog did not fire)")
"""


@pytest.mark.slow  # a subprocess that compiles a small run and then waits for the watchdog
def test_blocking_env_exits_with_stack_dump(tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(run_dir), "20"],
                          capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert proc.returncode == watchdog.EXIT_CODE, (proc.returncode, proc.stderr[-3000:])
    assert "finished" not in proc.stdout
    line = [x for x in proc.stderr.splitlines() if "the run looks stuck" in x][-1]
    assert "chunk 2 did not finish within 20 s" in line
    dump = line.rsplit("Stacks of all threads: ", 1)[1].strip()
    assert os.path.dirname(dump) == str(run_dir) and os.path.basename(dump).startswith("stuck-")
    text = open(dump).read()
    assert "block_forever_in_chunk_two" in text  # the blocked host callback's thread
    assert "run_chunks" in text  # the main thread, waiting for the chunk
    assert os.path.isdir(run_dir / "checkpoints" / "1")  # chunk 1 was saved before the hang


def test_watchdog_fires_only_without_beats(tmp_path, monkeypatch):
    fired = []
    monkeypatch.setattr(watchdog.os, "_exit", lambda code: fired.append(code))
    dog = watchdog.Watchdog(0.6, str(tmp_path))
    with dog:
        for _ in range(6):  # beats every 0.2 s keep it quiet
            time.sleep(0.2)
            dog.beat("the next chunk")
        assert fired == []
        deadline = time.time() + 10
        while not fired and time.time() < deadline:
            time.sleep(0.05)
    assert fired[:1] == [watchdog.EXIT_CODE]
    dumps = [p for p in os.listdir(tmp_path) if p.startswith("stuck-")]
    assert dumps and "waiting for the next chunk" in open(tmp_path / dumps[0]).read()
    assert len(dumps) == 1  # fires once


def test_no_watchdog_thread_when_disabled():
    before = threading.active_count()
    with watchdog.Watchdog(None, None):
        assert threading.active_count() == before
