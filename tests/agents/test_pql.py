"""PQL / PQL-D: the numbers of the algorithm (mixed noise, n-step, smoothing, critic target,
update counters, separate P batch, PQL-D mass), sweeps, and bad input before compiling."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.engine import layouts, loop
from jaxrl.engine.types import Transition
from jaxrl.learning import losses, replay
from jaxrl.learning.returns import categorical_projection, categorical_support
from jaxrl.run import runner, session

SMALL = dict(actor_hidden=(16,), critic_hidden=(16,), batch_size=32, buffer_size=2048,
             learning_starts=32, critic_updates_per_step=8, critic_updates_per_actor_update=2)
CFG = loop.TrainConfig(num_envs=8, unroll_length=1, total_env_steps=8 * 5, num_chunks=1,
                       num_eval_envs=0)


def _build(train=CFG, **overrides):
    from jaxrl.agents.pql import PQLConfig

    return runner.build("pql", "PointMass1D", train, PQLConfig(**dict(SMALL, **overrides)))


def _learning_state(agent, key=0):
    """A fresh state whose buffer counts as past `learning_starts`."""
    state = agent.init(jax.random.PRNGKey(key), agent.default_hp())
    cap = state.buffer.write_time.shape[0]
    return state.replace(buffer=state.buffer.replace(size=jnp.int32(cap), pos=jnp.int32(0)))


def test_mixed_noise_per_global_env_index():
    agent, _, _ = _build(train=dataclasses.replace(CFG, num_envs=4))
    np.testing.assert_allclose(agent.sigma(jnp.arange(4)), [0.05, 0.30, 0.55, 0.80], atol=1e-6)
    # Sharded over 2 devices, each shard's carry holds its global env ids: same sigmas.
    carry = agent.init_explore(jax.random.PRNGKey(0), 4)
    shards = layouts._split(carry["env_id"], jax.sharding.PartitionSpec("data"), 2)
    np.testing.assert_array_equal(shards, [[0, 1], [2, 3]])
    np.testing.assert_allclose(agent.sigma(shards).ravel(), agent.sigma(jnp.arange(4)))
    # pi = 0 (zero actor): env 0's action std over 1e5 steps is sigma_0 = 0.05.
    state = _learning_state(agent)
    state = state.replace(params=dict(state.params, actor=jax.tree.map(
        jnp.zeros_like, state.params["actor"])))
    obs = jnp.zeros((4, agent.spec.obs_shape[0]))
    keys = jax.random.split(jax.random.PRNGKey(1), 100_000)
    actions = jax.jit(jax.vmap(lambda k: agent.explore(state, obs, k, carry, None)[0]))(keys)
    assert abs(float(actions[:, 0].std()) - 0.05) <= 1e-3
    assert float(jnp.abs(actions).max()) <= 1.0
    assert float(actions[:, 3].std()) > 0.5  # env 3: sigma 0.8, clipped at +-1


def _one_env_buffer(terminated, truncated, rewards=(1.0, 1.0, 1.0)):
    """A 1-env, 3-row buffer; obs = row index, next_obs = 10 + row index."""
    t = len(rewards)
    row = jnp.arange(t, dtype=jnp.float32)[:, None, None]
    traj = Transition(obs=row, action=jnp.zeros((t, 1, 1)), reward=jnp.array(rewards)[:, None],
                      terminated=jnp.array(terminated, jnp.float32)[:, None],
                      truncated=jnp.array(truncated, jnp.float32)[:, None], next_obs=10 + row,
                      extras={})
    example = jax.tree.map(lambda x: x[0], traj)
    return replay.add(replay.init(example, 3), traj)


@pytest.mark.parametrize("terminated, truncated, ret, discount, next_obs", [
    ((0, 0, 0), (0, 0, 0), 2.9701, 0.970299, 12.0),
    ((0, 1, 0), (0, 0, 0), 1.99, 0.0, 11.0),
    ((0, 0, 0), (0, 1, 0), 1.99, 0.9801, 11.0),  # bootstraps from the true final obs
])
def test_three_step_returns(terminated, truncated, ret, discount, next_obs):
    buf = _one_env_buffer(terminated, truncated)
    batch = replay.sample(buf, jax.random.PRNGKey(0), 256, n_step=3, gamma=0.99)
    first = np.asarray(batch.obs[:, 0]) == 0.0  # windows that start at row 0
    assert first.any()
    np.testing.assert_allclose(np.asarray(batch.reward)[first], ret, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(batch.discount)[first], discount, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(batch.next_obs[:, 0])[first], next_obs)


def test_target_smoothing_stays_within_clip_and_box():
    agent, _, _ = _build()
    keys = jax.random.split(jax.random.PRNGKey(0), 100_000)
    for pi in (0.0, 0.95):
        a = jax.vmap(lambda k: agent.smooth(jnp.full((1,), pi), k))(keys)  # noqa: B023
        assert float(jnp.abs(a - pi).max()) <= 0.2 + 1e-6
        assert float(a.max()) <= 1.0
    # Std 0.8 clipped to 0.2: most draws sit on the clip.
    a = jax.vmap(lambda k: agent.smooth(jnp.zeros((1,)), k))(keys)
    assert float(jnp.mean(jnp.abs(a) > 0.2 - 1e-6)) > 0.75


def _constant_head(critic_vars, values):
    """Critic variables whose twin k outputs `values[k]` everywhere (zero output kernel)."""
    params = dict(critic_vars["params"])
    head = max(k for k in params if k.startswith("Dense"))
    params[head] = {"kernel": jnp.zeros_like(params[head]["kernel"]),
                    "bias": jnp.asarray(values, jnp.float32).reshape(params[head]["bias"].shape)}
    return dict(critic_vars, params=params)


def test_critic_target_uses_min_of_twin_targets():
    agent, _, _ = _build()
    state = agent.init(jax.random.PRNGKey(0), agent.default_hp())
    state = state.replace(target_critic=_constant_head(state.target_critic, [2.0, 3.0]))
    b = 4
    batch = replay.Batch(obs=jnp.ones((b, 2)), action=jnp.zeros((b, 1)),
                         reward=jnp.full((b,), 1.99), discount=jnp.full((b,), 0.970299),
                         next_obs=jnp.ones((b, 2)), terminated=jnp.zeros(b),
                         truncated=jnp.zeros(b), n=jnp.full((b,), 3))
    _, metrics = agent.critic_loss(state.params["critic"]["params"], state, batch,
                                   jax.random.PRNGKey(1), state.params["actor"])
    np.testing.assert_allclose(metrics["train/td_target"], 3.930598, rtol=1e-6)


def test_update_counters_follow_the_ratios():
    agent, env, spec = _build(learning_starts=8, batch_size=8)  # learning from the first env step
    k_steps = 5
    init, chunk = loop.make_train(agent, env)
    run = jax.jit(init)(jax.random.PRNGKey(0), agent.default_hp())
    run, metrics = jax.jit(chunk)(run)
    s = run.agent_state
    assert (int(s.critic_updates), int(s.actor_updates), int(s.target_updates)) == (
        8 * k_steps, 4 * k_steps, 8 * k_steps)
    # logged as the totals after the chunk, not as chunk means of the running totals
    assert (float(metrics["train/critic_updates"]), float(metrics["train/actor_updates"])) == (
        8.0 * k_steps, 4.0 * k_steps)
    from jaxrl.agents.pql import PQL, PQLConfig

    big = PQL(config=PQLConfig(), spec=spec, train=dataclasses.replace(CFG, num_envs=4096))
    assert big.replay_ratios == (16.0, 8.0)


def test_actor_batch_is_drawn_apart_from_the_critic_batches():
    agent, _, _ = _build(train=dataclasses.replace(CFG, num_envs=1), buffer_size=1000)
    state = _learning_state(agent)
    ids = jnp.arange(1000, dtype=jnp.float32)[:, None, None]
    data = dict(state.buffer.data, obs=jnp.broadcast_to(ids, state.buffer.data["obs"].shape))
    state = state.replace(buffer=state.buffer.replace(data=data))
    critic_keys, actor_key = agent.round_keys(jax.random.PRNGKey(0))
    seen = [np.asarray(agent._sample(state, k, 3).obs[:, 0]) for k in critic_keys]
    actor = np.asarray(agent._sample(state, actor_key, 1).obs[:, 0])
    for critic in seen:
        assert not np.array_equal(critic, actor)
        assert len(set(critic) & set(actor)) < 8  # 32 of 1000 slots each: overlap ~1


def test_pqld_projection_and_target_mass():
    k, vmin, vmax = 51, -10.0, 10.0
    z = categorical_support(vmin, vmax, k)
    probs = jax.nn.softmax(jax.random.normal(jax.random.PRNGKey(0), (2, 5, k)), -1)
    atoms = 0.7 + 0.99 * z
    proj = categorical_projection(probs, atoms, vmin, vmax)
    np.testing.assert_allclose(proj.sum(-1), 1.0, atol=1e-6)
    one_hot = jnp.stack([jax.nn.one_hot(jnp.full(5, 10), k), jax.nn.one_hot(jnp.full(5, 40), k)])
    flawed = losses.twin_min_projection_target(one_hot, jnp.zeros(5), jnp.ones(5), vmin, vmax)
    np.testing.assert_allclose(flawed.sum(-1), 0.0, atol=1e-7)  # the reference's flaw
    logits = jnp.log(one_hot + 1e-9)
    ce = losses.categorical_td_target(logits, jnp.zeros(5), jnp.ones(5), jnp.zeros(5), vmin, vmax)
    np.testing.assert_allclose(ce.sum(-1), 1.0, atol=1e-6)
    # BCE clips its inputs to [eps, 1 - eps]: finite at p = 0 and 1, equal to the clipped value.
    p = jnp.array([[[0.0, 1.0]]])
    t = jnp.array([[1.0, 0.0]])
    eps = 1e-3
    want = -np.log(eps)
    np.testing.assert_allclose(losses.binary_cross_entropy(p, t, eps), want, rtol=1e-5)


@pytest.mark.parametrize("critic_type, target, schedule", [
    ("scalar", "lower_ce", "sync"), ("scalar", "lower_ce", "pipelined"),
    ("categorical", "min_bce", "sync"), ("categorical", "lower_ce", "pipelined")])
def test_schedules_sweep_members_differ(critic_type, target, schedule):
    """Two vmapped hp members: learning rates 0 leave the parameters at init, default moves
    them; `pipelined` runs with one iteration of staleness (no learning in iteration 1)."""
    agent, env, spec = _build(critic_type=critic_type, distributional_target=target,
                              schedule=schedule, learning_starts=8, batch_size=8)
    hp = agent.default_hp()
    hps = {k: jnp.array([0.0 if k.endswith("learning_rate") else v, v]) for k, v in
           hp.items()}
    keys = jnp.stack([jax.random.PRNGKey(0)] * 2)
    run, metrics = loop.train_fused(agent, env, keys, hps)
    init, _ = loop.make_train(agent, env)
    start = init(jax.random.PRNGKey(0), hp)
    start_leaves = jax.tree.leaves(start.agent_state.params)
    for member, leaf in zip(jax.tree.leaves(run.agent_state.params), start_leaves, strict=True):
        np.testing.assert_array_equal(member[0], leaf)  # learning rates 0
    assert max(float(jnp.abs(member[1] - leaf).max()) for member, leaf in
               zip(jax.tree.leaves(run.agent_state.params), start_leaves, strict=True)) > 1e-4
    assert all(bool(jnp.isfinite(v).all()) for k, v in metrics.items()
               if not k.startswith("episode/"))
    want = 8 * (5 if schedule == "sync" else 4)
    assert int(run.agent_state.critic_updates[1]) == want


@pytest.mark.parametrize("overrides, message", [
    ({"critic_updates_per_step": 2.5}, "critic_updates_per_step must be a positive integer"),
    ({"critic_updates_per_actor_update": 0}, "critic_updates_per_actor_update must be a pos"),
    ({"critic_updates_per_actor_update": 3}, "must be a multiple of"),
    ({"critic_type": "categorical", "num_atoms": 1}, "num_atoms >= 2"),
    ({"n_step": 0}, "n_step must be a positive integer"),
    ({"critic_type": "categorical", "v_min": 10.0}, "v_min < v_max"),
    ({"layout": "data", "devices": 3}, "divisible by 3"),
    ({"layout": "role", "devices": 4}, "num_devices 2"),
    ({"layout": "role", "devices": 2}, "schedule='pipelined'"),
    ({"schedule": "async"}, "schedule must be one of"),
    ({"sigma_min": 0.9}, "sigma_min <= sigma_max"),
    ({"target_noise": float("nan")}, "target_noise must be finite"),
])
def test_bad_input_is_rejected_before_compiling(overrides, message):
    overrides = dict(overrides)
    train = dataclasses.replace(CFG, num_devices=overrides.pop("devices", 1))
    with pytest.raises(ValueError, match=message):
        _build(train=train, **overrides)


def test_the_runs_num_devices_is_the_count_of_pqls_layouts():
    """One way to say how many devices: `--num-devices`. PQL's `data` and `role` layouts run
    on that many; with `single`, a run over several devices is the data parallelism every
    agent gets (`jit` shardings), and PQL's own layout is one device."""
    two = dataclasses.replace(CFG, num_devices=2)
    for layout, schedule in (("data", "sync"), ("role", "pipelined")):
        agent = _build(train=two, layout=layout, schedule=schedule)[0]
        assert agent.layout == (layout, 2)
        assert session.layout_name(agent, two) == f"{layout}:2"
    assert _build(layout="data")[0].layout == ("data", 1)
    from jaxrl.agents.pql import PQL, PQLConfig

    agent = PQL(config=PQLConfig(**SMALL), spec=_build()[2], train=two)
    assert agent.layout == ("single", 1) and session.layout_name(agent, two) == "data:2"



