"""Losses and targets of the agents: PPO's clipped surrogate and value loss; SAC's temperature
step, soft TD targets (scalar and C51), critic and policy losses; DSAC-T's Gaussian critic loss;
the cross-entropies of the categorical critics; FPO's ratio and trust-region objectives.

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


def soft_q_loss(q, target, mask):
    """SAC's critic loss `0.5 mean_{e,b}(mask_b (Q_e(s_b, a_b) - y_b)^2)` (Haarnoja et al.,
    arXiv 1812.05905, Eq. 5, over every ensemble head).

    Args:
        q: float32 `[E, B]` online Q of each head; target: `[B]` soft TD target (a constant);
        mask: float32 `[B]` (0 drops a transition, Brax's truncation mask).
    """
    return 0.5 * jnp.mean(jnp.square(q - jax.lax.stop_gradient(target)) * mask)


def sac_actor_loss(log_prob, q, alpha):
    """SAC's policy loss `mean_b(alpha log pi(a_b|s_b) - Q(s_b, a_b))` with reparameterized
    `a_b ~ pi(.|s_b)` (arXiv 1812.05905, Eq. 7); `alpha` is a constant.

    Args:
        log_prob, q: float32 `[B]` (q: the ensemble already reduced); alpha: float32 scalar.
    """
    return jnp.mean(jax.lax.stop_gradient(alpha) * log_prob - q)


def twin_td_loss(q, target):
    """TD3/PQL's critic loss `sum_e mean_b (Q_e(s_b, a_b) - y_b)^2` (Fujimoto et al.,
    arXiv 1802.09477, Eq. 10 per head; `Improbable-AI/pql` `pql/algo/pql_v_learner.py`).

    Args:
        q: float32 `[E, B]` online Q of each head; target: `[B]` TD target (a constant).
    """
    return jnp.mean(jnp.square(q - jax.lax.stop_gradient(target)[None]), axis=1).sum()


def deterministic_actor_loss(q):
    """DDPG/TD3's policy loss `-mean_b min_e Q_e(s_b, pi(s_b))` (Lillicrap et al., arXiv
    1509.02971, Eq. 6, with the twins' minimum as PQL's P-learner): q float32 `[E, B]`."""
    return -jnp.mean(q.min(axis=0))


# --- DSAC-T (Duan et al., IEEE TPAMI 2025, arXiv 2310.05858; `Jingliang-Duan/DSAC-v2`) -------

def dsac_t_loss(q, sigma, q_hat, sigma_hat, y_q, y_zb, wbar, b):
    """DSAC-T "original" critic loss of one head, with the `b` guard of `dsac_v2.py`, averaged
    over the batch.

    `L = (wbar^2 + b) mean[-(y_q - Qhat)/(sigmahat^2 + b) Q
    - ((Qhat - y_zb)^2 - sigmahat^2)/(sigmahat^3 + b) sigma]`; hats are stop-gradient copies.
    For `b = 0` its gradients are the Gaussian NLL gradients times `wbar^2`.

    Args:
        q, sigma: `[B]` online mean and std (differentiated).
        q_hat, sigma_hat: `[B]` the same values, treated as constants.
        y_q, y_zb: `[B]` expected-value target and clipped sample target.
        wbar: scalar EMA of the mean std; b: float.
    """
    sg = jax.lax.stop_gradient
    q_hat, sigma_hat = sg(q_hat), sg(sigma_hat)
    mean_term = -(sg(y_q) - q_hat) / (sigma_hat ** 2 + b) * q
    std_term = -((q_hat - sg(y_zb)) ** 2 - sigma_hat ** 2) / (sigma_hat ** 3 + b) * sigma
    return (sg(wbar) ** 2 + b) * jnp.mean(mean_term + std_term, axis=-1)


def clip_sample_target(q_hat, y_z, wbar):
    """`y_zb = Qhat + clip(y_z - Qhat, -3 wbar, 3 wbar)` (variance-based target clipping)."""
    return q_hat + jnp.clip(y_z - q_hat, -3.0 * wbar, 3.0 * wbar)


def update_wbar(wbar, batch_sigma_mean, tau):
    """EMA `wbar <- (1 - tau) wbar + tau mean(sigma)`; a negative `wbar` (unset) takes the
    first batch mean."""
    return jnp.where(wbar < 0, batch_sigma_mean, (1.0 - tau) * wbar + tau * batch_sigma_mean)


def dsac_critic_loss(q, sigma, q_bar, sigma_bar, reward, discount, alpha_log_prob, key, wbar,
                     tau, b, keep=None):
    """DSAC-T's critic loss summed over an ensemble of Gaussian heads `(Q_i, sigma_i)`.

    With `j = argmin_i Qbar_i(s', a')` and `zbar = Qbar_j + clip(eps, -3, 3) sigmabar_j`,
    `eps ~ N(0, 1)`: the expected-value target `y_q = r + d (Qbar_j - alpha log pi(a'))`, the
    sample target `y_z = r + d (zbar - alpha log pi(a'))`, each head's `wbar_i` updated by
    `update_wbar`, `y_zb = clip_sample_target(Q_i, y_z, wbar_i)`, and the sum over heads of
    `dsac_t_loss` (arXiv 2310.05858, Sec. 4; `luge66/FastDSAC` `fast_dsac/fastdsac.py`).

    Args:
        q, sigma: float32 `[E, B]` online mean and std (differentiated).
        q_bar, sigma_bar: `[E, B]` target-critic mean and std at `(s', a')` (constants).
        reward, discount, alpha_log_prob: float32 `[B]` (`discount` = `gamma^n (1 - d)`).
        key: PRNG key of the sample noise; wbar: float32 `[E]`; tau: EMA rate; b: float.
        keep: optional float32 `[B]` mask (Brax truncation: 0 drops a transition).

    Returns:
        (loss, new wbar `[E]`, metrics `train/critic_loss`, `q_mean`, `sigma_mean`, `wbar`).
    """
    j = jnp.argmin(q_bar, axis=0)
    pick = lambda x: jnp.take_along_axis(x, j[None], axis=0)[0]  # noqa: E731
    eps = jnp.clip(jax.random.normal(key, j.shape), -3.0, 3.0)
    z_bar = pick(q_bar) + eps * pick(sigma_bar)
    y_q = reward + discount * (pick(q_bar) - alpha_log_prob)
    y_z = reward + discount * (z_bar - alpha_log_prob)
    wbar = update_wbar(wbar, jax.lax.stop_gradient(sigma).mean(axis=1), tau)
    y_zb = clip_sample_target(jax.lax.stop_gradient(q), y_z[None], wbar[:, None])
    if keep is not None:
        q, sigma = q * keep, sigma * keep
    loss = jnp.sum(jax.vmap(dsac_t_loss, in_axes=(0, 0, 0, 0, None, 0, 0, None))(
        q, sigma, q, sigma, y_q, y_zb, wbar, b))
    return loss, wbar, {"train/critic_loss": loss, "train/q_mean": q.mean(),
                        "train/sigma_mean": sigma.mean(), "train/wbar": wbar.mean()}


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
