"""Typed PRNG keys (`jax.random.key`) work wherever raw ones (`jax.random.PRNGKey`) do.

Every registered agent builds on a pure-JAX env and trains one chunk (3 iterations, gradient
steps included) of two vmapped seeds from typed keys, with `jax_debug_key_reuse` checking
that no key is consumed twice; with the default threefry implementation the run is bit-identical
to the same run from raw keys (checked for `sac` by default, for every agent in the slow set).

Where the checker runs: JAX's key-reuse checker (jax 0.10) reports two patterns that `vmap`
over seeds puts into the program as reuse although every member uses every key once:
`transpose` of a key array, which vmap inserts when a batched `split` feeds `lax.scan` (every
rollout; transpose has no key-reuse rule, so its output counts as consumed), and a `lax.cond`
with a batched predicate (the off-policy `learning` switch), which vmap turns into both
branches reading `select_n` copies of the same key operand. So the vmapped `init` runs under the
checker, the per-seed `chunk` (what vmap batches; vmap shares no key between members) is traced
under the checker, and the vmapped `chunk` then runs from the typed keys with the checker off.
The checker does not follow `fold_in` (it derives a key without consuming it), although with
threefry `fold_in(k, i)` equals `split(k, n)[i]`.
"""

from __future__ import annotations

import dataclasses
import functools
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.engine import contract as agent_lib
from jaxrl.engine import loop, parallel, rollout, wrappers
from jaxrl.envs import toy
from jaxrl.run import assemble, checkpoint, runner

_OFF = {"buffer_size": 2048, "learning_starts": 48, "batch_size": 32, "utd_ratio": 1.0}
# agent -> (env, agent-config overrides, train overrides); small settings of tests/test_golden.py.
CASES = {
    "ppo": ("PointMass1D", {"policy_hidden": (16, 16), "value_hidden": (16, 16),
                            "num_minibatches": 4, "num_epochs": 2}, {}),
    "sac": ("PointMass1D", dict(_OFF, actor_hidden=(16, 16), critic_hidden=(16, 16)), {}),
    "fastdsac": ("PointMass1D", dict(_OFF, actor_hidden=(16,), critic_hidden=(16,)), {}),
    "warpsac": ("PointMass1D", dict(_OFF, actor_hidden=(16,), critic_hidden=(16,),
                                    num_blocks=1, swd_decay_steps=100.0), {}),
    "crl": ("PointMaze", dict(_OFF, hidden=(16, 16), actor_hidden=(16, 16)),
            {"unroll_length": 10}),
    "pql": ("PointMass1D", {"buffer_size": 2048, "learning_starts": 48, "batch_size": 32,
                            "actor_hidden": (16,), "critic_hidden": (16,),
                            "critic_updates_per_step": 2}, {}),
    "cppo": ("PointMaze", {"hidden": (16, 16), "actor_hidden": (16, 16), "critic_batch_size": 32,
                           "num_minibatches": 4, "num_epochs": 2, "critic_epochs": 2},
             {"unroll_length": 10}),
    "fpo": ("PointMass1D", {"policy_hidden": (16, 16), "value_hidden": (16, 16),
                            "num_minibatches": 4, "num_epochs": 2, "flow_steps": 3,
                            "num_mc": 2}, {}),
    "policyflow": ("PointMass1D", {"policy_hidden": (16, 16), "value_hidden": (16, 16),
                                   "time_dim": 16, "num_minibatches": 4, "num_epochs": 2,
                                   "flow_steps": 3}, {}),
    "flow_sac": ("PointMass1D", dict(_OFF, actor_hidden=(16,), critic_hidden=(16,),
                                     log_std_hidden=(16,), flow_steps=2), {}),
}
ITERATIONS = 3
# Raw-vs-typed equality compiles the run a second time: one agent by default, all when slow.
RAW_BY_DEFAULT = ("sac",)


def _is_typed(x) -> bool:
    return jnp.issubdtype(x.dtype, jax.dtypes.prng_key)




def test_every_registered_agent_has_a_case():
    assert set(agent_lib.list_agents()) <= set(CASES), "add a small config to CASES"


SEED = 3  # first seed of the runs


@functools.cache
def _setup(name: str):
    env_name, overrides, train_over = CASES[name]
    train = dict({"num_envs": 8, "unroll_length": 4}, **train_over)
    cfg = dataclasses.replace(loop.TrainConfig(), num_chunks=1, num_eval_envs=0, num_seeds=2,
                              **train)
    cfg = dataclasses.replace(cfg, total_env_steps=ITERATIONS * cfg.env_steps_per_iteration)
    agent_cfg = agent_lib.lookup(name)[1](**overrides)
    agent, env, spec = assemble.build(name, env_name, cfg, agent_cfg)
    hps = assemble.stack_hp(agent.default_hp(), cfg.num_seeds)
    init, chunk = loop.make_train(agent, env)
    return agent, env, spec, cfg, hps, init, chunk


