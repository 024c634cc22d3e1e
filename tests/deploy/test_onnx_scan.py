"""ONNX export of `lax.scan` (unrolled) and of flow samplers, and the sidecar's `policy_info`.

The flow-sampler tests trace `jaxrl.learning.flow.integrate` with a `VelocityMLP` (Fourier time
features) as a flow policy's deterministic `act` does (zero initial noise, no step noise) and
compare onnxruntime with JAX on random observations.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import onnxruntime as ort
import pytest

from jaxrl import configs, envs
from jaxrl.agents import PPO
from jaxrl.deploy import export, onnx_convert
from jaxrl.deploy.onnx_convert import UnsupportedPrimitiveError, jaxpr_to_onnx
from jaxrl.envs import toy
from jaxrl.learning import flow

ATOL = 1e-5


def _convert_and_compare(fn, *args, names=None):
    """Converts `fn` traced on `args`, runs onnxruntime, checks it against `jax.jit(fn)`."""
    names = names or [f"in{i}" for i in range(len(args))]
    model = jaxpr_to_onnx(jax.make_jaxpr(fn)(*args), names, ["out"])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {n: np.asarray(a) for n, a in zip(names, args, strict=True)
             if n in {i.name for i in model.graph.input}}
    got = session.run(["out"], feeds)[0]
    want = np.asarray(jax.jit(fn)(*args))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=ATOL)
    return model


def _flow_policy(num_steps, sampler, activation="silu", batch=4, obs_size=5, action_size=3):
    """A deterministic flow policy `obs -> tanh(x_1)` with random (non-trivial) parameters."""
    net = flow.VelocityMLP(hidden=(32,) * 4, action_size=action_size, activation=activation)
    obs = jnp.zeros((batch, obs_size))
    params = net.init(jax.random.PRNGKey(0), obs, jnp.zeros((batch, action_size)),
                      jnp.zeros(batch))
    params = jax.tree.map(
        lambda p: p + 0.3 * jax.random.normal(jax.random.PRNGKey(1), p.shape), params)

    def policy(o):
        velocity = lambda x, t: net.apply(params, o, x, jnp.broadcast_to(t, x.shape[:-1]))
        x0 = jnp.zeros(o.shape[:-1] + (action_size,))
        return jnp.tanh(flow.integrate(velocity, x0, num_steps, sampler))

    return policy


@pytest.mark.parametrize("num_steps,sampler", [(10, "euler"), (64, "midpoint")])
def test_flow_sampler_matches_onnxruntime(num_steps, sampler):
    policy = _flow_policy(num_steps, sampler)
    obs = 2.0 * np.random.RandomState(num_steps).randn(4, 5).astype(np.float32)
    model = _convert_and_compare(policy, obs, names=["obs"])
    ops = [n.op_type for n in model.graph.node]
    evals = num_steps * (2 if sampler == "midpoint" else 1)
    assert ops.count("MatMul") == 5 * evals  # the velocity MLP once per evaluation
    assert "Loop" not in ops and "Scan" not in ops
    # One copy of the parameters however many steps (initializers are shared).
    kernels = [t for t in model.graph.initializer if tuple(t.dims) == (32, 32)]
    assert len(kernels) == 3
    assert len(model.graph.node) < 50 * evals


@pytest.mark.parametrize("activation", ["gelu", "relu", "elu", "tanh"])
def test_flow_sampler_activations(activation):
    policy = _flow_policy(4, "midpoint", activation)
    obs = np.random.RandomState(1).randn(4, 5).astype(np.float32)
    _convert_and_compare(policy, obs, names=["obs"])


def test_scan_body_with_softplus_mish_and_observation_time():
    """custom_jvp activations (softplus, mish), Fourier features of an observation-dependent
    time (Cos/Sin in the graph) and a batched dot_general inside the body."""
    w = np.random.RandomState(2).randn(3, 3).astype(np.float32)

    def fn(x, t):
        def step(c, _):
            h = jax.nn.softplus(c) + jax.nn.mish(c) + flow.fourier_time_features(t, 2)[:, :3]
            m = jnp.einsum("bi,bj->bij", h, c) @ w
            return jnp.tanh(jnp.sum(m, axis=-1)) + jnp.max(c, axis=-1, keepdims=True), None

        return jax.lax.scan(step, x, None, length=5)[0]

    x = np.random.RandomState(3).randn(2, 3).astype(np.float32)
    t = np.array([0.3, 0.8], np.float32)
    model = _convert_and_compare(fn, x, t)
    assert {"Cos", "Sin", "Einsum"} <= {n.op_type for n in model.graph.node}


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_with_observation_xs_and_ys(reverse):
    """Cumulative sum over observation rows: xs sliced per step, per-step outputs stacked."""
    def fn(obs):
        def step(c, x):
            c = c + x
            return c, (c * 2.0, jnp.sin(x))

        total, (partial, sines) = jax.lax.scan(step, jnp.zeros(obs.shape[1:]), obs,
                                               reverse=reverse)
        return total.sum() + partial * sines

    obs = np.random.RandomState(4).randn(6, 3).astype(np.float32)
    _convert_and_compare(fn, obs)


@pytest.mark.parametrize("reverse", [False, True])
def test_reverse_scan_stacks_in_order(reverse):
    obs = np.arange(5, dtype=np.float32)[None] + 1.0  # [1, 5]

    def fn(o):
        xs = jnp.arange(5, dtype=jnp.float32)  # constant xs, observation-dependent carry
        return jax.lax.scan(lambda c, x: (c * 2.0 + x, c), o[0, 0], xs, reverse=reverse)[1]

    _convert_and_compare(fn, obs)


def test_scan_with_consts_and_several_carries():
    w = np.random.RandomState(5).randn(4, 4).astype(np.float32) * 0.5

    def fn(obs, scale):
        def step(carry, x):
            h, count = carry
            h = jnp.tanh(h @ w + obs * scale + x)  # obs, scale and w are scan consts
            return (h, count + 1.0), h[:, :2]

        (h, count), ys = jax.lax.scan(step, (obs, jnp.zeros(())), jnp.linspace(0, 1, 7))
        return jnp.concatenate([h, ys.reshape(obs.shape[0], -1), count[None, None] *
                                jnp.ones((obs.shape[0], 1))], axis=-1)

    obs = np.random.RandomState(6).randn(2, 4).astype(np.float32)
    _convert_and_compare(fn, obs, np.array([[0.5, 1.0, -1.0, 2.0]], np.float32))


def test_scan_drops_carries_and_ys_no_output_reads():
    def fn(obs):
        def step(carry, _):
            a, b = carry
            return (a * 2.0, jnp.sin(b) + a), jnp.exp(a)

        return jax.lax.scan(step, (obs, obs), None, length=4)[0][0]

    model = _convert_and_compare(fn, np.ones((1, 2), np.float32))
    ops = {n.op_type for n in model.graph.node}
    assert "Sin" not in ops and "Exp" not in ops


def test_fori_loop_with_buffer_updates():
    """`fori_loop` with static bounds is a scan; its counter folds, so `.at[i].set` (scatter)
    and `dynamic_update_slice` have constant indices."""
    def fn(obs):
        def body(i, buf):
            row = jnp.tanh(obs[0] * (i + 1.0))
            buf = buf.at[i].set(row)
            return jax.lax.dynamic_update_slice(buf, row[None, :1] * 3.0, (i, 1))

        return jax.lax.fori_loop(0, 3, body, jnp.zeros((4, obs.shape[1])))

    _convert_and_compare(fn, np.array([[0.2, -0.5, 1.5]], np.float32))


def test_while_loop_is_named_unsupported():
    closed = jax.make_jaxpr(lambda x: jax.lax.while_loop(
        lambda c: c[0, 0] < 10.0, lambda c: c * 2.0, x))(jnp.ones((1, 2)))
    with pytest.raises(UnsupportedPrimitiveError, match="'while'"):
        jaxpr_to_onnx(closed, ["obs"], ["action"])


def test_supported_primitives_lists_scan():
    names = onnx_convert.supported_primitives()
    assert {"scan", "dynamic_update_slice", "scatter", "logistic", "cos", "pjit"} <= set(names)
    assert list(names) == sorted(names) and "while" not in names


# ---- sidecar policy_info -----------------------------------------------------------------------

PRESET = configs.get("ppo-toy-cpu")
CFG = dataclasses.replace(PRESET.train, num_envs=16, unroll_length=8, total_env_steps=512,
                          num_chunks=2, num_eval_envs=4, num_seeds=1)


class _FlowInfoAgent:
    """A PPO agent that describes itself as a flow policy (only `export_info` differs)."""

    def __init__(self, agent, info):
        self._agent, self._info = agent, info

    def __getattr__(self, name):
        return getattr(self._agent, name)

    def export_info(self) -> dict:
        return dict(self._info)


@pytest.fixture(scope="module")
def ppo_pointmass():
    env = toy.PointMass()
    spec = envs.make_spec(env, env.name)
    agent = PPO(config=PRESET.agent_config, spec=spec, train=CFG)
    return agent, agent.init(jax.random.PRNGKey(0), agent.default_hp()), env, spec


def test_sidecar_policy_info_from_export_info(ppo_pointmass, tmp_path):
    agent, state, env, spec = ppo_pointmass
    info = {"policy": "flow", "integration_steps": 10, "sampler": "euler",
            "deterministic": True, "initial_noise": "zeros"}
    res = export.export_policy(_FlowInfoAgent(agent, info), state, env, str(tmp_path / "p.onnx"),
                               num_parity_obs=50)
    assert res.max_abs_error <= ATOL
    assert res.metadata["policy_info"] == info
    with open(res.sidecar_path) as f:
        assert export.json.load(f)["policy_info"] == info


def test_sidecar_policy_info_default_and_bad_export_info(ppo_pointmass, tmp_path):
    agent, state, env, spec = ppo_pointmass
    assert not hasattr(agent, "export_info")
    res = export.export_policy(agent, state, env, str(tmp_path / "p.onnx"),
                               num_parity_obs=50)
    assert res.metadata["policy_info"] == {"deterministic": True}
    with pytest.raises(TypeError, match="JSON"):
        export.policy_info(_FlowInfoAgent(agent, {"steps": np.zeros(2)}))


def test_scan_params_of_jax_0_10_and_0_11_forms():
    """jax <= 0.10: ClosedJaxpr + num_consts/num_carry; jax 0.11: open Jaxpr + flat tree ft_in
    whose unpack() is (consts, carry, xs), each sized by its leaves."""
    import jax

    from jaxrl.deploy import onnx_convert

    closed = jax.make_jaxpr(lambda c, x: (c + x, c))(1.0, 2.0)

    class FlatTree(tuple):
        def unpack(self):
            return tuple(self)

    old = onnx_convert._scan_body({"jaxpr": closed, "num_consts": 2, "num_carry": 3})
    assert old[0] is closed.jaxpr and (old[2], old[3]) == (2, 3)
    new = onnx_convert._scan_body({"jaxpr": closed.jaxpr,
                                   "ft_in": FlatTree(((None,) * 2, (None,) * 3, (None,)))})
    assert new[0] is closed.jaxpr and new[1] == [] and (new[2], new[3]) == (2, 3)
