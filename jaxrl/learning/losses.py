"""Losses and targets shared by the agents: PPO's clipped surrogate and value loss, the SAC
temperature step, soft TD targets (scalar and C51), and their cross-entropy.

Shapes: B = batch, E = critic ensemble heads, K = atoms; float32 throughout.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl.learning import optim
from jaxrl.learning.returns import categorical_projection, categorical_support


def clipped_surrogate(logp, old_logp, adv, eps):
    """PPO's clipped objective (Schulman et al. 2017, arXiv 1707.06347, Eq. 7) as a loss.

    Args:
        logp, old_logp: float32 `[...]` log-probs of the taken actions under the current and
            the behaviour policy.
        adv: float32 `[...]` advantages (already normalized if wanted).
        eps: clip range (float or float32 scalar).

    Returns:
        (`-mean(min(r A, clip(r, 1 - eps, 1 + eps) A))`, metrics `train/policy_loss`,
        `train/approx_kl` (`mean((r - 1) - log r)`), `train/clip_fraction`).
    """
    log_ratio = logp - old_logp
    ratio = jnp.exp(log_ratio)
    surrogate = jnp.minimum(ratio * adv, jnp.clip(ratio, 1.0 - eps, 1.0 + eps) * adv)
    loss = -surrogate.mean()
    return loss, {"train/policy_loss": loss,
                  "train/approx_kl": jnp.mean((ratio - 1.0) - log_ratio),
                  "train/clip_fraction": jnp.mean(jnp.abs(ratio - 1.0) > eps)}


def value_loss(targets, values, vf_coef):
    """`0.5 * vf_coef * mean((targets - values)^2)` (brax `training/agents/ppo/losses.py`)."""
    return 0.5 * vf_coef * jnp.mean(jnp.square(targets - values))


def temperature_step(opt, opt_state, log_alpha, log_prob, target_entropy, learning_rate):
    """One optimizer step on the SAC temperature loss `mean(alpha (-log pi - H_target))`.

    Haarnoja et al., arXiv 1812.05905, Eq. 18, parameterized by `log alpha` (as brax
    `training/agents/sac/losses.py`); `log_prob` is treated as a constant.

    Args:
        opt: the optax transformation (without learning rate, see `optim.make_optimizer`).
        opt_state: its state.
        log_alpha: float32 scalar.
        log_prob: float32 `[B]` log-probs of fresh policy samples.
        target_entropy: float target entropy (nats).
        learning_rate: float32 scalar.

    Returns:
        (new log_alpha, new opt_state).
    """
    gap = jax.lax.stop_gradient(-log_prob - target_entropy)
    grad = jax.grad(lambda la: jnp.mean(jnp.exp(la) * gap))(log_alpha)
    return optim.apply(opt, opt_state, log_alpha, grad, learning_rate)


def soft_td_target(reward, discount, next_q, alpha_log_prob):
    """Soft TD target `r + d (Q'(s', a') - alpha log pi(a'|s'))` (arXiv 1812.05905, Eq. 3),
    float32 `[B]`; `discount` is `gamma^n (1 - terminated)` of an n-step window."""
    return reward + discount * (next_q - alpha_log_prob)


def categorical_td_target(target_logits, reward, discount, alpha_log_prob, v_min: float,
                          v_max: float, q_agg: str = "min"):
    """C51 target distribution `[B, K]` shared by all critic heads (Bellemare et al. 2017,
    arXiv 1707.06887, Algorithm 1, with the soft entropy term).

    With `q_agg="min"` the whole distribution of the head with the lower expected value per
    sample is used (distributional clipped double Q, as FlashSAC `flash_rl/agents/flashSAC/
    update.py`), else the heads' mean; its atoms `r + d (z - alpha log pi)` are projected back
    onto the support.

    Args:
        target_logits: `[E, B, K]` target-critic logits at `(s', a')`.
        reward, discount, alpha_log_prob: float32 `[B]`.
        v_min, v_max: support bounds; K = `target_logits.shape[-1]` atoms.
    """
    z = categorical_support(v_min, v_max, target_logits.shape[-1])
    probs = jax.nn.softmax(target_logits.astype(jnp.float32), axis=-1)  # [E, B, K]
    if q_agg == "min":
        pick = jnp.argmin(jnp.sum(probs * z, -1), axis=0)  # [B]
        next_probs = jnp.take_along_axis(probs, pick[None, :, None], axis=0)[0]
    else:
        next_probs = probs.mean(axis=0)
    atoms = reward[:, None] + discount[:, None] * (z[None] - alpha_log_prob[:, None])
    return categorical_projection(next_probs, atoms, v_min, v_max)


def categorical_cross_entropy(logits, target, mask):
    """`mean_b(mask_b sum_e CE(target_b, softmax(logits_eb)))`: logits `[E, B, K]`, target
    `[B, K]` (a constant), mask float32 `[B]`."""
    log_p = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    ce = -jnp.sum(jax.lax.stop_gradient(target)[None] * log_p, axis=-1)  # [E, B]
    return jnp.mean(ce.sum(axis=0) * mask)


def twin_min_projection_target(target_probs, reward, discount, v_min: float, v_max: float):
    """PQL-D's reference target: the elementwise min of the twins' projected distributions.

    Each twin's target distribution is projected separately onto the support with
    `r + discount z` (`categorical_projection`), then the minimum is taken atom by atom and NOT
    renormalized, so its mass is at most 1 and is 0 when the twins put their mass on different
    atoms (Li et al., arXiv 2307.12983; `Improbable-AI/pql` `pql/models/critic.py`,
    `DistributionalDoubleQ`).

    Args:
        target_probs: `[2, B, K]` target-critic probabilities at `(s', a')`.
        reward, discount: float32 `[B]`.

    Returns:
        float32 `[B, K]`.
    """
    z = categorical_support(v_min, v_max, target_probs.shape[-1])
    atoms = reward[:, None] + discount[:, None] * z[None]
    proj = categorical_projection(target_probs, atoms[None], v_min, v_max)  # [2, B, K]
    return proj.min(axis=0)


def binary_cross_entropy(probs, target, eps: float):
    """`mean_{b,k}(-t log p - (1 - t) log(1 - p))` summed over heads, as PyTorch's
    `F.binary_cross_entropy` with `p` clipped to `[eps, 1 - eps]` (PQL-D's loss; the clip keeps
    `log` finite: `Improbable-AI/pql` issue #5).

    Args:
        probs: `[E, B, K]` predicted probabilities; target: `[B, K]` (a constant).
    """
    p = jnp.clip(probs, eps, 1.0 - eps)
    t = jax.lax.stop_gradient(target)[None]
    bce = -(t * jnp.log(p) + (1.0 - t) * jnp.log1p(-p))
    return bce.mean(axis=(1, 2)).sum()


def fpo_ratio(old_cfm, new_cfm, per_sample: bool = False, log_clip: float = 3.0):
    """FPO's likelihood-ratio surrogate from per-sample CFM losses `[..., N_mc]`.

    Averaged (FPO, McAllister et al., arXiv 2507.21053, Eq. 9; `akanazawa/fpo` `fpo.py`
    `average_losses_before_exp=True`): `exp(mean_i l_old,i - mean_i l_theta,i)`, shape `[..., 1]`.
    Per-sample (FPO++, Yi et al., arXiv 2602.02481, Sec. 4.1): `exp(clip(l_old,i - l_theta,i,
    -log_clip, log_clip))`, shape `[..., N_mc]` (each pair clipped by the trust region on its
    own, sharing the advantage).
    """
    if per_sample:
        return jnp.exp(jnp.clip(old_cfm - new_cfm, -log_clip, log_clip))
    return jnp.exp(jnp.mean(old_cfm, axis=-1, keepdims=True)
                   - jnp.mean(new_cfm, axis=-1, keepdims=True))


def trust_region_objective(ratio, adv, eps, kind: str = "clip"):
    """Per-sample surrogate to maximize, same shape as `ratio` (`adv` broadcasts).

    `clip`: PPO's `min(r A, clip(r, 1 - eps, 1 + eps) A)` (arXiv 1707.06347, Eq. 7).
    `aspo` (FPO++, arXiv 2602.02481, Sec. 4.2): the PPO clip where `A >= 0`; where `A < 0` the
    SPO objective `r A - |A| / (2 eps) (r - 1)^2` (Xie et al., arXiv 2401.16025), which pulls the
    ratio back to its maximum at `r = 1 - eps` instead of zeroing the gradient.
    """
    ppo = jnp.minimum(ratio * adv, jnp.clip(ratio, 1.0 - eps, 1.0 + eps) * adv)
    if kind == "clip":
        return ppo
    spo = ratio * adv - jnp.abs(adv) / (2.0 * eps) * jnp.square(ratio - 1.0)
    return jnp.where(adv >= 0.0, ppo, spo)
