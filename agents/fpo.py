"""FPO: Flow Policy Optimization, with the FPO++ options.

Sources: McAllister, Ge, Yi, Kim, Weber, Choi, Feng, Kanazawa, "Flow Matching Policy
Gradients" (arXiv 2507.21053), Sec. 3 (the CFM-loss ratio, Eq. 9) and its reference code
`akanazawa/fpo` `playground/src/flow_policy/{fpo,networks}.py` (defaults of `FpoConfig`,
epsilon-MSE loss `u_but_supervise_as_eps`, discretized training times, networks); FPO++: Yi,
Choi et al., "Flow Policy Gradients for Robot Control" (arXiv 2602.02481): per-sample ratios,
ASPO for negative advantages, zero-sampling evaluation, more integration steps.

The policy is a flow: an action is `K` Euler (or midpoint) steps of a velocity MLP from
Gaussian noise (jaxrl's time convention, t = 0 noise, t = 1 action: `jaxrl.learning.flow`);
the env receives `tanh(x)`. At rollout time each action stores `N_mc` pairs `(t_i, eps_i)`
(t on the sampler's grid) and the behaviour policy's per-pair CFM losses `l_old,i`; the
update's ratio is `exp(mean l_old - mean l_theta)` (or per pair, FPO++), in PPO's clipped
objective with `clipping_epsilon` 0.05 (or ASPO), no entropy term. Loop, value net, GAE and
normalizer are `jaxrl.agents.common.onpolicy`'s (FPO's own normalizer is not used: it shrinks the
std over time, `akanazawa/fpo` issue 13).

Evaluation and export (`act(..., deterministic=True)`) integrate from zero noise with no
injected noise (FPO++'s zero sampling), so the exported policy is a plain function of the
observation; `zero_sampling_eval=False` draws the initial noise as the FPO reference's eval
does.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp

from jaxrl.agents.common import onpolicy
from jaxrl.engine.checks import check_choice
from jaxrl.engine.contract import AgentBase
from jaxrl.learning import flow, losses

HP_FIELDS = onpolicy.HP_FIELDS + ("clipping_epsilon",)
HP_RANGES = dict(onpolicy.HP_RANGES, clipping_epsilon=(0.0, 10.0))


@dataclasses.dataclass(frozen=True)
class FPOConfig(onpolicy.OnPolicyConfig):
    """FPO settings (defaults: the reference's `FpoConfig` for Playground DM Control). Float
    fields named in `HP_FIELDS` are traced (sweepable)."""

    policy_hidden: tuple[int, ...] = (32, 32, 32, 32)
    """Velocity MLP hidden widths (reference: 4 x 32, the size of Brax's PPO policy)."""
    flow_steps: int = 10
    """Integration steps K from noise to action in rollouts and evaluation; also the grid of
    training times (FPO++ uses 64 for locomotion: 8-16 were unstable there)."""
    sampler: str = "euler"
    """`euler` (reference) or `midpoint` (RK2, two velocity calls per step)."""
    num_mc: int = 8
    """N_mc: (t, eps) pairs stored per action for the CFM-loss ratio."""
    num_freqs: int = 4
    """Frequencies of the Fourier time features `[cos(2^k t), sin(2^k t)]` (8 features)."""
    output_scale: float = 0.25
    """The velocity is the MLP output times this (reference: 0.25)."""
    cfm_loss: str = "eps_mse"
    """`eps_mse` (reference default: supervise the implied noise, a t^2-weighted velocity
    MSE) or `u_mse` (plain velocity MSE, worse in the paper's ablation)."""
    discrete_times: bool = True
    """Draw training times from the sampler grid `k / K` (reference) instead of U[0, 1)."""
    per_sample_ratio: bool = False
    """FPO++: one ratio per (t, eps) pair, `exp(clip(l_old - l_theta, -3, 3))`, each clipped
    on its own, instead of `exp(mean l_old - mean l_theta)`."""
    trust_region: str = "clip"
    """`clip` (PPO clip, FPO) or `aspo` (FPO++: the SPO objective where advantages are negative;
    needed for locomotion from scratch, off for fine-tuning)."""
    sde_sigma: float = 0.0
    """Std of Gaussian noise added after every rollout integration step (0: plain ODE)."""
    zero_sampling_eval: bool = True
    """Deterministic actions integrate from eps = 0 (FPO++); False draws the initial noise from
    the key (the FPO reference's eval), which makes evaluation stochastic."""
    learning_rate: float = 3e-4
    """Adam step size (reference: constant 3e-4, no gradient clipping)."""
    gamma: float = 0.995
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    clipping_epsilon: float = 0.05
    """Trust-region width on the FPO ratio (0.05: larger clips hurt sharply in the paper)."""
    vf_coef: float = 0.5
    """Value loss `0.5 * vf_coef * mean((G - V)^2)` (reference `value_loss_coeff` 0.25)."""
    reward_scaling: float = 10.0
    """Rewards are multiplied by this inside the loss (reference: 10)."""


@dataclasses.dataclass(frozen=True)
class FPO(AgentBase):
    """Flow Policy Optimization (on-policy): a flow-matching policy trained by PPO's clipped
    objective on a ratio of CFM losses."""

    config: FPOConfig
    HP_FIELDS: ClassVar = HP_FIELDS
    HP_RANGES: ClassVar = HP_RANGES
    on_policy: ClassVar[bool] = True

    @property
    def core(self) -> onpolicy.OnPolicyLoop:
        """The on-policy loop, value net and normalizer, with this agent's policy."""
        return onpolicy.OnPolicyLoop(self.config, self.spec, self.train, self.init_policy,
                                     self.policy_objective)

    def init(self, key, hp) -> onpolicy.OnPolicyState:
        return self.core.init(key, hp)

    def update(self, state: onpolicy.OnPolicyState, traj, key):
        return self.core.update(state, traj, key)

    def with_hp(self, state: onpolicy.OnPolicyState, hp):
        return self.core.with_hp(state, hp)

    def validate(self) -> None:
        """Raises ValueError before compiling for non-positive steps or `num_mc`, unknown
        sampler, loss or trust-region names, or a negative `sde_sigma`."""
        c = self.config
        flow.check_flow_settings(c.flow_steps, c.sampler, num_mc=c.num_mc)
        check_choice("cfm_loss", c.cfm_loss, flow.CFM_LOSSES)
        check_choice("trust_region", c.trust_region, ("clip", "aspo"))
        if not c.sde_sigma >= 0.0:
            raise ValueError(f"sde_sigma must be >= 0, got {c.sde_sigma}.")
        self.core.validate()
        super().validate()

    @property
    def velocity_net(self) -> flow.VelocityMLP:
        c = self.config
        return flow.VelocityMLP(tuple(c.policy_hidden), self.spec.action_size, c.activation,
                                c.num_freqs, c.output_scale)

    def init_policy(self, key, policy_obs):
        a = jnp.zeros(policy_obs.shape[:-1] + (self.spec.action_size,))
        return self.velocity_net.init(key, policy_obs, a, jnp.zeros(policy_obs.shape[:-1]))

    def export_info(self) -> dict:
        """What the exported deterministic policy computes (written to the export sidecar)."""
        c = self.config
        return {"policy": "flow", "agent": "fpo", "integration_steps": c.flow_steps,
                "sampler": c.sampler, "deterministic": c.zero_sampling_eval,
                "initial_noise": "zeros" if c.zero_sampling_eval else "standard normal",
                "squash": "tanh"}

    def sample(self, policy_params, obs, key, x0, noise_scale=0.0):
        """Pre-squash actions `[N, A]`: K steps from `x0` for flat normalized `obs` `[N, O]`;
        `noise_scale > 0` adds that std of noise (drawn from `key`) after each step."""
        c = self.config
        net = self.velocity_net

        def velocity(x, t):
            return net.apply(policy_params, obs, x, jnp.broadcast_to(t, x.shape[:-1]))

        noise = None
        if c.sde_sigma > 0.0 and noise_scale is not None:
            noise = jax.random.normal(key, (c.flow_steps,) + x0.shape)
        return flow.integrate(velocity, x0, c.flow_steps, c.sampler, noise, noise_scale)

    def cfm_losses(self, policy_params, obs, action, eps, t):
        """Per-pair CFM losses `[..., N_mc]` of pre-squash `action` `[..., A]` with pairs
        `eps` `[..., N_mc, A]`, `t` `[..., N_mc, 1]` (jaxrl convention)."""
        obs = jnp.broadcast_to(obs[..., None, :], eps.shape[:-1] + obs.shape[-1:])
        action = action[..., None, :]
        x_t = flow.interpolate(eps, action, t)
        v = self.velocity_net.apply(policy_params, obs, x_t, t[..., 0])
        return flow.cfm_loss(v, x_t, t, eps, action, self.config.cfm_loss)

    def act(self, state, obs, key, deterministic: bool = False):
        """Action `tanh(x)` in [-1, 1] `[N, A]`; extras (stochastic): `raw_action` x, the pairs
        `cfm_eps` `[N, N_mc, A]`, `cfm_t` `[N, N_mc, 1]` and their losses `cfm_old`."""
        c = self.config
        params = state.params["policy"]
        obs = self.core.policy_in(self.core.normalize(state.obs_stats, obs))
        shape = obs.shape[:-1] + (self.spec.action_size,)
        k_x0, k_noise, k_eps, k_t = jax.random.split(key, 4)
        if deterministic:
            x0 = (jnp.zeros(shape) if c.zero_sampling_eval else jax.random.normal(k_x0, shape))
            return jnp.tanh(self.sample(params, obs, k_noise, x0, None)), {}
        x = self.sample(params, obs, k_noise, jax.random.normal(k_x0, shape), c.sde_sigma)
        pairs = obs.shape[:-1] + (c.num_mc,)
        eps = jax.random.normal(k_eps, pairs + (self.spec.action_size,))
        t = flow.sample_training_times(k_t, pairs + (1,),
                                       c.flow_steps if c.discrete_times else None)
        return jnp.tanh(x), {"raw_action": x, "cfm_eps": eps, "cfm_t": t,
                             "cfm_old": self.cfm_losses(params, obs, x, eps, t)}

    def policy_objective(self, policy_params, obs, mb, adv, key, hp):
        """`-mean(trust-region objective(ratio, A))` over actions (and pairs), no extra term."""
        c, ex = self.config, mb.extras
        new = self.cfm_losses(policy_params, self.core.policy_in(obs), ex["raw_action"],
                              ex["cfm_eps"], ex["cfm_t"])
        ratio = losses.fpo_ratio(ex["cfm_old"], new, c.per_sample_ratio)
        eps = hp["clipping_epsilon"]
        objective = losses.trust_region_objective(ratio, adv[..., None], eps, c.trust_region)
        loss = -objective.mean()
        log_ratio = jnp.log(ratio)
        metrics = {"train/policy_loss": loss, "train/cfm_loss": new.mean(),
                   "train/ratio_mean": ratio.mean(),
                   "train/approx_kl": jnp.mean((ratio - 1.0) - log_ratio),
                   "train/clip_fraction": jnp.mean(jnp.abs(ratio - 1.0) > eps)}
        return loss, jnp.zeros(()), metrics
