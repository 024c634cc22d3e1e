"""Batched LAPACK calls and CPU devices: `parallel.batched_lapack_calls` finds them in a traced
program, and a run whose program has them never runs on several CPU devices at once.

Why: jaxlib's CPU LAPACK kernels split a large batch over XLA's intra-op thread pool and block
the pool thread that runs them; two CPU devices factorizing at once on a 2-thread pool wait for
each other forever (`benchmarks/lapack_deadlock.py`). The end-to-end check below trains 2 seeds
of PPO on an env that factorizes a 12 x 12 matrix per env per step (1,024 envs, as MJX does with
a mass matrix) with 2 CPU devices: with the check switched off this run hangs in its first chunk
on a 2-core machine; with it the seeds stay on one device and the run finishes.
"""

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest

from jaxrl.engine import parallel


def _cho(a):
    return jax.scipy.linalg.cho_factor(a)[0]


def test_finds_batched_calls_inside_jit_scan_and_cond():
    def body(carry, a):
        c = jax.lax.cond(a[0, 0, 0] > 0, jax.vmap(_cho), lambda x: x, a)
        return carry + c.sum(), None

    jaxpr = jax.jit(lambda a: jax.lax.scan(body, 0.0, a)[0]).trace(jnp.ones((5, 3, 4, 4))).jaxpr
    assert parallel.batched_lapack_calls(jaxpr) == {"cholesky": (3, 4, 4)}
    solve = jax.make_jaxpr(jax.vmap(lambda a, b: jax.scipy.linalg.cho_solve((a, True), b)))(
        jnp.ones((6, 3, 3)), jnp.ones((6, 3)))
    assert parallel.batched_lapack_calls(solve) == {"triangular_solve": (6, 3, 3)}
    qr = jax.make_jaxpr(jax.vmap(lambda k: jax.nn.initializers.orthogonal()(k, (8, 8))))(
        jax.random.split(jax.random.PRNGKey(0), 2))
    assert parallel.batched_lapack_calls(qr) == {"qr": (2, 8, 8)}  # orthogonal init


def test_ignores_single_matrices_and_other_ops():
    for shape in ((4, 4), (1, 4, 4), (1, 1, 4, 4)):
        assert parallel.batched_lapack_calls(jax.make_jaxpr(_cho)(jnp.eye(4) + jnp.zeros(shape))) \
            == {}
    norms = jax.make_jaxpr(lambda w: w / jnp.linalg.norm(w, axis=0))(jnp.ones((3, 8, 8)))
    assert parallel.batched_lapack_calls(norms) == {}
    assert parallel.cpu_devices_deadlock(norms) is None

def test_deadlock_reason_needs_enough_work_to_split():
    """MJX's Cholesky of CartpoleBalance's 2 x 2 mass matrix (256 envs, 4 members) is too small
    for jaxlib to split; Go1's 18 x 18 at 64 envs is not (`parallel.LAPACK_SPLIT_WORK`)."""
    small = jax.make_jaxpr(jax.vmap(_cho))(jnp.ones((4 * 256, 2, 2)))
    assert parallel.batched_lapack_calls(small) == {"cholesky": (1024, 2, 2)}
    assert parallel.cpu_devices_deadlock(small) is None
    large = jax.make_jaxpr(jax.vmap(_cho))(jnp.ones((64, 18, 18)))
    assert "cholesky [64, 18, 18]" in parallel.cpu_devices_deadlock(large)  # CPU backend here


