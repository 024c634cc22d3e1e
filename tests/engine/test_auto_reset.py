"""Gated auto-reset (`wrappers.reset_done`): resets computed only for done envs, with the same
results as resetting every env and selecting the done ones (the wrapper before the gating,
kept here as `_reference_step`).

A toy env whose reset counts its own calls (one `jax.debug.callback` per env reset) shows how
many resets each step computed; episodes of random length (1-6 steps) give steps with no, some
and many done envs.
"""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_randomization import ToyModel
from tree_helpers import assert_trees_equal

from jaxrl.engine import loop, parallel, randomization, wrappers
from jaxrl.engine.types import State
from jaxrl.envs import toy

RESETS: list[float] = []
GENERIC = "jaxrl.envs.randomizers:friction_and_mass"


class RandomLength(toy.DoneAfterK):
    """Terminates after L ~ U{1..6} steps, L drawn at reset; obs [t, x0]. Every reset call
    appends to `RESETS` (from inside the compiled program)."""

    name = "RandomLength"

    def reset(self, key):
        key_x, key_len = jax.random.split(key)
        x0 = jax.random.uniform(key_x)
        jax.debug.callback(lambda x: RESETS.append(float(x)), x0)
        return State(data={"t": jnp.zeros(()), "x0": x0,
                           "length": jax.random.randint(key_len, (), 1, 7).astype(jnp.float32)},
                     obs=jnp.stack([jnp.zeros(()), x0]), reward=jnp.zeros(()),
                     done=jnp.zeros(()), metrics={}, info={})

    def step(self, state, action):
        t = state.data["t"] + 1.0
        return state.replace(data=dict(state.data, t=t), obs=jnp.stack([t, state.data["x0"]]),
                             reward=jnp.ones(()), done=(t >= state.data["length"]).astype(
                                 jnp.float32))


def _reference_step(env: wrappers.AutoReset, state: State, action) -> State:
    """`AutoReset.step` before the gating: a reset for every env, then a per-env select."""
    stepped = env.env.step(state, action)
    stepped = stepped.replace(info={k: v for k, v in stepped.info.items() if k != "reset_key"})
    keys = jax.vmap(jax.random.split)(state.info["reset_key"])
    fresh = env.env.reset(keys[:, 0])
    fresh = fresh.replace(info=dict(stepped.info, **{k: fresh.info[k] for k in fresh.info}))
    data, obs, info = wrappers.select_envs(stepped.done, (fresh.data, fresh.obs, fresh.info),
                                           (stepped.data, stepped.obs, stepped.info))
    merged = stepped.replace(data=data, obs=obs, info=info)
    info = dict(merged.info, terminated=stepped.info["terminated"],
                truncated=stepped.info["truncated"], final_obs=stepped.obs,
                final_episode_return=stepped.info["episode_return"],
                final_episode_length=stepped.info["episode_length"],
                final_episode_metrics=stepped.info["episode_metrics"], reset_key=keys[:, 1],
                traj_id=state.info["traj_id"] + (stepped.done > 0).astype(jnp.int32))
    return merged.replace(reward=stepped.reward, done=stepped.done, metrics=stepped.metrics,
                          info=info)


def _counted_steps(env, num_steps: int, key):
    """Steps `env` eagerly step by step (each step jitted); per step: (done count, resets)."""
    state = jax.jit(env.reset)(key)
    step = jax.jit(env.step)
    out = []
    for _ in range(num_steps):
        jax.effects_barrier()
        RESETS.clear()
        state = step(state, jnp.zeros((env.num_envs, 1)))
        jax.effects_barrier()
        out.append((int(state.done.sum()), len(RESETS)))
    return out


def test_resets_only_where_done():
    """No reset on steps with no done env, M (padded) with 1..M done, N with more."""
    n, m = 8, 2
    env = wrappers.wrap_for_training(RandomLength(), num_envs=n, episode_length=100,
                                     max_resets=m)
    counts = _counted_steps(env, 40, jax.random.PRNGKey(3))
    seen = set()
    for done, resets in counts:
        want = 0 if done == 0 else (m if done <= m else n)
        assert resets == want, (done, resets, counts)
        seen.add(want)
    assert seen == {0, m, n}  # all three branches ran


