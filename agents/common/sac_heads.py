"""What an SAC-family agent gives the `SACCore` it holds (`jaxrl.agents.common.sac_core`): its
actor head (`ActorHead`: network, distribution, target action) and critic head (`CriticHead`:
output kind, expected value, loss), with SAC's defaults (Haarnoja et al., arXiv 1812.05905:
a tanh-squashed Gaussian actor, a fresh policy sample as the target action, scalar critics).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp

from jaxrl.agents.common.sac_config import SACCoreConfig
from jaxrl.learning import distributions
from jaxrl.learning.networks import GaussianActor


def tanh_gaussian(head_out):
    """SAC's policy from the actor head's `(mu, log_std)`: a tanh-squashed Gaussian."""
    mu, log_std = head_out
    return distributions.TanhGaussian(loc=mu, scale=jnp.exp(log_std))


def fresh_sample(dist, key):
    """SAC's next action for the critic target: a fresh policy sample and its log-prob."""
    return dist.sample_and_log_prob(key)


def scalar_q(out):
    """Expected value per head `[E, ...]` of a scalar critic's output `[E, ..., 1]`."""
    return out[..., 0]


def gaussian_actor(config: SACCoreConfig, action_size: int, log_std_bounds):
    """The SAC-family actor network (`networks.GaussianActor`): `obs -> (mu, log_std)`."""
    c = config
    lo, hi = log_std_bounds
    return GaussianActor(tuple(c.actor_hidden), action_size, c.activation, c.normalized_nets,
                         c.num_blocks, c.layer_norm, lo, hi, c.normalized_bias)


@dataclasses.dataclass(frozen=True)
class ActorHead:
    """An agent's actor, as the core uses it.

    Attributes:
        net: flax module `obs -> head output` (initialized by the core on a batch of one).
        log_std_bounds: range of its log-std head (checked by the core).
        make_dist: head output -> distribution object (`sample_and_log_prob`, `from_noise`,
            `mode`, `metrics`, `loc`).
        target_action: `(dist, key) -> (a', log pi(a'))`, the next action of the critic target.
        policy: optional `(actor_vars, obs) -> distribution` that replaces `net.apply` +
            `make_dist` (SAC Flow's noise-path policy); no BatchNorm then.
        learning_rate: optional `(state, lr) -> actor lr` (SAC Flow's own actor step size).
    """

    net: Any
    log_std_bounds: tuple[float, float]
    make_dist: Callable = tanh_gaussian
    target_action: Callable = fresh_sample
    policy: Callable | None = None
    learning_rate: Callable | None = None


@dataclasses.dataclass(frozen=True)
class CriticHead:
    """An agent's critic, as the core uses it.

    Attributes:
        loss: `(critic_params, state, batch, key) -> (loss, (metrics, critic variables, state
            field updates))`, built from `SACCore.critic_outputs`/`next_action` and a pure loss
            of `jaxrl.learning.losses`.
        kind, num_atoms: the output head of every ensemble member (`networks.QHead`).
        q_values: critic output `[E, ..., *]` -> expected value per head `[E, ...]`.
    """

    loss: Callable
    kind: str = "scalar"
    num_atoms: int = 1
    q_values: Callable = scalar_q
