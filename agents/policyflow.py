"""PolicyFlow: a flow policy with a Gaussian residual, trained by PPO without ODE backprop.

Sources: Yang, Liu, Chen, "PolicyFlow" (arXiv 2602.01156, ICLR 2026): Sec. 3 (the policy
`a = phi_1(z; s) + n`, the velocity-difference ratio on the straight interpolation path, the
Brownian regularizer built from the rectified-flow score, the Gaussian entropy term), and the
authors' PyTorch code as released with the paper's IsaacLab configs (`PolicyFlowCfgInstance`:
lr 1e-4, adaptive KL 0.01, gamma 0.99, lambda 0.95, 4 minibatches x 5 epochs, Gaussian entropy
and Brownian scales 0.01, ratio clip 0.2, value loss scale 1, grad clip 1; the continuous
normalizing flow's 10 RK2 steps, the training-time table of grid points and midpoints, the
learnable clipped log-std in [-20, 4] starting at std 1, and the CleanDiffuser-style Fourier
time embedding: `time_dim / 8` frozen frequencies ~ N(0, 16^2) -> Linear -> Mish -> Linear).

Policy (jaxrl's time convention, t = 0 noise, t = 1 action, `jaxrl.learning.flow`):
`z ~ N(0, I)`, `a_hat = phi_1(z; s)` by `flow_steps` explicit-midpoint steps of the velocity
`v_theta(x, t; s)`, then `a = a_hat + n` with `n ~ N(0, sigma^2)`, sigma a learned
state-independent per-dimension std (log-std clipped to `[log_std_min, log_std_max]`). The env
receives `tanh(a)`, as PPO's `raw_action` (our actions live in [-1, 1]; the reference clips
instead). The policy is a Gaussian mixture over z, so its density is intractable; the ratio
uses the change of the flow's end point for the *stored* z: under new parameters the same z
lands at `a_hat + Delta`, so `n` becomes `n - Delta` and

    log rho = log N(n; Delta, sigma^2) - log N(n; 0, sigma_old^2),

with `Delta` approximated without integrating (the paper's ratio approximation) by one
velocity difference on the straight path: per stored sample one t (grid points and midpoints of
the sampler grid, or U(0, 1)), `x_t = (1 - t) z + t a_hat`, `Delta ~ dv = v_theta(x_t, t) -
v_old(x_t, t)`. `t` and `v_old(x_t, t)` are computed at rollout with the behaviour parameters
and stored in `extras` (as FPO stores its (t, eps) pairs), so every epoch reuses them; the
reference instead draws a fresh t per minibatch and keeps a copy of the behaviour network. The
quality of `dv` as a stand-in for `Delta` is measured in `tests/agents/test_policyflow.py`.

Loss per minibatch (added to the core's value loss):
`-J_clip(rho; eps) + w_b mean(eta^2) - w_g H(sigma)` with the Brownian residual
`eta = (1 - t) v_theta(x_t) - (x_t - t v_old(x_t))`: since the rectified-flow score is
`grad log p_t(x) = (t v(x) - x) / (1 - t)`, `eta = (1 - t) (v_theta + grad log p_t^old)`, so the
term pulls the velocity toward the negative score of the behaviour flow, which spreads the
action distribution (as the reference's `mse_loss((1 - t) v, x_t - t v_last)`). `official_mean`
averages eta^2 over action dims (the reference), `paper_l2` sums them. `H = 1/2 sum_i log(2 pi e
sigma_i^2)`. The KL for the adaptive learning rate is RSL-RL's `KL(old || new)` between the
residual Gaussians `N(0, sigma_old)` and `N(dv, sigma)`, reported as `train/approx_kl`.

Deterministic actions (evaluation, export): z = 0 and no residual, `tanh(phi_1(0; s))`.

Left out: the critic's value clipping (0.2 in the reference; the core has none), AdamW weight
decay 1e-5 (the core's optimizer is Adam; the frozen Fourier frequencies get zero gradients
through `stop_gradient`, so Adam leaves them exactly unchanged), the reference's EMA actor.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl.agents.common import onpolicy
from jaxrl.engine.checks import check_choice, check_log_std_bounds
from jaxrl.engine.contract import AgentBase
from jaxrl.learning import distributions, flow, losses
from jaxrl.learning.networks import ACTIVATIONS

HP_FIELDS = onpolicy.HP_FIELDS + ("clipping_epsilon", "brownian_coef", "entropy_coef")
HP_RANGES = dict(onpolicy.HP_RANGES, clipping_epsilon=(0.0, 10.0), brownian_coef=(0.0, 1e3),
                 entropy_coef=(0.0, 1e3))
T_SAMPLINGS = ("grid", "uniform")
REDUCTIONS = ("official_mean", "paper_l2")


@dataclasses.dataclass(frozen=True)
class PolicyFlowConfig(onpolicy.OnPolicyConfig):
    """PolicyFlow settings; defaults follow the reference's IsaacLab `PolicyFlowCfgInstance`
    (RSL-RL-style PPO). Float fields named in `HP_FIELDS` are traced (sweepable)."""

    policy_hidden: tuple[int, ...] = (256, 256, 256)
    """Hidden widths of the velocity MLP on `concat(x, time emb + obs emb)` (RSL-RL size)."""
    value_hidden: tuple[int, ...] = (256, 256, 256)
    """Value MLP hidden widths (RSL-RL size)."""
    activation: str = "elu"
    """Hidden activation of the velocity and value MLPs (RSL-RL: elu); the time MLP uses Mish."""
    time_dim: int = 64
    """Width of the time and observation embeddings (summed; reference: 64 on most IsaacLab
    tasks, 256 on G1, 512 on H1 / Go2); `time_dim // 8` random Fourier frequencies."""
    fourier_scale: float = 16.0
    """Std of the frozen random Fourier frequencies (features `cos / sin(2 pi f t)`)."""
    output_init_scale: float = 0.0
    """0 zeroes the velocity MLP's last layer at init (the flow starts as the identity, a_hat =
    z); > 0 scales its Glorot init instead (e.g. 0.01)."""
    flow_steps: int = 10
    """Integration steps K from z to a_hat (reference `sample_steps` 10)."""
    sampler: str = "midpoint"
    """`midpoint` (explicit RK2, the reference) or `euler`."""
    t_sampling: str = "grid"
    """Training time per stored sample: `grid` draws from the velocity-evaluation times of the
    sampler grid without the ends, `j / (2K)` for j = 1..2K-1 (the reference's table of grid
    points and midpoints); `uniform` draws t ~ U(0, 1)."""
    log_std_init: float = 0.0
    """Initial log-std of the Gaussian residual (reference `std_init` 1)."""
    log_std_min: float = -20.0
    """Lower clip of the residual log-std (reference -20)."""
    log_std_max: float = 4.0
    """Upper clip of the residual log-std (reference 4)."""
    reduction: str = "official_mean"
    """Brownian term over action dims: `official_mean` (mean, the reference code) or `paper_l2`
    (sum, the squared L2 norm of the paper's equation)."""
    learning_rate: float = 1e-4
    """Initial Adam step size, then adapted to `desired_kl` (reference 1e-4)."""
    desired_kl: float | None = 0.01
    """RSL-RL adaptive learning rate target on `train/approx_kl` (reference 0.01)."""
    num_minibatches: int = 4
    """Minibatches per epoch (reference 4)."""
    num_epochs: int = 5
    """Epochs per update (reference 5)."""
    max_grad_norm: float | None = 1.0
    """Global gradient-norm clip over actor and critic (reference 1.0)."""
    normalize_after_sgd: bool = True
    """Update the normalizer after SGD, so the stored `v_old` and the first minibatch see the
    same normalized observations and the first ratio is exactly 1 (RSL-RL normalizes during
    the rollout, which amounts to the same)."""
    gamma: float = 0.99
    """Discount factor (reference 0.99)."""
    gae_lambda: float = 0.95
    """GAE lambda (reference 0.95)."""
    clipping_epsilon: float = 0.2
    """PPO ratio clip (reference 0.2)."""
    brownian_coef: float = 0.01
    """w_b, weight of the Brownian regularizer (reference 0.01)."""
    entropy_coef: float = 0.01
    """w_g, weight of the Gaussian-residual entropy bonus (reference 0.01)."""
    vf_coef: float = 2.0
    """Value loss `0.5 * vf_coef * mean((G - V)^2)`: 2.0 is the reference's value loss scale 1
    on `mean((G - V)^2)`."""
    reward_scaling: float = 1.0
    """Rewards are multiplied by this inside the loss (reference: unscaled)."""


# ----- the network ----------------------------------------------------------------------------


class PolicyFlowVelocity(nn.Module):
    """`v_theta(obs, x, t)`: `[..., O], [..., A], [...] -> [..., A]`.

    Time: `time_dim // 8` frozen random frequencies f (a parameter behind `stop_gradient`),
    `[cos(2 pi f t), sin(2 pi f t)]` -> Dense(time_dim) -> Mish -> Dense(time_dim); observation:
    Dense(time_dim); the two summed and concatenated with x, then a Glorot-uniform MLP whose
    last layer is zero (or Glorot times `output_init_scale`).
    """

    hidden: Sequence[int]
    action_size: int
    time_dim: int = 64
    fourier_scale: float = 16.0
    activation: str = "elu"
    output_init_scale: float = 0.0

    @nn.compact
    def __call__(self, obs, x, t):
        freqs = self.param("fourier_freqs", nn.initializers.normal(self.fourier_scale),
                           (max(self.time_dim // 8, 1),))
        angles = 2.0 * jnp.pi * jnp.asarray(t, jnp.float32)[..., None] * jax.lax.stop_gradient(
            freqs)
        emb = jnp.concatenate([jnp.cos(angles), jnp.sin(angles)], axis=-1)
        emb = nn.Dense(self.time_dim)(jax.nn.mish(nn.Dense(self.time_dim)(emb)))
        h = jnp.concatenate([x, emb + nn.Dense(self.time_dim)(obs)], axis=-1)
        glorot, act = nn.initializers.glorot_uniform(), ACTIVATIONS[self.activation]
        for width in self.hidden:
            h = act(nn.Dense(width, kernel_init=glorot)(h))
        last = (nn.initializers.zeros if self.output_init_scale == 0.0 else
                nn.initializers.variance_scaling(self.output_init_scale, "fan_avg", "uniform"))
        return nn.Dense(self.action_size, kernel_init=last)(h)


# ----- the agent ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PolicyFlow(AgentBase):
    """PolicyFlow (on-policy): flow + Gaussian residual, ratio from velocity differences on the
    straight path, Brownian regularizer, Gaussian entropy bonus."""

    config: PolicyFlowConfig
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
        """Raises ValueError before compiling for non-positive steps or `time_dim`, unknown
        sampler, t-sampling or reduction names, or bad log-std bounds."""
        c = self.config
        flow.check_flow_settings(c.flow_steps, c.sampler)
        check_choice("t_sampling", c.t_sampling, T_SAMPLINGS)
        check_choice("reduction", c.reduction, REDUCTIONS)
        check_log_std_bounds(c.log_std_min, c.log_std_max)
        if not math.isfinite(c.log_std_init):
            raise ValueError(f"log_std_init must be finite, got {c.log_std_init}.")
        if c.time_dim < 8 or c.time_dim % 8:
            raise ValueError(f"time_dim must be a positive multiple of 8 (time_dim / 8 Fourier "
                             f"frequencies), got {c.time_dim}.")
        if not (math.isfinite(c.output_init_scale) and c.output_init_scale >= 0.0):
            raise ValueError(f"output_init_scale must be >= 0, got {c.output_init_scale}.")
        self.core.validate()
        super().validate()

    @property
    def velocity_net(self) -> PolicyFlowVelocity:
        c = self.config
        return PolicyFlowVelocity(tuple(c.policy_hidden), self.spec.action_size, c.time_dim,
                                  c.fourier_scale, c.activation, c.output_init_scale)

    def init_policy(self, key, policy_obs):
        a = jnp.zeros(policy_obs.shape[:-1] + (self.spec.action_size,))
        velocity = self.velocity_net.init(key, policy_obs, a, jnp.zeros(policy_obs.shape[:-1]))
        log_std = jnp.full((self.spec.action_size,), self.config.log_std_init, jnp.float32)
        return {"velocity": velocity, "log_std": log_std}

    def log_std(self, policy_params):
        """The residual's clipped log-std `[A]`."""
        return jnp.clip(policy_params["log_std"], self.config.log_std_min,
                        self.config.log_std_max)

    def velocity(self, policy_params, obs, x, t):
        """`v_theta(x, t; s)` `[..., A]` for flat normalized `obs`, `x` `[..., A]`, `t` `[...]`."""
        return self.velocity_net.apply(policy_params["velocity"], obs, x, t)

    def sample(self, policy_params, obs, z):
        """`a_hat = phi_1(z; s)`: `flow_steps` steps of the sampler from `z` `[N, A]`."""
        def v(x, t):
            return self.velocity(policy_params, obs, x, jnp.broadcast_to(t, x.shape[:-1]))

        return flow.integrate(v, z, self.config.flow_steps, self.config.sampler)

    def export_info(self) -> dict:
        """What the exported deterministic policy computes (for the export sidecar)."""
        c = self.config
        return {"policy": "flow", "agent": "policyflow", "integration_steps": c.flow_steps,
                "sampler": c.sampler, "deterministic": True, "initial_noise": "zeros",
                "residual_noise": "none", "squash": "tanh"}

    def act(self, state, obs, key, deterministic: bool = False):
        """`tanh(a)` in [-1, 1] `[N, A]`, `a = phi_1(z) + n`. Extras (stochastic): `z`, `a_hat`,
        `noise` n, `log_std_old` `[N, A]`, `log_prob` = log N(n; 0, sigma_old^2) `[N]`, the
        training time `flow_t` `[N, 1]` and `v_old` = v(x_t, t) `[N, A]` at rollout."""
        c, params = self.config, state.params["policy"]
        obs = self.core.policy_in(self.core.normalize(state.obs_stats, obs))
        shape = obs.shape[:-1] + (self.spec.action_size,)
        if deterministic:
            return jnp.tanh(self.sample(params, obs, jnp.zeros(shape))), {}
        k_z, k_n, k_t = jax.random.split(key, 3)
        z = jax.random.normal(k_z, shape)
        a_hat = self.sample(params, obs, z)
        log_std = jnp.broadcast_to(self.log_std(params), shape)
        noise = jnp.exp(log_std) * jax.random.normal(k_n, shape)
        t = flow.sample_midpoint_times(k_t, obs.shape[:-1] + (1,), c.flow_steps, c.t_sampling)
        v_old = self.velocity(params, obs, flow.interpolate(z, a_hat, t), t[..., 0])
        log_prob = distributions.diag_gaussian_log_prob(noise, 0.0, log_std)
        extras = {"z": z, "a_hat": a_hat, "noise": noise, "log_std_old": log_std,
                  "log_prob": log_prob, "flow_t": t, "v_old": v_old}
        return jnp.tanh(a_hat + noise), extras

    def flow_terms(self, policy_params, obs, extras):
        """`(dv, eta, log_std)` for stored samples: the velocity difference and the Brownian
        residual `[..., A]` on the straight path at the stored t, and the clipped log-std."""
        t = extras["flow_t"]
        x_t = flow.interpolate(extras["z"], extras["a_hat"], t)
        v = self.velocity(policy_params, self.core.policy_in(obs), x_t, t[..., 0])
        v_old = jax.lax.stop_gradient(extras["v_old"])
        return v - v_old, flow.brownian_residual(v, v_old, x_t, t), self.log_std(policy_params)

    def policy_objective(self, policy_params, obs, mb, adv, key, hp):
        """Clipped surrogate on `log rho = log N(n; dv, sigma^2) - log N(n; 0, sigma_old^2)`;
        extra `w_b mean(eta^2) - w_g H(sigma)`."""
        del key
        ex = mb.extras
        dv, eta, log_std = self.flow_terms(policy_params, obs, ex)
        logp = distributions.diag_gaussian_log_prob(ex["noise"], dv, log_std)
        loss, metrics = losses.clipped_surrogate(logp, ex["log_prob"], adv,
                                                 hp["clipping_epsilon"])
        sq = jnp.square(eta)
        brownian = jnp.mean(sq) if self.config.reduction == "official_mean" else jnp.mean(
            jnp.sum(sq, axis=-1))
        entropy = distributions.diag_gaussian_entropy(log_std)
        kl = distributions.diag_gaussian_kl(0.0, ex["log_std_old"], dv, log_std).mean()
        metrics.update({"train/ratio_kl": metrics["train/approx_kl"], "train/approx_kl": kl,
                        "train/brownian_loss": brownian, "train/entropy": entropy,
                        "train/residual_std": jnp.exp(log_std).mean(),
                        "train/dv_rms": jnp.sqrt(jnp.mean(jnp.square(dv)))})
        return loss, hp["brownian_coef"] * brownian - hp["entropy_coef"] * entropy, metrics
