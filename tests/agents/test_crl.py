"""CRL and CPPO on the pure-JAX point maze: mechanics, bad input, advantages (specs/crl.md)."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import configs, envs
from jaxrl.agents.common.contrastive import CRITIC_KEYS
from jaxrl.agents.cppo import baseline_advantage
from jaxrl.engine import loop
from jaxrl.engine.checks import check_goal_spec
from jaxrl.engine.contract import lookup
from jaxrl.engine.types import EnvSpec
from jaxrl.run import runner

TRAIN = loop.TrainConfig(num_envs=8, unroll_length=5, total_env_steps=800, num_chunks=2,
                         num_eval_envs=4)


def _small(name, **kw):
    cfg_cls = lookup(name)[1]
    base = dict(hidden=(32, 32), actor_hidden=(32, 32), repr_dim=8)
    if name == "crl":
        base.update(batch_size=16, buffer_size=400, learning_starts=80)
    else:
        base.update(critic_batch_size=8, num_minibatches=4, num_epochs=2, critic_epochs=1,
                    num_action_samples=4)
    return cfg_cls(**dict(base, **kw))


@functools.cache
def _trained(name):
    """Two chunks of `name` on PointMaze (compiled once per module and agent)."""
    result = runner.train(name, "PointMaze", TRAIN, _small(name), run_dir=None, progress=False)
    result.agent = runner.build(name, "PointMaze", TRAIN, _small(name))[0]
    return result


@pytest.fixture(params=["crl", "cppo"])
def trained(request):
    return request.param, _trained(request.param)


def test_two_chunks_finite_metrics(trained):
    name, result = trained
    assert result.env_steps == 800
    last = result.records[-1]
    for key in ("train/critic_loss", "train/accuracy", "train/logsumexp",
                "eval/episode_success", "eval/episode_success_any", "eval/episode_return"):
        assert np.isfinite(last[key]), (key, last)
    assert 0.0 <= last["train/accuracy"] <= 1.0
    assert 0.0 <= last["eval/episode_success_any"] <= 1.0
    # Time near the goal is a step count within the episode length.
    assert 0.0 <= last["eval/episode_success"] <= 50.0
    if name == "crl":
        # The buffer holds every collected step (800 < 400 rows x 8 envs is not hit: capped).
        assert last["buffer/transitions"] == 400
        assert 1.0 <= last["train/goal_offset"] <= 50.0


def test_crl_state_has_no_target_network_and_actor_step_leaves_critic():
    result = _trained("crl")
    state = jax.tree.map(lambda x: x[0], result.runner.agent_state)  # seed axis
    assert not any("target" in f.name for f in dataclasses.fields(state))
    agent = result.agent
    s = jnp.zeros((16, 2))
    goal = jnp.ones((16, 2))
    new, _ = agent._actor_step(state, s, goal, jax.random.PRNGKey(0))
    for k in CRITIC_KEYS:
        jax.tree.map(np.testing.assert_array_equal, new.params[k], state.params[k])
    assert not np.allclose(new.params["actor"]["params"]["Dense_0"]["kernel"],
                           state.params["actor"]["params"]["Dense_0"]["kernel"])
    # The critic step changes only the critic.
    params, _, _ = agent.nets.critic_step(state.params, state.opt_state["critic"], s,
                                     jnp.zeros((16, 2)), goal, 1e-3)
    jax.tree.map(np.testing.assert_array_equal, params["actor"], state.params["actor"])


def test_baseline_advantage_hand_computed():
    # 3 discrete actions, Q = [1, 2, 3], pi = [0.2, 0.3, 0.5]: V = 2.3.
    q = jnp.array([1.0, 2.0, 3.0])
    samples = jnp.array([1.0] * 2 + [2.0] * 3 + [3.0] * 5)[:, None]  # 10 draws at those rates
    adv = baseline_advantage(q, jnp.broadcast_to(samples, (10, 3)))
    np.testing.assert_allclose(adv, [-1.3, -0.3, 0.7], atol=1e-6)
    adv_exp = baseline_advantage(jnp.log(q), jnp.log(jnp.broadcast_to(samples, (10, 3))), "exp")
    np.testing.assert_allclose(adv_exp, [-1.3, -0.3, 0.7], atol=1e-5)


def test_cppo_monte_carlo_baseline_converges():
    result = _trained("cppo")
    state = jax.tree.map(lambda x: x[0], result.runner.agent_state)
    obs = jnp.array([[1.5, 1.5, 3.5, 3.5], [2.5, 1.5, 1.5, 3.5]])
    act = jnp.zeros((2, 2))
    errors = []
    for m in (4, 64, 4096):
        agent = dataclasses.replace(result.agent, config=dataclasses.replace(
            result.agent.config, num_action_samples=m))
        est = np.stack([agent.advantages(state.params, obs, act, jax.random.PRNGKey(i))
                        for i in range(16)])
        errors.append(est.std(axis=0).mean())
    assert errors[0] > errors[1] > errors[2], errors


def test_step_accounting_with_action_repeat():
    cfg = loop.TrainConfig(num_envs=4, unroll_length=10, action_repeat=2, num_chunks=5,
                           total_env_steps=400)
    assert cfg.iterations_per_chunk == 1 and cfg.real_total_env_steps == 400


@pytest.mark.parametrize("name", ["crl", "cppo"])
def test_non_goal_env_rejected_before_compiling(name):
    with pytest.raises(ValueError, match="goal-conditioned env"):
        runner.train(name, "PointMass1D", TRAIN, _small(name), run_dir=None, progress=False)


def test_goal_indices_out_of_range():
    spec = EnvSpec(name="x", obs_shape=(6,), action_size=2, action_low=(-1.0,) * 2,
                   action_high=(1.0,) * 2, episode_length=10, goal_indices=(0, 4))
    with pytest.raises(ValueError, match=r"out of range: \[4\]"):
        check_goal_spec(spec, "crl")


def test_crl_window_sampling_trains():
    """`sampling="windows"` (JaxGCRL's batches, `replay.sample_windows`): two chunks with
    finite losses, goal offsets inside the 10-row windows, and a run of its own (not the
    default pairs')."""
    result = runner.train("crl", "PointMaze", TRAIN, _small("crl", sampling="windows",
                                                            horizon=10),
                          run_dir=None, progress=False)
    last, pairs = result.records[-1], _trained("crl").records[-1]
    assert np.isfinite(last["train/critic_loss"]) and np.isfinite(last["train/actor_loss"])
    assert 1.0 <= last["train/goal_offset"] <= 10.0
    assert last["train/critic_loss"] != pairs["train/critic_loss"]


def test_crl_random_goals_train_the_actor_on_other_goals():
    """`random_goals=1`: every actor goal is another pair's, so the run (same seed, same
    batches) trains another actor than the default's."""
    result = runner.train("crl", "PointMaze", TRAIN, _small("crl", random_goals=1.0),
                          run_dir=None, progress=False)
    last, own = result.records[-1], _trained("crl").records[-1]
    assert np.isfinite(last["train/actor_loss"]) and np.isfinite(last["train/critic_loss"])
    assert last["train/actor_loss"] != own["train/actor_loss"]


@pytest.mark.parametrize("name,kw,match", [
    ("crl", {"energy": "manhattan"}, "energy must be one of"),
    ("crl", {"contrastive_loss": "dpo"}, "contrastive_loss must be one of"),
    ("crl", {"batch_size": 4096}, "batch_size = 4096 is larger"),
    ("crl", {"utd_ratio": 0.1}, "gradient steps per update"),
    ("crl", {"gamma": float("nan")}, "gamma = nan"),
    ("crl", {"sampling": "window"}, "sampling must be one of"),
    ("crl", {"random_goals": 1.5}, "random_goals must be in"),
    ("crl", {"log_det_epsilon": -1e-6}, "log_det_epsilon must be in"),
    ("crl", {"lr_schedule": "linear"}, "lr_schedule must be one of"),
    ("crl", {"lr_final_fraction": 1.5}, "lr_final_fraction must be in"),
    ("crl", {"actor_init_scale": 0.0}, "actor_init_scale must be finite and > 0"),
    ("crl", {"sampling": "windows", "horizon": 20}, "learning_starts must be at least"),
    ("cppo", {"num_minibatches": 3}, "not divisible by num_minibatches"),
    ("cppo", {"q_space": "linear"}, "q_space"),
    ("cppo", {"max_grad_norm": -1.0}, "max_grad_norm must be positive"),
    ("crl", {"skip_connections": -1}, "skip_connections"),
    ("crl", {"target_entropy_scale": float("nan")}, "target_entropy_scale"),
    ("cppo", {"log_std_max": float("inf")}, "log_std_max must be finite"),
])
def test_bad_settings_rejected(name, kw, match):
    with pytest.raises(ValueError, match=match):
        runner.train(name, "PointMaze", TRAIN, _small(name, **kw), run_dir=None, progress=False)


GOAL_PRESETS = [n for n, p in configs.PRESETS.items() if p.agent in ("crl", "cppo")]


@functools.cache
def _spec(env_name):
    return envs.make_spec(envs.make(env_name), env_name)


@pytest.mark.parametrize("name", GOAL_PRESETS)
def test_goal_presets_validate(name):
    """Every CRL/CPPO preset (GPU ones included) passes the checks made before compiling."""
    preset = configs.get(name)
    agent_cls, cfg_cls = lookup(preset.agent)
    spec = _spec(preset.env)
    agent = agent_cls(config=preset.agent_config, spec=spec,
                      train=preset.train)
    agent.validate()
    assert spec.goal_indices is not None
    if preset.agent == "crl" and preset.train.num_envs == 512:
        assert agent.replay.updates_per_call == 1998  # JaxGCRL: 512 * 999 / 256 per 62-step collect


def test_logsumexp_penalty_default_depends_on_loss_and_energy():
    spec = _spec("PointMaze")
    weight = {}
    for kw in ({}, {"energy": "dot"}, {"energy": "cosine"}, {"contrastive_loss": "binary_nce"},
               {"energy": "cosine", "logsumexp_penalty": 0.3}):
        agent = lookup("crl")[0](config=_small("crl", **kw), spec=spec, train=TRAIN)
        weight[tuple(kw.items())] = agent.nets.lse_weight
    assert list(weight.values()) == [0.1, 0.1, 0.0, 0.0, 0.3]


def test_actor_init_scale_scales_every_actor_kernel():
    """`actor_init_scale` s draws each actor kernel from `U(-sqrt(3 s / fan_in), ...)`: with the
    same key the kernels of s = 1/3 (JaxGCRL, CRL's default) are those of s = 1 (lecun) times
    sqrt(1/3); the encoders do not change."""
    from jaxrl.agents.common.contrastive import ContrastiveNets

    spec = _spec("PointMaze")
    key = jax.random.PRNGKey(0)
    lecun = ContrastiveNets(_small("crl", actor_init_scale=1.0), spec).init_params(key)
    third = ContrastiveNets(_small("crl", actor_init_scale=1 / 3), spec).init_params(key)
    kernels = [(a, b) for a, b in zip(jax.tree.leaves(lecun["actor"]),
                                      jax.tree.leaves(third["actor"]), strict=True)
               if a.ndim == 2]
    assert len(kernels) == 4  # two hidden layers, mean and log-std heads
    assert _small("crl").actor_init_scale == 1 / 3 and _small("cppo").actor_init_scale == 1.0
    for a, b in kernels:
        np.testing.assert_allclose(b, a * np.sqrt(1 / 3), rtol=1e-5, atol=1e-7)
    for name in ("sa_encoder", "g_encoder"):
        for a, b in zip(jax.tree.leaves(lecun[name]), jax.tree.leaves(third[name]), strict=True):
            np.testing.assert_array_equal(a, b)


def _adapted_rates(lr: float, factor: float, steps_per_update: int, updates: int,
                   first: float = 1.5):
    """Per-update means of RSL-RL's step sizes when every step but an update's first moves by
    `factor` and the first by `first` (a Python loop: multiply, then clip to [1e-5, 1e-2], as
    `optim.adapt_to_kl`). An update's first step sees the behaviour policy itself: KL 0 (grow),
    or, where the recomputed log-probabilities differ from the rollout's in the last bits (some
    CPUs), a KL of rounding size, above a target of 1e-12 (shrink)."""
    out = []
    for _ in range(updates):
        seen = []
        for step in range(steps_per_update):
            grow = first if step == 0 else factor
            lr = float(np.clip(np.float32(lr) * np.float32(grow), 1e-5, 1e-2))
            seen.append(lr)
        out.append(np.mean(seen))
    return out, lr


@pytest.mark.parametrize("desired_kl,factor", [(1e3, 1.5), (1e-12, 1 / 1.5)])
def test_cppo_desired_kl_adapts_the_step_size_across_updates(desired_kl, factor):
    """A target far above (below) every minibatch KL multiplies (divides) the policy's step
    size by 1.5 after each of the 2 x 4 PPO steps of an update, carried over updates and clipped
    to [1e-5, 1e-2]: the logged means and the final step size follow a Python loop (dividing,
    they lie between the loops whose updates' first steps grow or shrink)."""
    result = runner.train("cppo", "PointMaze", TRAIN, _small("cppo", desired_kl=desired_kl),
                          run_dir=None, progress=False)
    updates = TRAIN.total_env_steps // (TRAIN.num_envs * TRAIN.unroll_length)  # 20, 10 a chunk
    means, final = _adapted_rates(3e-4, factor, 8, updates)
    # Shrinking: bounded by the loops whose first steps all grow (`means`) or all shrink.
    low = means if factor > 1 else _adapted_rates(3e-4, factor, 8, updates, first=factor)[0]
    for chunk, record in enumerate(result.records):
        want = np.mean(means[10 * chunk: 10 * (chunk + 1)])
        least = np.mean(low[10 * chunk: 10 * (chunk + 1)])
        assert least * (1 - 1e-5) <= record["train/learning_rate"] <= want * (1 + 1e-5)
    got = float(result.runner.agent_state.learning_rate[0])
    assert got == pytest.approx(final if factor > 1 else 1e-5, rel=1e-6)
    assert got == pytest.approx(1e-2 if factor > 1 else 1e-5, rel=1e-6)
    assert "train/learning_rate" not in _trained("cppo").records[-1]  # None: fixed, not logged


def test_cppo_with_hp_scales_an_adapted_step_size():
    """Population-based training's `with_hp`: the step size follows a new `learning_rate`,
    and an adapted one keeps its ratio to the rate."""
    agent = _trained("cppo").agent
    state = agent.init(jax.random.key(0), agent.default_hp())
    assert float(state.learning_rate) == pytest.approx(3e-4)
    moved = agent.with_hp(state, {"learning_rate": jnp.float32(1e-4)})
    assert float(moved.learning_rate) == pytest.approx(1e-4)
    adapted = state.replace(learning_rate=state.learning_rate * 2)
    scaled = agent.with_hp(adapted, {"learning_rate": jnp.float32(1.5e-4)})
    assert float(scaled.learning_rate) == pytest.approx(3e-4)


def test_cppo_bad_desired_kl_rejected():
    with pytest.raises(ValueError, match="desired_kl must be positive"):
        runner.train("cppo", "PointMaze", TRAIN, _small("cppo", desired_kl=0.0), run_dir=None,
                     progress=False)


def test_crl_cosine_schedule_decays_both_step_sizes_over_the_run():
    """`lr_schedule="cosine"`: 20 updates x 5 gradient steps = 100 in the run; the actor's
    and critic's step sizes are their rates at step 0, 0.55 of them halfway, 0.1 at the end
    and after it; `constant` keeps the rates."""
    cfg = _small("crl", lr_schedule="cosine", learning_rate=2e-4, critic_learning_rate=1e-3)
    agent = runner.build("crl", "PointMaze", TRAIN, cfg)[0]
    state = agent.init(jax.random.key(0), agent.default_hp())
    for steps, factor in ((0, 1.0), (50, 0.55), (100, 0.1), (250, 0.1)):
        at = state.replace(num_updates=jnp.int32(steps))
        assert float(agent.learning_rate(at, "learning_rate")) == pytest.approx(2e-4 * factor)
        assert float(agent.learning_rate(at, "critic_learning_rate")) == \
            pytest.approx(1e-3 * factor)
    constant = _trained("crl").agent
    at = constant.init(jax.random.key(0), constant.default_hp()).replace(num_updates=50)
    assert float(constant.learning_rate(at, "learning_rate")) == pytest.approx(3e-4)
    result = runner.train("crl", "PointMaze", TRAIN, cfg, run_dir=None, progress=False)
    assert np.isfinite(result.records[-1]["train/actor_loss"])


def test_twin_q_reads_the_smaller_critic_and_trains_both():
    """`twin_q`: two encoder pairs stacked on a leading axis; `q_value` is the smaller of the
    two critics' `f` (each computed alone, as a one-critic net with that pair's params), the
    loss the sum of theirs; a CRL run with it trains finite."""
    cfg = _small("crl", twin_q=True)
    agent = runner.build("crl", "PointMaze", TRAIN, cfg)[0]
    params = agent.nets.init_params(jax.random.key(1))
    assert params["sa_encoder"]["params"]["Dense_0"]["kernel"].shape[0] == 2
    single = dataclasses.replace(agent.nets, config=dataclasses.replace(cfg, twin_q=False))
    heads = [{k: jax.tree.map(lambda x, i=i: x[i], params[k]) if k != "log_temperature"
              else params[k] for k in CRITIC_KEYS} for i in (0, 1)]
    k1, k2, k3 = jax.random.split(jax.random.key(2), 3)
    s, a = jax.random.normal(k1, (6, 2)), jax.random.uniform(k2, (6, 2), minval=-1, maxval=1)
    g = jax.random.normal(k3, (6, 2))
    critic = {k: params[k] for k in CRITIC_KEYS}
    each = np.stack([np.asarray(single.q_value(h, s, a, g)) for h in heads])
    assert not np.allclose(each[0], each[1])  # two different critics
    np.testing.assert_allclose(agent.nets.q_value(critic, s, a, g), each.min(0), rtol=1e-6)
    loss = float(agent.nets.critic_loss(critic, s, a, g)[0])
    assert loss == pytest.approx(sum(float(single.critic_loss(h, s, a, g)[0]) for h in heads),
                                 rel=1e-6)
    result = runner.train("crl", "PointMaze", TRAIN, cfg, run_dir=None, progress=False)
    assert np.isfinite(result.records[-1]["train/critic_loss"])


def test_log_det_epsilon_bounds_the_actor_loss_log_det():
    """`log_det_epsilon` (JaxGCRL's `log(1 - tanh(u)^2 + 1e-6)`): with the actor's mean at 50
    and its std at exp(-5), each of the 2 action dims has `u = 50 +- 0.03`, whose exact log-det
    is `2 (log 2 - u)` = -98.61 and JaxGCRL's log(1e-6) = -13.82; the entropy estimate
    `-log pi` rises by 2 x 84.80 = 169.6 with eps, and the loss moves by alpha times that."""
    state = jax.tree.map(lambda x: x[0], _trained("crl").runner.agent_state)
    heads = state.params["actor"]["params"]
    mu, raw = heads["Dense_0"], heads["Dense_1"]
    heads = dict(heads, Dense_0={"kernel": jnp.zeros_like(mu["kernel"]),
                                 "bias": jnp.full_like(mu["bias"], 50.0)},
                 Dense_1={"kernel": jnp.zeros_like(raw["kernel"]),
                          "bias": jnp.full_like(raw["bias"], -100.0)})
    state = state.replace(params=dict(state.params, actor={"params": heads}))
    s, goal, key = jnp.zeros((16, 2)), jnp.ones((16, 2)), jax.random.PRNGKey(0)
    out = {}
    for eps in (0.0, 1e-6):
        agent = runner.build("crl", "PointMaze", TRAIN, _small("crl", log_det_epsilon=eps))[0]
        loss, (metrics, _) = agent._actor_loss(state.params["actor"], state, s, goal, key)
        out[eps] = float(loss), float(metrics["train/entropy"])
    np.testing.assert_allclose(out[1e-6][1] - out[0.0][1], 169.6, atol=0.3)
    alpha = float(jnp.exp(state.log_alpha))
    np.testing.assert_allclose(out[0.0][0] - out[1e-6][0], alpha * 169.6, rtol=2e-3)
