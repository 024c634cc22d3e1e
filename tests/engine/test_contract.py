"""The agent contract is enough for a new agent: one class in this file, no other file touched.

`ToyDDPG` below is a complete off-policy agent (deterministic tanh actor, one Q critic, DDPG
updates, target EMA) written only against `AgentBase`, the off-policy helper it holds
(`jaxrl.agents.common.offpolicy.OffPolicyLoop`) and the learning building blocks
(`networks.MLP`, `optim`, `replay.sample`).
Adding it touched no file outside this test: it is registered at test time with
`jaxrl.engine.contract.register` (and removed from the registry afterwards), and then the public
entry points work on it unchanged:

- `jaxrl.run.runner.train` runs it for 2 chunks on `PointMass1D`, logs records and learns
  (params move away from their init);
- `jaxrl.run.runner.resume` continues a run killed after chunk 1 and ends bit-identical to the
  uninterrupted run (params, replay buffer, records);
- `jaxrl.export` (what `jaxrl export RUN_DIR` calls) exports its policy to
  ONNX with an onnxruntime parity error below 1e-5.

It also checks the contract's guards: `register` rejects a class without `update`
(`TypeError`), and `AgentBase.validate` rejects an out-of-range float hyperparameter with a
message naming the CLI flag `--<agent>.<field>`.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct
from tree_helpers import assert_trees_equal

from jaxrl.agents.common.offpolicy import OffPolicyLoop, ema
from jaxrl.engine import contract, loop
from jaxrl.learning import optim, replay
from jaxrl.learning.networks import MLP
from jaxrl.run import assemble, runner
from jaxrl.run import logging as jl

NAME = "toy-ddpg"  # test-only registry name


# --- the new agent: everything it needs, in one config, one state and one class ---------------


@dataclasses.dataclass(frozen=True)
class ToyDDPGConfig:
    utd_ratio: float = 1.0
    batch_size: int = 32
    buffer_size: int = 1024
    learning_starts: int = 32
    learning_rate: float = 1e-3
    tau: float = 0.05
    gamma: float = 0.95
    noise: float = 0.2
    hidden: tuple[int, ...] = (32,)


@struct.dataclass
class ToyDDPGState:
    params: dict  # {"actor": ..., "critic": ...}
    target: dict
    opt_state: dict
    buffer: replay.ReplayState
    hp: dict


@dataclasses.dataclass(frozen=True)
class ToyDDPG(contract.AgentBase):
    HP_FIELDS: ClassVar[tuple[str, ...]] = ("learning_rate", "tau", "gamma")
    HP_RANGES: ClassVar[dict[str, tuple[float, float]]] = {
        "learning_rate": (0.0, 1.0), "tau": (0.0, 1.0), "gamma": (0.0, 1.0)}
    on_policy: ClassVar[bool] = False
    has_replay: ClassVar[bool] = True

    @property
    def replay(self):
        return OffPolicyLoop(self.config, self.spec, self.train)

    def validate(self) -> None:
        super().validate()
        self.replay.validate()

    def update(self, state, traj, key):
        return self.replay.update(state, traj, key, step_inputs=self.step_inputs,
                                  gradient_step=self.gradient_step)

    def _actor(self):
        return MLP((*self.config.hidden, self.spec.action_size))

    def _critic(self):
        return MLP((*self.config.hidden, 1))

    def _pi(self, params, obs):
        return jnp.tanh(self._actor().apply(params["actor"], obs))

    def _q(self, params, obs, action):
        return self._critic().apply(params["critic"], jnp.concatenate([obs, action], -1))[..., 0]

    def init(self, key, hp):
        k_actor, k_critic = jax.random.split(key)
        obs = jnp.zeros((1, *self.spec.obs_shape))
        act = jnp.zeros((1, self.spec.action_size))
        params = {"actor": self._actor().init(k_actor, obs),
                  "critic": self._critic().init(k_critic, jnp.concatenate([obs, act], -1))}
        opt = optim.make_optimizer()
        return ToyDDPGState(params=params, target=params,
                            opt_state={k: opt.init(v) for k, v in params.items()},
                            buffer=self.replay.empty_replay(),
                            hp={k: jnp.asarray(v, jnp.float32) for k, v in hp.items()})

    def act(self, state, obs, key, deterministic: bool = False):
        action = self._pi(state.params, obs)
        if deterministic:
            return action, {}
        noisy = action + self.config.noise * jax.random.normal(key, action.shape)
        return self.replay.random_warmup(state, key, noisy), {}

    def step_inputs(self, state, key):
        g, b = self.replay.updates_per_call, self.config.batch_size
        batch = replay.sample(state.buffer, key, g * b, gamma=state.hp["gamma"])
        return jax.tree.map(lambda x: x.reshape((g, b) + x.shape[1:]), batch)

    def gradient_step(self, state, batch):
        hp, opt = state.hp, optim.make_optimizer()
        next_q = self._q(state.target, batch.next_obs, self._pi(state.target, batch.next_obs))
        y = jax.lax.stop_gradient(batch.reward + batch.discount * next_q)

        def critic_loss(critic):
            p = dict(state.params, critic=critic)
            return jnp.mean((self._q(p, batch.obs, batch.action) - y) ** 2)

        def actor_loss(actor, critic):
            p = {"actor": actor, "critic": critic}
            return -jnp.mean(self._q(p, batch.obs, self._pi(p, batch.obs)))

        params, opt_state = dict(state.params), dict(state.opt_state)
        c_loss, c_grad = jax.value_and_grad(critic_loss)(params["critic"])
        params["critic"], opt_state["critic"] = optim.apply(
            opt, opt_state["critic"], params["critic"], c_grad, hp["learning_rate"])
        a_loss, a_grad = jax.value_and_grad(actor_loss)(params["actor"], params["critic"])
        params["actor"], opt_state["actor"] = optim.apply(
            opt, opt_state["actor"], params["actor"], a_grad, hp["learning_rate"])
        target = ema(state.target, params, hp["tau"])
        state = state.replace(params=params, target=target, opt_state=opt_state)
        return state, {"loss/critic": c_loss, "loss/actor": a_loss}


# --- fixtures --------------------------------------------------------------------------------

CFG = loop.TrainConfig(num_envs=8, unroll_length=4, total_env_steps=2 * 2 * 8 * 4,
                       num_chunks=2, num_eval_envs=2, episode_length=50)


@pytest.fixture(scope="module")
def registered():
    contract.register(NAME, ToyDDPG, ToyDDPGConfig)
    yield NAME
    contract._AGENTS.pop(NAME, None)


@pytest.fixture(scope="module")
def straight(registered, tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("toy_ddpg") / "run")
    result = runner.train(NAME, "PointMass1D", CFG, ToyDDPGConfig(), run_dir=run_dir,
                          progress=False, run=loop.RunConfig(keep_checkpoints=4))
    return result


def _strip(records: list[dict]) -> list[dict]:
    """Records without timings; NaN (no episode finished yet) made comparable."""
    def norm(v):
        return "nan" if isinstance(v, float) and np.isnan(v) else v

    return [{k: norm(v) for k, v in r.items() if k not in ("wall_time", "perf/sps")}
            for r in records]


# --- tests -----------------------------------------------------------------------------------


def test_new_agent_trains_through_the_public_runner(straight):
    assert NAME in contract.list_agents() and contract.lookup(NAME) == (ToyDDPG, ToyDDPGConfig)
    assert len(straight.records) >= CFG.num_chunks
    last = straight.records[-1]
    assert last["buffer/transitions"] == CFG.real_total_env_steps  # every transition stored
    assert np.isfinite(last["loss/critic"]) and np.isfinite(last["loss/actor"])
    assert any(k.startswith("eval/") for r in straight.records for k in r)
    # params moved away from the init the runner starts from (same keys, same hp)
    agent, env, spec = assemble.build(NAME, "PointMass1D", CFG, ToyDDPGConfig())
    init, _ = loop.make_train(agent, env)
    hp = assemble.stack_hp(agent.default_hp(), CFG.num_seeds)
    start = jax.jit(jax.vmap(init))(assemble.seed_keys(CFG), hp).agent_state.params
    trained = straight.runner.agent_state.params
    for part in ("actor", "critic"):
        diffs = jax.tree.map(lambda a, b: float(jnp.max(jnp.abs(a - b))), start[part],
                             trained[part])
        assert max(jax.tree.leaves(diffs)) > 0, part


def test_new_agent_resumes_bit_identically(straight, tmp_path):
    run_dir = str(tmp_path / "resumed")
    shutil.copytree(straight.run_dir, run_dir)
    # What a kill during chunk 2 leaves: checkpoint 1 only, and chunk 2's metrics line removed.
    shutil.rmtree(os.path.join(run_dir, "checkpoints", str(CFG.num_chunks)))
    metrics = os.path.join(run_dir, "metrics.jsonl")
    with open(metrics) as f:
        lines = f.read().splitlines(keepends=True)
    with open(metrics, "w") as f:
        f.writelines(lines[:-1])
    resumed = runner.resume(run_dir, progress=False)
    assert_trees_equal(straight.runner.agent_state.params, resumed.runner.agent_state.params)
    assert_trees_equal(straight.runner.agent_state.buffer, resumed.runner.agent_state.buffer)
    assert_trees_equal(straight.runner, resumed.runner)
    assert _strip(resumed.records) == _strip(straight.records)
    assert _strip(jl.read_jsonl(metrics)) == _strip(
        jl.read_jsonl(os.path.join(straight.run_dir, "metrics.jsonl")))


def test_new_agent_exports_to_onnx_with_parity(straight, tmp_path):
    pytest.importorskip("onnxruntime")
    import jaxrl  # jaxrl.export: what `jaxrl export RUN_DIR` calls

    result = jaxrl.export(straight.run_dir, "onnx", out=str(tmp_path / "policy.onnx"))
    assert result.max_abs_error < 1e-5
    assert result.metadata["agent"] == NAME
    assert os.path.isfile(result.path) and os.path.isfile(result.sidecar_path)


def test_register_rejects_an_agent_without_update():
    class NoUpdate(contract.AgentBase):
        def init(self, key, hp):
            return None

        def act(self, state, obs, key, deterministic=False):
            return obs, {}

    with pytest.raises(TypeError, match="update"):
        contract.register("toy-no-update", NoUpdate, ToyDDPGConfig)
    assert "toy-no-update" not in contract.list_agents()


def test_validate_names_the_flag_of_an_out_of_range_hp(registered):
    bad = ToyDDPGConfig(learning_rate=5.0)
    agent: Any = ToyDDPG(config=bad, spec=None, train=CFG)
    with pytest.raises(ValueError, match=f"--{NAME}.learning-rate"):
        agent.validate()


def test_agents_sit_one_level_below_agentbase():
    """Every built-in agent is one class below `AgentBase`: shared code is a helper it holds
    (`OnPolicyLoop`, `OffPolicyLoop`, `SACCore`, `ContrastiveNets`), never a base class."""
    import jaxrl.agents  # noqa: F401  (registers them)

    for name in set(contract.list_agents()) - {NAME}:  # the built-in agents
        depth = contract.lookup(name)[0].__mro__.index(contract.AgentBase)
        assert depth == 1, (name, depth)
