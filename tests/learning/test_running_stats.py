"""Welford normalizer: numpy parity, exact counts past 2^24, shapes, merging across shards."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.learning import running_stats


def test_matches_numpy_over_batches():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=(1000, 4)).astype(np.float32) for _ in range(100)]
    state = running_stats.init(jnp.zeros(4))
    step = jax.jit(running_stats.update)
    for b in batches:
        state = step(state, b)
    pooled = np.concatenate(batches)
    assert state.mean.shape == (4,)
    np.testing.assert_allclose(state.mean, pooled.mean(0), rtol=1e-4)
    np.testing.assert_allclose(running_stats.std(state), pooled.std(0), rtol=1e-4)
    assert np.all(np.abs(np.asarray(state.mean) - 3.0) < 0.02)
    assert np.all(np.abs(np.asarray(running_stats.std(state)) - 2.0) < 0.02)
    assert running_stats.exact_count(state) == 100_000


def test_state_shape_ignores_batch_layout():
    state = running_stats.update(running_stats.init(jnp.zeros(3)), jnp.ones((7, 11, 3)))
    assert state.mean.shape == (3,) and state.m2.shape == (3,)
    assert running_stats.exact_count(state) == 77


def test_count_exact_past_2_pow_24():
    state = running_stats.init(jnp.zeros(2))
    state = state.replace(count_lo=jnp.asarray(2**24, jnp.uint32), mean=jnp.ones(2),
                          m2=jnp.ones(2))
    step = jax.jit(running_stats.update)
    for _ in range(10):
        state = step(state, jnp.ones((1, 2)))
    assert running_stats.exact_count(state) == 16_777_226
    # Carry into the high word past 2^32.
    state = state.replace(count_lo=jnp.asarray(2**32 - 1, jnp.uint32))
    state = step(state, jnp.ones((3, 2)))
    assert running_stats.exact_count(state) == 2**32 + 2


def test_two_shards_equal_one():
    rng = np.random.default_rng(1)
    data = rng.normal(-1.0, 0.5, size=(2, 512, 3)).astype(np.float32)
    one = running_stats.update(running_stats.init(jnp.zeros(3)), data.reshape(-1, 3))
    a = running_stats.update(running_stats.init(jnp.zeros(3)), data[0])
    b = running_stats.update(running_stats.init(jnp.zeros(3)), data[1])
    merged = running_stats.merge(a, b)
    np.testing.assert_allclose(merged.mean, one.mean, rtol=1e-5)
    np.testing.assert_allclose(merged.m2, one.m2, rtol=1e-4)
    # Same thing through a named axis (as across devices): every shard gets the global stats.
    init = running_stats.init(jnp.zeros(3))
    sharded = jax.vmap(lambda x: running_stats.update(init, x, axis_name="d"), axis_name="d")(data)
    np.testing.assert_allclose(sharded.mean[0], one.mean, rtol=1e-5)
    np.testing.assert_allclose(sharded.m2[1], one.m2, rtol=1e-4)
    assert running_stats.exact_count(jax.tree.map(lambda x: x[0], sharded)) == 1024


def test_identity_before_first_update_and_dict_obs():
    obs = {"state": jnp.array([5.0, -3.0]), "privileged_state": jnp.array([1.0])}
    state = running_stats.init(jax.tree.map(jnp.zeros_like, obs))
    out = running_stats.normalize(state, obs)
    np.testing.assert_allclose(out["state"], [5.0, -3.0])
    batch = jax.tree.map(lambda x: jnp.stack([x, -x]), obs)
    state = running_stats.update(state, batch)
    out = running_stats.normalize(state, obs)
    np.testing.assert_allclose(out["state"], [1.0, -1.0], rtol=1e-5)
