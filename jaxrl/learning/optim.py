"""Optimizer factory and target-network updates.

The learning rate is a traced hyperparameter (it lives in `hp`), so the optimizer is built from
optax's scale-free transforms and the step multiplies by `-learning_rate` at apply time; a
sweep over learning rates stays one compiled program.
"""

from __future__ import annotations

import jax
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