def test_default_max_resets():
    assert wrappers.wrap_for_training(RandomLength(), 64, 100).max_resets == 4
    assert wrappers.wrap_for_training(RandomLength(), 8, 100).max_resets == 1
    with pytest.raises(ValueError, match="max_resets must be positive"):
        wrappers.wrap_for_training(RandomLength(), 8, 100, max_resets=0)
    with pytest.raises(ValueError, match="max_resets must be positive"):
        loop.TrainConfig(max_resets=0).validate()


def _run(env, step_fn, key, num_steps: int):
    def body(state, _):
        state = step_fn(state, jnp.zeros((env.num_envs, 1)))
        return state, (state.obs, state.done, state.info["final_obs"], state.info["traj_id"])

    return jax.jit(lambda k: jax.lax.scan(body, env.reset(k), None, num_steps))(key)


@pytest.mark.parametrize("typed", [False, True])
@pytest.mark.parametrize("randomize", [False, True])
@pytest.mark.parametrize("max_resets", [1, 3, 16])
def test_bit_identical_to_resetting_every_env(typed, randomize, max_resets):
    """60 steps of short random-length episodes: states and outputs equal the reference's."""
    base = RandomLength()
    env = randomization.maybe_randomize(
        _Randomizable(base) if randomize else base, GENERIC if randomize else None)
    venv = wrappers.wrap_for_training(env, num_envs=6, episode_length=4, max_resets=max_resets)
    key = jax.random.key(7) if typed else jax.random.PRNGKey(7)
    got = _run(venv, venv.step, key, 60)
    want = _run(venv, lambda s, a: _reference_step(venv, s, a), key, 60)
    assert_trees_equal(jax.tree.map(_raw, got), jax.tree.map(_raw, want))
    assert int(got[1][1].sum()) > 60  # many episodes ended


@pytest.mark.parametrize("members", [1, 2])
def test_members_keep_the_branches_and_the_results(members):
    """Under the members' vmap the switch stays a switch (the branch is the members' maximum)
    and each member's results equal the reference's."""
    venv = wrappers.wrap_for_training(RandomLength(), num_envs=6, episode_length=5, max_resets=2)
    keys = jax.random.split(jax.random.PRNGKey(0), members)

    def run(step_fn):
        return jax.jit(parallel.member_map(lambda k: _run(venv, step_fn, k, 40)))(keys)

    got = run(venv.step)
    want = run(lambda s, a: _reference_step(venv, s, a))
    assert_trees_equal(got, want)
    state = jax.vmap(venv.reset)(keys)
    jaxpr = jax.make_jaxpr(parallel.member_map(venv.step))(state, jnp.zeros((members, 6, 1)))
    conds = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "cond"]
    assert [len(e.params["branches"]) for e in conds] == [3]
    assert conds[0].invars[0].aval.shape == ()  # one branch index for all members


def test_all_done_at_once_gives_distinct_fresh_starts():
    """Every env done on one step with M < N: N distinct start states, each `reset(k_i)`."""
    n = 16
    venv = wrappers.wrap_for_training(toy.DoneAfterK(k=2), num_envs=n, episode_length=100,
                                      max_resets=3)
    state = jax.jit(venv.reset)(jax.random.PRNGKey(1))
    step = jax.jit(venv.step)
    state = step(state, jnp.zeros((n, 1)))
    keys = jax.vmap(jax.random.split)(state.info["reset_key"])[:, 0]
    state = step(state, jnp.zeros((n, 1)))
    assert int(state.done.sum()) == n
    fresh = jax.vmap(venv.env.env.reset)(keys)
    np.testing.assert_array_equal(np.asarray(state.obs), np.asarray(fresh.obs))
    assert np.unique(np.asarray(state.obs[:, 1])).size == n