@functools.cache
def _typed_run(name: str):
    """(initial run state, state after one chunk, metrics), from typed keys, reuse-checked."""
    *_, cfg, hps, init, chunk = _setup(name)
    keys = assemble.seed_keys(cfg, SEED, typed=True)
    with jax.debug_key_reuse(True):
        start = jax.jit(jax.vmap(init))(keys, hps)
        one_seed = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), start)
        jax.jit(chunk).trace(one_seed)  # raises jax.errors.KeyReuseError on reuse
    run, metrics = jax.jit(jax.vmap(chunk))(start)
    return start, run, metrics


@pytest.mark.parametrize("name", agent_lib.list_agents())
def test_every_agent_traces_from_typed_keys_without_key_reuse(name):
    """The key-reuse checker works on the traced program, so tracing is the check; the golden
    runs (`tests/agents/test_golden.py`) then train every agent two chunks from typed keys and
    match the raw-key record bit for bit."""
    *_, cfg, hps, init, chunk = _setup(name)
    keys = assemble.seed_keys(cfg, SEED, typed=True)
    with jax.debug_key_reuse(True):
        traced_init = jax.jit(jax.vmap(init)).trace(keys, hps)
        start = traced_init.out_info
        one_seed = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), start)
        traced_chunk = jax.jit(chunk).trace(one_seed)  # raises KeyReuseError on reuse
    # No agent runs a LAPACK kernel of its own (orthogonal init's QR, say), so on a pure-JAX env
    # its members may run on separate CPU devices (`parallel.cpu_devices_deadlock`).
    for traced in (traced_init, traced_chunk):
        assert parallel.batched_lapack_calls(traced.jaxpr) == {}


@pytest.mark.parametrize("name", RAW_BY_DEFAULT + ("ppo",))
def test_one_chunk_from_typed_keys_runs(name):
    cfg = _setup(name)[3]
    start, run, metrics = _typed_run(name)
    s, n = cfg.num_seeds, cfg.num_envs
    for state in (start, run):
        assert _is_typed(state.key) and state.key.shape == (s,)
        reset_key = state.env_state.info["reset_key"]
        assert _is_typed(reset_key) and reset_key.shape == (s, n)
    np.testing.assert_array_equal(run.iteration, ITERATIONS)
    for x in jax.tree.leaves(run.agent_state):
        if not _is_typed(x) and jnp.issubdtype(x.dtype, jnp.floating):
            assert np.all(np.isfinite(np.asarray(x, np.float32)))
    if "buffer/transitions" in metrics:  # off-policy: past learning_starts, gradient steps ran
        assert float(np.min(metrics["buffer/transitions"])) >= CASES[name][1]["learning_starts"]


def test_the_check_catches_an_update_that_reuses_its_key():
    agent, env, spec, cfg, hps, *_ = _setup("ppo")

    class Reuses:
        def __getattr__(self, name):
            return getattr(agent, name)

        def update(self, state, traj, key):
            state, metrics = agent.update(state, traj, key)
            return state, dict(metrics, noise=jax.random.uniform(key))

    init, chunk = loop.make_train(Reuses(), env)
    one_seed = jax.eval_shape(init, jax.random.key(0), {k: v[0] for k, v in hps.items()})
    with jax.debug_key_reuse(True), pytest.raises(jax.errors.KeyReuseError):
        jax.jit(chunk).trace(one_seed)


def _data(tree) -> list[np.ndarray]:
    """Leaves as numpy arrays, typed keys as their key data (a raw key's leaf)."""
    return [np.asarray(jax.random.key_data(x) if _is_typed(x) else x)
            for x in jax.tree.leaves(tree)]


# Agents added after the first set share their state layouts (on-policy core, SAC core) with
# agents checked here by default; their raw-vs-typed runs (a compile each) need
# JAXRL_TEST_ALL_AGENTS=1, to keep the default suite inside its time budget.
_ALL_AGENTS = pytest.mark.skipif(not os.environ.get("JAXRL_TEST_ALL_AGENTS"),
                                 reason="set JAXRL_TEST_ALL_AGENTS=1 (a compile per agent)")
_LATER = ("fpo", "policyflow", "flow_sac")


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=() if n in RAW_BY_DEFAULT else
                 [pytest.mark.slow] + ([_ALL_AGENTS] if n in _LATER else []))
    for n in agent_lib.list_agents()])
def test_typed_and_raw_keys_train_identically(name):
    *_, cfg, hps, init, chunk = _setup(name)
    _, typed, typed_metrics = _typed_run(name)
    raw_keys = assemble.seed_keys(cfg, SEED)
    assert raw_keys.dtype == jnp.uint32 and raw_keys.shape == (cfg.num_seeds, 2)
    # Compiled as the typed run is (init and chunk apart), so that float rounding matches.
    raw, raw_metrics = jax.jit(jax.vmap(chunk))(jax.jit(jax.vmap(init))(raw_keys, hps))
    assert not _is_typed(raw.key)
    for a, b in zip(_data((typed, typed_metrics)), _data((raw, raw_metrics)), strict=True):
        np.testing.assert_array_equal(a, b)


