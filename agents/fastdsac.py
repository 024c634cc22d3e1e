"""FastDSAC (variant A): a DSAC-T Gaussian return-distribution critic with constrained
exploration, on FastTD3 scaffolding (many parallel envs, several updates per env step).

Sources: Lu et al., "Enhancing Policy Plasticity via Constrained Exploration for Scalable
Humanoid Locomotion" (2026), `luge66/FastDSAC` `fast_dsac/{fastdsac_net,fastdsac}.py`; DSAC-T:
Duan et al., IEEE TPAMI 2025 (arXiv 2310.05858), `Jingliang-Duan/DSAC-v2` `dsac_v2.py`.

- Actor: its own head, an untanh'd Gaussian (`distributions.Gaussian`): `mu` clamped to
  [-1, 1], `sigma` (or log sigma, `std_bound_mode`) squashed into its range; behaviour
  `a = mu + sigma eps` (clipped to the action box by the env side); deterministic action `mu`.
- Target actions (the constraint): `a' = mu + c tanh(u - mu)`, `u ~ N(mu, sigma^2)`, so
  `a'` stays within `c = policy_noise` of the mean (`target_constraint="tanh"`, as released), or
  a Gaussian truncated to `[mu - c, mu + c]` (`"truncnorm"`).
- Critic: twin Gaussian heads `(Q_i, sigma_i)`. With `q' = min_i Qbar_i(s', a')`,
  `j = argmin`, `zbar = Qbar_j + clip(eps, -3, 3) sigmabar_j`:
  `y_q = r + gamma m (q' - alpha log pi(a'))` (expected-value substitution) and
  `y_z = r + gamma m (zbar - alpha log pi(a'))`; `wbar_i` is an EMA (`dsac_tau`) of the batch
  mean of `sigma_i`; `y_zb = Qhat_i + clip(y_z - Qhat_i, -3 wbar_i, 3 wbar_i)`; the loss is the
  DSAC-T "original" form (`jaxrl.learning.losses.dsac_critic_loss`) with `b = dsac_b`.
- Choices: no target actor (the released fork has none; target actions come from the online
  actor); the actor loss samples plain reparameterized Gaussian actions; `std_bound_mode`
  `sigma` bounds sigma to [1e-3, 0.4] (default) and `as_released` bounds log sigma to
  [0.001, 0.4] as the release does (sigma in [1.001, 1.49]: a much wider policy than the
  paper's text suggests).
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl.agents.common.sac_config import HP_FIELDS, HP_INIT_ONLY, HP_RANGES, SACCoreConfig
from jaxrl.agents.common.sac_core import SACCore, SACState
from jaxrl.agents.common.sac_heads import ActorHead, CriticHead, gaussian_actor
from jaxrl.engine.checks import check_choice
from jaxrl.engine.contract import AgentBase
from jaxrl.learning import distributions as dist
from jaxrl.learning import losses


@dataclasses.dataclass(frozen=True)
class FastDSACConfig(SACCoreConfig):
    """FastDSAC-A settings (defaults: the released Playground G1/T1 values)."""

    actor_hidden: tuple[int, ...] = (512, 256)
    critic_hidden: tuple[int, ...] = (1024, 512)
    activation: str = "gelu"
    target_entropy: str = "action_dim"
    init_alpha: float = 1e-4
    policy_delay: int = 2
    tau: float = 0.1
    gamma: float = 0.97
    learning_rate: float = 3e-4
    alpha_learning_rate: float = 3e-4
    weight_decay: float = 0.1
    policy_noise: float = 1e-3
    """Truncation radius c of the target actions around the actor mean."""
    target_constraint: str = "tanh"
    """`tanh` (mean-centred tanh, as released) or `truncnorm` (truncated Gaussian)."""
    std_bound_mode: str = "sigma"
    """`sigma`: sigma in [1e-3, 0.4]; `as_released`: log sigma in [0.001, 0.4]."""
    dsac_b: float = 0.1
    """`b` of the DSAC-T original loss (keeps small sigmas from blowing up the step)."""
    dsac_tau: float = 0.005
    """EMA rate of `wbar` (mean predicted std)."""
    q_clip: float | None = None
    """Clamp the critic mean to [-q_clip, q_clip] (10 on Playground locomotion); None: off."""


@struct.dataclass(kw_only=True)
class FastDSACState(SACState):
    wbar: jax.Array
    """float32 `[num_q]`: EMA of each head's mean predicted std (-1 until the first step)."""


