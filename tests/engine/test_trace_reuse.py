"""Tracing once: `Vmap` shares its jitted reset/step between programs and equal wrapper stacks,
`parallel.member_map` runs one member unbatched with vmap's outputs, and
`parallel.over_members` gives each device of a seed mesh its member's unbatched program."""

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.engine import parallel, wrappers
from jaxrl.envs import toy


class Counting(toy.PointMass):
    """PointMass that counts how often Python runs its reset / step (once per trace)."""

    def __init__(self):
        super().__init__()
        self.resets = self.steps = 0
        self.swapped = False

    def reset(self, key):
        self.resets += 1
        return super().reset(key)

    def step(self, state, action):
        self.steps += 1
        return super().step(state, action)

    def cacheable(self):
        return not self.swapped


def _program(env, num_envs):
    """init + 3 steps, one jitted program per call (a fresh function each time)."""
    def run(key):
        state = env.reset(key)
        for _ in range(3):
            state = env.step(state, jnp.ones((num_envs, env.action_size)))
        return state.obs
    return jax.jit(run)


def test_programs_over_one_env_trace_its_reset_and_step_once():
    base = Counting()
    first = wrappers.wrap_for_training(base, num_envs=4, episode_length=10)
    second = wrappers.wrap_for_training(base, num_envs=4, episode_length=10)
    a = _program(first, 4)(jax.random.PRNGKey(0))
    b = _program(second, 4)(jax.random.PRNGKey(0))
    np.testing.assert_array_equal(a, b)
    # AutoReset's reset (one key split in Vmap) and its per-step resets of all envs (per-env
    # keys) have the same [N] key input, and its resets of the done envs alone a [M] one
    # (`max_resets`, 1 here), so the two programs' resets trace `base.reset` twice.
    assert (base.resets, base.steps) == (2, 1)
    # Same values as the env stepped without the shared trace (eager, op by op).
    eager = first.reset(jax.random.PRNGKey(0))
    for _ in range(3):
        eager = first.step(eager, jnp.ones((4, base.action_size)))
    np.testing.assert_allclose(a, eager.obs, rtol=1e-6)


def test_other_sizes_and_stacks_trace_again():
    base = Counting()
    # Resets trace twice per stack: all N envs and the M = 1 done ones (`max_resets`).
    _program(wrappers.wrap_for_training(base, 4, 10), 4)(jax.random.PRNGKey(0))
    _program(wrappers.wrap_for_training(base, 8, 10), 8)(jax.random.PRNGKey(0))  # new N
    assert (base.resets, base.steps) == (3, 2)
    _program(wrappers.wrap_for_training(base, 4, 5), 4)(jax.random.PRNGKey(0))  # new length
    assert (base.resets, base.steps) == (5, 3)


def test_env_that_is_not_cacheable_is_traced_every_time():
    base = Counting()
    base.swapped = True
    env = wrappers.wrap_for_training(base, 2, 10)
    _program(env, 2)(jax.random.PRNGKey(0))
    # 1 initial reset + 3 steps, each with two auto-reset branches (M and N envs): nothing
    # reused.
    assert (base.resets, base.steps) == (7, 3)


def test_unknown_wrapper_in_the_stack_shares_nothing():
    class Plain(wrappers.Wrapper):
        pass

    base = Counting()
    for _ in range(2):
        env = wrappers.AutoReset(wrappers.Vmap(wrappers.Episode(Plain(base), 10), 2))
        _program(env, 2)(jax.random.PRNGKey(0))
    assert (base.resets, base.steps) == (4, 2)  # per Vmap (N and M resets), not shared


def _member_fn(x, scale):
    return {"y": jnp.tanh(x["w"] @ x["v"]) * scale, "n": jnp.sum(x["v"])}


def test_member_map_equals_vmap_for_one_and_many_members():
    rng = np.random.default_rng(0)
    for members in (1, 3):
        x = {"w": jnp.asarray(rng.normal(size=(members, 5, 4)), jnp.float32),
             "v": jnp.asarray(rng.normal(size=(members, 4)), jnp.float32)}
        for axes, scale in (((0, None), jnp.float32(2.0)),
                            ((0, 0), jnp.full((members,), 2.0, jnp.float32))):
            want = jax.vmap(_member_fn, in_axes=axes)(x, scale)
            got = jax.jit(parallel.member_map(_member_fn, in_axes=axes))(x, scale)
            assert jax.tree.map(jnp.shape, got) == jax.tree.map(jnp.shape, want)
            np.testing.assert_allclose(got["y"], want["y"], rtol=1e-6)
            np.testing.assert_allclose(got["n"], want["n"], rtol=1e-6)


def test_member_map_traces_one_member_unbatched():
    seen = []

    def f(x):
        seen.append(x.shape)
        return x * 2

    parallel.member_map(f)(jnp.ones((1, 3)))
    parallel.member_map(f)(jnp.ones((2, 3)))
    assert seen == [(3,), (3,)]  # both see one member's shape; only the second is vmapped
    assert parallel.member_map(f)(jnp.ones((1, 3))).shape == (1, 3)


OVER_MEMBERS = r"""
import json
import jax, jax.numpy as jnp, numpy as np
from jaxrl.engine import parallel

seen = []
def f(x):
    seen.append(x.shape)
    return jax.lax.cond(x.sum() > 0, lambda v: v * 2.0, lambda v: -v, x)

mesh = parallel.seed_mesh(2)
x = jnp.asarray([[1.0, 2.0, 3.0], [-1.0, -2.0, 0.5]])
fn = jax.jit(parallel.over_members(f, mesh))
out = fn(x)
hlo = fn.lower(x).compile().as_text()
vmapped_hlo = jax.jit(jax.vmap(f)).lower(x).compile().as_text()
print(json.dumps({"devices": len(mesh.devices.flat), "seen": seen,
                  "out": np.asarray(out).tolist(), "shards": len(out.sharding.device_set),
                  "conditional": "conditional" in hlo,
                  "vmapped_conditional": "conditional" in vmapped_hlo}))
"""


def test_over_members_runs_each_devices_member_unbatched():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2",
               JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", OVER_MEMBERS], env=env, capture_output=True,
                         text=True, timeout=300, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["devices"] == 2 and got["shards"] == 2
    assert got["seen"][0] == [3]  # one member per device, its axis dropped
    assert got["out"] == [[2.0, 4.0, 6.0], [1.0, 2.0, -0.5]]
    # The member's cond stays a branch; vmap over members turns it into a select.
    assert got["conditional"] and not got["vmapped_conditional"]
