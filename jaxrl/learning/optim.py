"""Optimizer factory and target-network updates.

The learning rate is a traced hyperparameter (it lives in `hp`), so the optimizer is built from
optax's scale-free transforms and the step multiplies by `-learning_rate` at apply time; a
sweep over learning rates stays one compiled program.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax


def make_optimizer(max_grad_norm: float | None = None, b1: float = 0.9, b2: float = 0.999,
                   eps: float = 1e-8) -> optax.GradientTransformation:
    """Adam direction (optionally after global-norm clipping), without the learning rate."""
    parts = [optax.clip_by_global_norm(max_grad_norm)] if max_grad_norm else []
    return optax.chain(*parts, optax.scale_by_adam(b1=b1, b2=b2, eps=eps))


def apply(opt: optax.GradientTransformation, opt_state, params, grads, learning_rate):
    """One descent step: `params - learning_rate * direction(grads)`. Returns (params, state)."""
    updates, opt_state = opt.update(grads, opt_state, params)
    params = jax.tree.map(lambda p, u: p - learning_rate * u, params, updates)
    return params, opt_state


def soft_update(target, online, tau):
    """Polyak averaging `target <- (1 - tau) target + tau online`."""
    return jax.tree.map(lambda t, o: (1.0 - tau) * t + tau * o, target, online)


def adapt_to_kl(learning_rate, kl, desired_kl: float, low: float = 1e-5, high: float = 1e-2):
    """RSL-RL's adaptive step size (`rsl_rl/algorithms/ppo.py`, `schedule="adaptive"`):
    `lr / 1.5` when the measured KL exceeds `2 * desired_kl`, `lr * 1.5` when it is below
    `desired_kl / 2`, else unchanged; clipped to `[low, high]`. Scalars (float32)."""
    lr = jnp.where(kl > 2.0 * desired_kl, learning_rate / 1.5,
                   jnp.where(kl < 0.5 * desired_kl, learning_rate * 1.5, learning_rate))
    return jnp.clip(lr, low, high)


def rescale_rate(current, old_rate, new_rate):
    """The step size in use after the configured rate changes from `old_rate` to `new_rate`
    (population-based training): `new_rate` if `current` was the rate itself (or the old rate
    is not positive), else `current` scaled by `new_rate / old_rate` (an adapted or annealed
    step size keeps its ratio to the rate)."""
    scaled = current * (new_rate / jnp.where(old_rate > 0, old_rate, 1.0))
    return jnp.where((current == old_rate) | (old_rate <= 0), new_rate, scaled)


def replace_hp(state, hp: dict):
    """`state` (a struct with fields `hp`, a dict with `"learning_rate"`, and `learning_rate`,
    the step size in use) with `hp` merged into its hyperparameters and the step size moved
    by `rescale_rate` (an agent's `with_hp`)."""
    new = {**state.hp, **hp}
    lr = rescale_rate(state.learning_rate, state.hp["learning_rate"], new["learning_rate"])
    return state.replace(hp=new, learning_rate=lr)


def cosine_decay(frac, final_fraction: float):
    """The factor of a cosine step-size schedule (Loshchilov & Hutter 2017, SGDR, eq. 5 with
    one cycle): 1 at `frac = 0`, `final_fraction` at `frac = 1`,
    `final + (1 - final) * (1 + cos(pi * frac)) / 2` between. `frac` is the run's completed
    fraction (clip it to [0, 1] first)."""
    return final_fraction + (1.0 - final_fraction) * 0.5 * (1.0 + jnp.cos(jnp.pi * frac))