def test_too_few_devices_is_an_error_when_the_chunk_is_traced():
    """Building (and so loading a run for eval or export) needs no devices; tracing the chunk
    names the device count and the CPU flag."""
    agent, env, spec = _build(train=dataclasses.replace(CFG, num_devices=2), layout="data")
    init, chunk = loop.make_train(agent, env)
    run = jax.eval_shape(init, jax.random.PRNGKey(0), agent.default_hp())
    with pytest.raises(ValueError, match="needs 2 devices .* 1 visible .*device_count=2"):
        jax.eval_shape(chunk, run)


@pytest.mark.parametrize("name", ["pqld-cartpole-cpu", "pqld-ce-cartpole-cpu"])
def test_pqld_cpu_presets_fit_the_returns_in_the_support(name):
    """CartpoleBalance pays at most 1 per step: discounted returns reach 1 / (1 - gamma) = 100,
    which atoms on [-10, 10] cannot hold unless rewards are scaled (unscaled, both presets
    stalled near 250 within 64k steps; with 0.1 they reach 977 and 997)."""
    from jaxrl import configs

    preset = configs.get(name)
    config = preset.agent_config
    assert preset.env == "CartpoleBalance" and config.critic_type == "categorical"
    assert config.reward_scaling * 1.0 / (1.0 - config.gamma) <= config.v_max
    assert config.v_min <= 0.0


def test_a_config_json_with_pqls_old_num_devices_still_loads():
    """Before `--num-devices` counted the devices of PQL's layouts, PQL's config held its own
    `num_devices` (and the run's was 1): such a config.json parses with the count moved into
    the run's TrainConfig; a field no config knows is still an error."""
    from jaxrl.run import checkpoint

    resolved = {"agent": "pql", "env": "PointMass1D", "train": dataclasses.asdict(CFG),
                "agent_config": dict(SMALL, layout="data", num_devices=2)}
    _, _, cfg, config, _ = checkpoint.parse_config(resolved)
    assert cfg.num_devices == 2 and config.layout == "data"
    assert not hasattr(config, "num_devices")
    resolved["agent_config"]["num_device"] = 2
    with pytest.raises(checkpoint.CheckpointError, match="unknown fields \\['num_device'\\]"):
        checkpoint.parse_config(resolved)