def test_start_states_fresh_per_episode_and_distributed_like_reset():
    """One slot's start states over many episodes are all different, and over all slots they
    are distributed like direct `reset` calls (x0 ~ U(0, 1)); the randomized model too."""
    n, k = 8, 2
    base = _Randomizable(toy.DoneAfterK(k=k))
    env = randomization.maybe_randomize(base, GENERIC)
    venv = wrappers.wrap_for_training(env, num_envs=n, episode_length=100, max_resets=2)

    def body(state, _):
        state = venv.step(state, jnp.zeros((n, 1)))
        return state, (state.obs[:, 1], state.info["randomized"]["body_mass"][:, 1], state.done)

    _, (x0, mass, done) = jax.jit(lambda key: jax.lax.scan(body, venv.reset(key), None, 400))(
        jax.random.PRNGKey(5))
    starts = np.asarray(x0)[1::k]  # the step after each reset
    assert np.asarray(done)[k - 1::k].all()
    assert np.unique(starts[:, 0]).size == starts.shape[0]  # slot 0: a new start every episode
    assert np.unique(starts).size == starts.size  # no start state handed out twice
    # Kolmogorov-Smirnov distance to U(0, 1) over 1600 starts: 0.034 is its 5% critical value.
    sorted_x = np.sort(starts.ravel())
    ecdf = np.arange(1, sorted_x.size + 1) / sorted_x.size
    assert np.max(np.abs(ecdf - sorted_x)) < 0.034
    masses = np.asarray(mass)[1::k]
    assert np.unique(masses[:, 0]).size == masses.shape[0]  # a new model every episode


class _Randomizable(toy._Toy):
    """Any toy env with the two model fields `friction_and_mass` randomizes; the env ignores
    the model (the randomized values are only carried in `info`)."""

    def __init__(self, env):
        self.env = env
        self.name, self.action_size = env.name, env.action_size
        self._model = _model()
        super().__init__(env.episode_length)

    def reset(self, key):
        return self.env.reset(key)

    def step(self, state, action):
        return self.env.step(state, action)

    @property
    def sim_model(self):
        return self._model

    def using_model(self, model):
        return contextlib.nullcontext()


def _model() -> ToyModel:
    return ToyModel(geom_friction=jnp.array([[1.0, 0.1, 0.1]] * 3), body_mass=jnp.array([0.0, 2.0]))


def _raw(x):
    return jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x


def test_fixed_starts_restart_each_slot_from_its_first_state():
    """`fixed_starts` (Brax's cached auto-reset, JaxGCRL's training setting): no reset after
    the first; every episode of a slot starts from the slot's first state (same x0), counters
    restart, `traj_id` still counts episodes. The default draws a new x0 per episode."""
    n, steps = 8, 40
    fixed = wrappers.wrap_for_training(RandomLength(), n, 100, fixed_starts=True)
    fresh = wrappers.wrap_for_training(RandomLength(), n, 100)
    counts = _counted_steps(fixed, steps, jax.random.PRNGKey(3))
    assert sum(d for d, _ in counts) > n and all(r == 0 for _, r in counts)

    def x0_per_episode(env):
        state = jax.jit(env.reset)(jax.random.PRNGKey(3))
        first = np.asarray(state.obs[:, 1])
        step, seen = jax.jit(env.step), []
        for _ in range(steps):
            state = step(state, jnp.zeros((n, 1)))
            done = np.asarray(state.done) > 0
            seen += [(i, float(state.obs[i, 1]), float(state.obs[i, 0]),
                      int(state.info["episode_length"][i]), int(state.info["traj_id"][i]))
                     for i in np.nonzero(done)[0]]
        return first, seen, np.asarray(state.info["traj_id"])

    first, seen, traj = x0_per_episode(fixed)
    for i, x0, t, length, _ in seen:
        assert x0 == first[i] and t == 0.0 and length == 0
    assert traj.sum() == len(seen) > n
    first_fresh, seen_fresh, _ = x0_per_episode(fresh)
    np.testing.assert_array_equal(first_fresh, first)  # same first states either way
    assert sum(x0 != first_fresh[i] for i, x0, *_ in seen_fresh) == len(seen_fresh)
    assert loop.TrainConfig().fixed_starts is False