@dataclasses.dataclass(frozen=True)
class FastDSAC(AgentBase):
    """FastDSAC-A (off-policy): the SAC-family core (`SACCore`, held as `core`) with the
    Gaussian return critic and constrained target actions documented above."""

    config: FastDSACConfig
    HP_FIELDS: ClassVar = HP_FIELDS
    HP_RANGES: ClassVar = HP_RANGES
    HP_INIT_ONLY: ClassVar = HP_INIT_ONLY
    on_policy: ClassVar[bool] = False
    explores: ClassVar[bool] = True
    has_replay: ClassVar[bool] = True

    @property
    def core(self) -> SACCore:
        """The SAC-family core with the untanh'd Gaussian actor and the Gaussian critic."""
        bounds = self.log_std_bounds
        actor = ActorHead(gaussian_actor(self.config, self.spec.action_size, bounds), bounds,
                          make_dist=self.make_dist, target_action=self.target_action)
        return SACCore(self.config, self.spec, self.train, actor,
                       CriticHead(self.critic_loss, "gaussian", 1, self.q_values),
                       state_cls=FastDSACState, extra_state=self.extra_state)

    def validate(self) -> None:
        """Its own checks, `AgentBase`'s, then the core's (`SACCore.validate`)."""
        c = self.config
        check_choice("target_constraint", c.target_constraint, ("tanh", "truncnorm"))
        check_choice("std_bound_mode", c.std_bound_mode, ("sigma", "as_released"))
        if not (c.policy_noise > 0 and c.dsac_b >= 0 and 0 < c.dsac_tau <= 1):
            raise ValueError(f"fastdsac needs policy_noise > 0, dsac_b >= 0, 0 < dsac_tau <= 1; "
                             f"got {c.policy_noise}, {c.dsac_b}, {c.dsac_tau}.")
        if c.q_clip is not None and not c.q_clip > 0:
            raise ValueError(f"q_clip must be positive or None, got {c.q_clip}.")
        super().validate()
        self.core.validate()

    def init(self, key, hp) -> FastDSACState:
        return self.core.init(key, hp)

    def act(self, state: FastDSACState, obs, key, deterministic: bool = False):
        return self.core.act(state, obs, key, deterministic)

    def init_explore(self, key, num_envs: int):
        return self.core.init_explore(key, num_envs)

    def explore(self, state: FastDSACState, obs, key, carry, done):
        return self.core.explore(state, obs, key, carry, done)

    def update(self, state: FastDSACState, traj, key):
        return self.core.update(state, traj, key)

    def extra_state(self) -> dict:
        return {"wbar": -jnp.ones((self.config.num_q,), jnp.float32)}

    @property
    def log_std_bounds(self) -> tuple[float, float]:
        """log sigma in [log 1e-3, log 0.4] (`sigma`), or in [0.001, 0.4] (`as_released`)."""
        if self.config.std_bound_mode == "sigma":
            return math.log(1e-3), math.log(0.4)
        return 1e-3, 0.4

    def make_dist(self, head_out):
        mu, log_std = head_out
        return dist.Gaussian(loc=jnp.clip(mu, -1.0, 1.0), scale=jnp.exp(log_std))

    def target_action(self, policy, key):
        c = self.config.policy_noise
        mu, std = policy.loc, policy.scale
        if self.config.target_constraint == "tanh":
            return dist.centred_tanh_sample(key, mu, std, c)
        a = dist.truncated_sample(key, mu, std, mu - c, mu + c)
        return a, dist.truncated_log_prob(a, mu, std, mu - c, mu + c)

    def q_values(self, out):
        q = out[..., 0]
        clip = self.config.q_clip
        return q if clip is None else jnp.clip(q, -clip, clip)

    def critic_loss(self, critic_params, state: FastDSACState, batch, key):
        """DSAC-T loss of every head with the expected-value and clipped sample targets
        (`losses.dsac_critic_loss`)."""
        c, core = self.config, self.core
        k_next, k_eps = jax.random.split(key)
        next_a, alpha_logp = core.next_action(state, batch, k_next)
        out, tgt, variables = core.critic_outputs(critic_params, state, batch, next_a)
        keep = 1.0 - batch.truncated if c.truncation == "brax" else None
        loss, wbar, metrics = losses.dsac_critic_loss(
            self.q_values(out), out[..., 1], self.q_values(tgt), tgt[..., 1],
            core.scaled_reward(state, batch.reward), batch.discount, alpha_logp, k_eps,
            state.wbar, c.dsac_tau, c.dsac_b, keep)
        return loss, (metrics, variables, {"wbar": wbar})
