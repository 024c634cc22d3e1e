"""PPO, faithful to Brax / MuJoCo Playground PPO (brax `training/agents/ppo`).

Sources: Schulman et al. 2017, "Proximal Policy Optimization Algorithms" (arXiv 1707.06347),
Eq. 7 (clipped surrogate); GAE from arXiv 1506.02438; brax `training/agents/ppo/{losses,
networks,train}.py` for the tanh-normal policy, observation normalization (before SGD by
default), reward scaling inside the loss, `0.5 * vf_coef` value weight and the one-sample
entropy estimate. Difference from Brax by default: truncation bootstraps from V(true final obs)
(`gae_mode="bootstrap"`); `gae_mode="brax"` masks truncated steps as Brax does.

The loop, value net and normalizer are `jaxrl.agents.common.onpolicy`'s: `update` takes
`Transition[T, B]` with `extras["raw_action"]` (pre-tanh `u`) and `extras["log_prob"]`,
normalizes observations, then runs `num_epochs` passes over `num_minibatches` minibatches of
whole length-T sub-trajectories (GAE per minibatch); this file adds the tanh-Gaussian policy and
its clipped surrogate with an entropy bonus.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax.numpy as jnp

from jaxrl.agents.common import onpolicy
from jaxrl.engine.contract import AgentBase
from jaxrl.learning import distributions, losses
from jaxrl.learning.networks import MLP

HP_FIELDS = onpolicy.HP_FIELDS + ("clipping_epsilon", "entropy_cost")
HP_RANGES = dict(onpolicy.HP_RANGES, clipping_epsilon=(0.0, 10.0), entropy_cost=(0.0, 1e3))


@dataclasses.dataclass(frozen=True)
class PPOConfig(onpolicy.OnPolicyConfig):
    """PPO settings. Float fields named in `HP_FIELDS` are traced (sweepable) defaults."""

    policy_hidden: tuple[int, ...] = (32, 32, 32, 32)
    """Policy MLP hidden widths (Brax/Playground DM Control: 32 x 4)."""
    min_std: float = 1e-3
    """Floor added to `softplus` of the policy scale."""
    learning_rate: float = 1e-3
    """Adam step size."""
    gamma: float = 0.995
    """Discount factor (Brax `discounting`)."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    clipping_epsilon: float = 0.3
    """PPO ratio clip."""
    entropy_cost: float = 1e-2
    """Entropy bonus weight."""
    vf_coef: float = 0.5
    """Value loss coefficient; the loss is `0.5 * vf_coef * mean((G - V)^2)` as in Brax."""
    reward_scaling: float = 10.0
    """Rewards are multiplied by this inside the loss (Brax: 10 for DM Control, 1 for
    locomotion; the CPU preset uses 1)."""


PPOState = onpolicy.OnPolicyState


@dataclasses.dataclass(frozen=True)
class PPO(AgentBase):
    """Proximal Policy Optimization with a tanh-normal policy (on-policy)."""

    config: PPOConfig
    HP_FIELDS: ClassVar = HP_FIELDS
    HP_RANGES: ClassVar = HP_RANGES
    on_policy: ClassVar[bool] = True

    @property
    def core(self) -> onpolicy.OnPolicyLoop:
        """The on-policy loop, value net and normalizer, with this agent's policy."""
        return onpolicy.OnPolicyLoop(self.config, self.spec, self.train, self.init_policy,
                                     self.policy_objective)

    def validate(self) -> None:
        """The loop's checks (`OnPolicyLoop.validate`), then `AgentBase`'s."""
        self.core.validate()
        super().validate()

    def init(self, key, hp) -> onpolicy.OnPolicyState:
        return self.core.init(key, hp)

    def update(self, state: onpolicy.OnPolicyState, traj, key):
        return self.core.update(state, traj, key)

    def with_hp(self, state: onpolicy.OnPolicyState, hp):
        return self.core.with_hp(state, hp)

    @property
    def policy_net(self):
        return MLP(tuple(self.config.policy_hidden) + (2 * self.spec.action_size,),
                   self.config.activation)

    def init_policy(self, key, policy_obs):
        return self.policy_net.init(key, policy_obs)

    def policy(self, policy_params, obs) -> distributions.TanhGaussian:
        """The tanh-Gaussian policy for normalized observations `obs`."""
        raw = self.policy_net.apply(policy_params, self.core.policy_in(obs))
        loc, scale = distributions.params(raw, self.config.min_std)
        return distributions.TanhGaussian(loc=loc, scale=scale)

    def act(self, state: PPOState, obs, key, deterministic: bool = False):
        """Action in [-1, 1] `[N, A]`; extras `raw_action` (pre-tanh u) and `log_prob`."""
        policy = self.policy(state.params["policy"], self.core.normalize(state.obs_stats, obs))
        if deterministic:
            return policy.mode(), {}
        u = policy.sample_raw(key)
        return jnp.tanh(u), {"raw_action": u, "log_prob": policy.log_prob_raw(u)}

    def policy_objective(self, policy_params, obs, mb, adv, key, hp):
        """Clipped surrogate (Eq. 7) and the entropy bonus `-entropy_cost * H` as the extra."""
        pi = self.policy(policy_params, obs)
        logp = pi.log_prob_raw(mb.extras["raw_action"])
        policy_loss, metrics = losses.clipped_surrogate(logp, mb.extras["log_prob"], adv,
                                                        hp["clipping_epsilon"])
        entropy = pi.entropy(key).mean()
        metrics.update({"train/entropy": entropy, **pi.metrics()})
        return policy_loss, -(hp["entropy_cost"] * entropy), metrics