def test_vmap_reset_takes_one_or_per_env_keys_typed_or_raw():
    env = wrappers.Vmap(wrappers.Episode(toy.PointMass(), 10), 4)
    for seed in (0, 1):
        typed, raw = jax.random.key(seed), jax.random.PRNGKey(seed)
        one = env.reset(typed).obs
        np.testing.assert_array_equal(one, env.reset(raw).obs)
        per_env = jax.random.split(typed, 4)  # typed [N]: used as they are, not split again
        np.testing.assert_array_equal(env.reset(per_env).obs, one)
        np.testing.assert_array_equal(env.reset(jax.random.key_data(per_env)).obs, one)
        np.testing.assert_array_equal(
            env.reset(per_env).obs, jax.vmap(env.env.reset)(per_env).obs)


def test_autoreset_rollout_and_evaluate_with_typed_keys():
    """Episodes end every 3 steps, so auto-reset draws fresh starts from the per-env keys."""
    env = wrappers.wrap_for_training(toy.DoneAfterK(k=3), num_envs=4, episode_length=100)
    eval_env = wrappers.wrap_for_eval(toy.DoneAfterK(k=3), num_envs=4, episode_length=100)

    def policy(obs, key):
        shape = (obs.shape[0], env.action_size)
        return jax.random.uniform(key, shape, minval=-1.0, maxval=1.0), {}

    def run(key):
        key_reset, key_roll, key_eval = jax.random.split(key, 3)
        state, traj = rollout.rollout(env, policy, env.reset(key_reset), key_roll, 8)
        return state, traj, rollout.evaluate(eval_env, policy, key_eval, 5)

    with jax.debug_key_reuse(True):
        state, traj, ev = jax.jit(run)(jax.random.key(5))
    assert _is_typed(state.info["reset_key"]) and state.info["reset_key"].shape == (4,)
    assert float(traj.extras["done"].sum()) == 8.0  # two resets in each of the 4 slots
    raw_state, raw_traj, raw_ev = jax.jit(run)(jax.random.PRNGKey(5))
    np.testing.assert_array_equal(jax.random.key_data(state.info["reset_key"]),
                                  raw_state.info["reset_key"])
    for a, b in zip(jax.tree.leaves((traj, ev)), jax.tree.leaves((raw_traj, raw_ev)),
                    strict=True):
        np.testing.assert_array_equal(a, b)


def test_evaluator_follows_the_run_key_kind():
    agent, env, spec, cfg, *_ = _setup("ppo")
    _, run, _ = _typed_run("ppo")
    cfg = dataclasses.replace(cfg, num_eval_envs=4)
    evaluator = runner.make_evaluator(agent, env, cfg)
    key = assemble.key_like(run.key, 7)
    assert _is_typed(key) and str(jax.random.key_impl(key)) == str(jax.random.key_impl(run.key))
    assert not _is_typed(assemble.key_like(assemble.seed_keys(cfg, SEED), 7))
    with jax.debug_key_reuse(True):
        typed = evaluator(run.agent_state, key)
    raw = evaluator(run.agent_state, jax.random.PRNGKey(7))
    for k in raw:
        np.testing.assert_array_equal(typed[k], raw[k], err_msg=k)


def test_checkpoint_round_trips_typed_keys(tmp_path):
    """orbax (>= 0.12.8) stores a typed key array as its key data with the implementation
    name and restores it typed, also into the raw-key target `checkpoint.abstract_runner`
    builds (`seed_keys` is raw), so a typed run resumes typed."""

    def state(impl, typed=True):
        key = jax.random.key(1, impl=impl)
        per_env = jax.random.split(key, 4)
        if not typed:
            key, per_env = jax.random.key_data(key), jax.random.key_data(per_env)
        return loop.RunState(agent_state={"w": jnp.arange(3.0)},
                             env_state={"reset_key": per_env, "empty": jnp.zeros((4, 0))},
                             key=key, iteration=jnp.array(2, jnp.int32))

    saver = checkpoint.Checkpointer(str(tmp_path), keep=3)
    impls = {1: "threefry2x32", 2: "rbg"}
    for step, impl in impls.items():
        packed = checkpoint.pack(state(impl))
        assert len(packed) == 4 and sum(_is_typed(x) for x in packed.values()) == 2
        saver.save(step, state(impl), [], {})
    saver.wait()
    for step, impl in impls.items():
        want = state(impl)
        for typed_target in (True, False):
            abstract = jax.eval_shape(lambda impl=impl, t=typed_target: state(impl, t))
            back = saver.restore_state(step, abstract, replay=True)
            for got, ref in ((back.key, want.key),
                             (back.env_state["reset_key"], want.env_state["reset_key"])):
                assert _is_typed(got) and str(jax.random.key_impl(got)) == impl
                np.testing.assert_array_equal(jax.random.key_data(got), jax.random.key_data(ref))
            assert back.env_state["empty"].shape == (4, 0)
            np.testing.assert_array_equal(back.agent_state["w"], want.agent_state["w"])
    saver.close()
