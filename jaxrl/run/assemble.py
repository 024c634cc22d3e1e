"""Assembling a run from names: agent, env and spec (`build`), per-seed keys, stacked hp.

Shared by the driver (`runner`) and checkpoint loading (`checkpoint`); importing this module
registers the built-in agents.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

import jaxrl.agents  # noqa: F401  (registers the built-in agents)
from jaxrl import envs
from jaxrl.engine import contract as agent_lib
from jaxrl.engine import loop, parallel, randomization
from jaxrl.engine.rollout import key_like  # noqa: F401 (also public here)


def build(agent_name: str, env_name: str, cfg: loop.TrainConfig, agent_config):
    """Builds (agent, env, spec) and validates everything that can fail before compiling."""
    cfg.validate()
    agent_cls, _ = agent_lib.lookup(agent_name)
    envs.registry.check_env_name(env_name)
    env = envs.make(env_name, impl=cfg.env_impl, episode_length=cfg.episode_length)
    spec = envs.make_spec(env, env_name)
    randomization.maybe_randomize(env, cfg.domain_randomization)  # bad randomizer: ValueError
    return build_agent(agent_name, cfg, agent_config, spec), env, spec


def build_agent(agent_name: str, cfg: loop.TrainConfig, agent_config, spec):
    """The validated agent for an env of `spec` (`build`'s checks that need no env)."""
    cfg.validate()
    agent_cls, _ = agent_lib.lookup(agent_name)
    agent = agent_cls(config=agent_config, spec=spec, train=cfg)
    agent.validate()
    if cfg.num_devices > 1 and agent.layout[0] == "single":  # data parallel (jit shardings)
        if cfg.num_envs % cfg.num_devices:
            raise ValueError(f"num_devices={cfg.num_devices} does not divide num_envs="
                             f"{cfg.num_envs}: every device steps the same number of envs.")
        parallel.data_mesh(cfg.num_devices)  # enough devices visible?
    return agent


def seed_keys(cfg: loop.TrainConfig, seed: int = 0, typed: bool = False) -> jax.Array:
    """Keys for seeds `seed .. seed + cfg.num_seeds - 1` (`RunConfig.seed`; distinct, never
    shared): raw uint32 `[S, 2]` (`jax.random.PRNGKey`), or with `typed` a typed key array
    `[S]` (`jax.random.key`; same random numbers with the default threefry implementation)."""
    make = jax.random.key if typed else jax.random.PRNGKey
    return jnp.stack([make(seed + i) for i in range(cfg.num_seeds)])


def eval_key(like: jax.Array, seed: int, chunk: int) -> jax.Array:
    """The eval key of `seed`'s run after chunk `chunk` (0-based): `fold_in(PRNGKey(seed +
    10_000), chunk)`, of the same kind as `like` (`key_like`). A resumed run, a sweep member
    and a run alone evaluate with the same keys."""
    return jax.random.fold_in(key_like(like, seed + 10_000), chunk)


def stack_hp(hp: dict, n: int) -> dict:
    """`{name: float32 [n]}`: the same hyperparameter values for each of `n` members."""
    return {k: jnp.full((n,), v, jnp.float32) for k, v in hp.items()}