SCRIPT = r"""
import dataclasses, json
import jax, jax.numpy as jnp
from jaxrl.agents.ppo import PPOConfig
from jaxrl.engine import loop
from jaxrl.envs import registry, toy
from jaxrl.run import runner
from jaxrl.run.assemble import build


class Factorizing(toy.PointMass):
    '''PointMass whose reset and step factorize a 12 x 12 SPD matrix per env.'''
    in_reset = True

    def _factor(self, state):
        a = (3.0 + state.obs[0]) * jnp.eye(12) + 0.1
        chol = jax.scipy.linalg.cho_factor(a)[0]
        return state.replace(reward=state.reward + 1e-6 * jnp.trace(chol))

    def reset(self, key):
        state = super().reset(key)
        return self._factor(state) if self.in_reset else state

    def step(self, state, action):
        return self._factor(super().step(state, action))


class FactorizingStepOnly(Factorizing):
    in_reset = False


ENVS = {"Factorizing": Factorizing, "FactorizingStepOnly": FactorizingStepOnly}
registry.register_family("lapack", tuple(ENVS), lambda name, **kw: ENVS[name]())
ppo = PPOConfig(policy_hidden=(16,), value_hidden=(16,), num_minibatches=2, num_epochs=1)
cfg = dataclasses.replace(loop.TrainConfig(), num_envs=1024, unroll_length=4, num_seeds=2,
                          num_chunks=1, num_eval_envs=0)
NO_DOG = loop.RunConfig(watchdog_seconds=None)
cfg = dataclasses.replace(cfg, total_env_steps=2 * cfg.env_steps_per_iteration)
out = {"devices": jax.device_count()}
for env_name in ("PointMass1D", "Factorizing"):
    notes = []
    mesh = runner.placement(*build("ppo", env_name, cfg, ppo)[:2], note=notes.append)[0]
    out[env_name] = [None if mesh is None else dict(mesh.shape), notes]
for env_name, c in (("Factorizing", dataclasses.replace(cfg, num_devices=2, num_seeds=1)),
                    ("FactorizingStepOnly", cfg)):
    try:
        runner.train("ppo", env_name, c, ppo, progress=False, run=NO_DOG)
        out[env_name + str(c.num_devices)] = "trained"
    except ValueError as e:
        out[env_name + str(c.num_devices)] = str(e)
from jaxrl.agents.common.pql_config import PQLConfig
pql = PQLConfig(layout="data", buffer_size=8 * 1024, learning_starts=48,
                batch_size=32, actor_hidden=(16,), critic_hidden=(16,))
try:  # an agent layout over 2 CPU devices
    runner.train("pql", "Factorizing", dataclasses.replace(cfg, num_seeds=1, num_devices=2), pql,
                 progress=False, run=NO_DOG)
    out["pql_data_layout"] = "trained"
except ValueError as e:
    out["pql_data_layout"] = str(e)
res = runner.train("ppo", "Factorizing", cfg, ppo, progress=False, run=NO_DOG)
out["trained_env_steps"] = res.records[-1]["env_steps"]
print("RESULT" + json.dumps(out))
"""


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="a CPU-backend behaviour")
def test_runs_with_batched_lapack_calls_keep_off_several_cpu_devices():
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    env["JAX_NUM_CPU_DEVICES"] = "2"
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env,
                          timeout=600)  # a hang (the bug) ends here
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(next(ln for ln in proc.stdout.splitlines()
                          if ln.startswith("RESULT"))[len("RESULT"):])
    assert out["devices"] == 2
    assert out["PointMass1D"] == [{"seed": 2}, []]  # no LAPACK: members split over devices
    mesh, notes = out["Factorizing"]
    assert mesh is None and len(notes) == 1
    assert "seeds stay on one CPU device" in notes[0] and "cholesky [2, 1024, 12, 12]" in notes[0]
    data = out["Factorizing2"]  # data parallel over 2 CPU devices: refused before compiling
    assert data.startswith("num_devices=2 runs on several CPU devices") and "cholesky" in data
    step_only = out["FactorizingStepOnly1"]  # reset is clean, the chunk is not: refused too
    assert step_only.startswith("the chunk runs on 2 CPU devices") and "cholesky" in step_only
    assert out["pql_data_layout"].startswith("the chunk runs on 2 CPU devices")
    assert out["trained_env_steps"] == 2 * 2 * 1024 * 4  # iterations x seeds x envs x unroll
