"""Flow-matching building blocks shared by the flow policies (FPO, PolicyFlow, flow SAC).

**Time convention (all jaxrl flow code): t = 0 is noise, t = 1 is the action.**

    x_t = (1 - t) eps + t a,        target velocity  a - eps,        sample: t from 0 to 1.

This is the rectified-flow direction of Lipman et al. 2023 (arXiv 2210.02747) and Liu et al.
2023 (arXiv 2209.03003), used by PolicyFlow (arXiv 2602.01156) and SAC Flow (arXiv
2509.25756). FPO's code (`akanazawa/fpo` `playground/src/flow_policy/fpo.py`) runs the other
way (`tau = 1` noise, `x_tau = tau eps + (1 - tau) a`, `u = eps - a`, Euler steps of
`-1/K`); `from_fpo_time` / `to_fpo_time` convert (`t = 1 - tau`, `v = -u`), so FPO's numbers
can be checked against ours. The action a flow produces is the pre-squash `x`; envs receive
`tanh(x)` where the agent says so.

Shapes: `A` = action size, leading batch axes `...`; float32 throughout.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl.learning.networks import ACTIVATIONS

CONVENTIONS = ("jaxrl", "fpo")
"""Time conventions known to `to_jaxrl_time`: ours (t = 0 noise) and FPO's (tau = 1 noise)."""
SAMPLERS = ("euler", "midpoint")
CFM_LOSSES = ("eps_mse", "u_mse")


def _check_name(kind: str, value: str, choices: Sequence[str]) -> None:
    """Raises ValueError unless `value` is one of `choices` (naming the closest)."""
    if value not in choices:
        close = difflib.get_close_matches(str(value), list(choices), n=1, cutoff=0.5)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"{kind} must be one of {', '.join(choices)}; got {value!r}.{hint}")


def check_flow_settings(num_steps: int, sampler: str = "euler", convention: str = "jaxrl",
                        num_mc: int | None = None) -> None:
    """Raises ValueError (before compiling) for non-positive integration steps or `num_mc`,
    or an unknown sampler or time-convention name (with the closest known name)."""
    if int(num_steps) != num_steps or num_steps <= 0:
        raise ValueError(f"flow integration steps must be a positive integer, got {num_steps}.")
    if num_mc is not None and (int(num_mc) != num_mc or num_mc <= 0):
        raise ValueError(f"num_mc ((t, eps) pairs per action) must be a positive integer, "
                         f"got {num_mc}.")
    _check_name("flow sampler", sampler, SAMPLERS)
    _check_name("time convention", convention, CONVENTIONS)


def to_jaxrl_time(t, v, convention: str):
    """`(t, v)` of `convention` -> ours: FPO's `(tau, u)` becomes `(1 - tau, -u)`."""
    _check_name("time convention", convention, CONVENTIONS)
    return (1.0 - t, -v) if convention == "fpo" else (t, v)


def from_fpo_time(tau, u):
    """FPO's `(tau, u)` (tau = 1 noise) -> ours `(t, v) = (1 - tau, -u)`."""
    return to_jaxrl_time(tau, u, "fpo")


def to_fpo_time(t, v):
    """Ours `(t, v)` -> FPO's `(tau, u) = (1 - t, -v)` (the map is its own inverse)."""
    return 1.0 - t, -v


def interpolate(eps, action, t):
    """`x_t = (1 - t) eps + t a`; `t` broadcasts against `[..., A]` (give it a trailing 1)."""
    return (1.0 - t) * eps + t * action


def cfm_loss(v, x_t, t, eps, action, kind: str = "eps_mse"):
    """Per-sample conditional flow-matching loss `[...]` (mean over the action axis).

    `eps_mse` (FPO's default, `u_but_supervise_as_eps` in `akanazawa/fpo` `fpo.py`): the noise
    prediction `eps_hat = x_t - t v` against `eps`, which equals `t^2 * mean_d (v - (a - eps))^2`
    on the straight path: a t-weighted velocity MSE. `u_mse`: the plain velocity MSE
    `mean_d (v - (a - eps))^2`. `t` is `[..., 1]`.
    """
    _check_name("CFM loss", kind, CFM_LOSSES)
    if kind == "eps_mse":
        return jnp.mean(jnp.square(eps - (x_t - t * v)), axis=-1)
    return jnp.mean(jnp.square(v - (action - eps)), axis=-1)


def fourier_time_features(t, num_freqs: int):
    """`[cos(2^k t), sin(2^k t)]` for k = 0..num_freqs-1: `[...] -> [..., 2 num_freqs]`
    (FPO's time embedding, `akanazawa/fpo` `networks.py`, 4 frequencies = 8 features)."""
    freqs = 2.0 ** jnp.arange(num_freqs, dtype=jnp.float32)
    angles = jnp.asarray(t, jnp.float32)[..., None] * freqs
    return jnp.concatenate([jnp.cos(angles), jnp.sin(angles)], axis=-1)


class VelocityMLP(nn.Module):
    """Velocity field `v(obs, x_t, t)`: an MLP on `concat(obs, x_t, fourier(t))`.

    `[..., O], [..., A], [...] -> [..., A]`, output times `output_scale` (FPO: 4 x 32 SiLU,
    lecun-uniform kernels, zero biases, 4 frequencies, scale 0.25; `akanazawa/fpo`
    `networks.py`).
    """

    hidden: Sequence[int]
    action_size: int
    activation: str = "silu"
    num_freqs: int = 4
    output_scale: float = 0.25

    @nn.compact
    def __call__(self, obs, x_t, t):
        h = jnp.concatenate([obs, x_t, fourier_time_features(t, self.num_freqs)], axis=-1)
        act = ACTIVATIONS[self.activation]
        init = nn.initializers.lecun_uniform()
        for width in self.hidden:
            h = act(nn.Dense(width, kernel_init=init, bias_init=nn.initializers.zeros)(h))
        out = nn.Dense(self.action_size, kernel_init=init, bias_init=nn.initializers.zeros)(h)
        return self.output_scale * out


def time_grid(num_steps: int):
    """The `K` start times `k / K` of a uniform integration grid, float32 `[K]`."""
    return jnp.arange(num_steps, dtype=jnp.float32) / num_steps


def integrate(velocity: Callable, x0, num_steps: int, sampler: str = "euler",
              step_noise=None, noise_scale=0.0):
    """Integrates `dx/dt = velocity(x, t)` from t = 0 (`x0`, noise) to t = 1 as a `lax.scan`.

    Args:
        velocity: `(x [..., A], t float32 scalar) -> [..., A]`.
        x0: `[..., A]` initial noise (zeros for the deterministic mode).
        num_steps: K, steps of size `1 / K` (static).
        sampler: `euler` (`x + dt v(x, t)`) or `midpoint` (explicit RK2:
            `x + dt v(x + dt/2 v(x, t), t + dt/2)`).
        step_noise: optional `[K, ..., A]` standard normals added after each step times
            `noise_scale` (a stochastic sampler; None or `noise_scale = 0` is the plain ODE).
        noise_scale: per-step noise std (float or broadcastable array).

    Returns:
        `x_1`, `[..., A]`.

    Raises:
        ValueError: non-positive `num_steps` or an unknown sampler.
    """
    check_flow_settings(num_steps, sampler)
    dt = 1.0 / num_steps

    def step(x, inputs):
        t, noise = inputs
        if sampler == "midpoint":
            x_mid = x + 0.5 * dt * velocity(x, t)
            x = x + dt * velocity(x_mid, t + 0.5 * dt)
        else:
            x = x + dt * velocity(x, t)
        if noise is not None:
            x = x + noise_scale * noise
        return x, None

    x1, _ = jax.lax.scan(step, x0, (time_grid(num_steps), step_noise))
    return x1


def sample_training_times(key, shape, num_steps: int | None = None):
    """Flow times for the CFM loss, float32 `shape`: uniform on [0, 1), or, with `num_steps`,
    drawn from the sampler's grid `k / K` (FPO's `discretize_t_for_training`)."""
    if num_steps is None:
        return jax.random.uniform(key, shape)
    return jax.random.randint(key, shape, 0, num_steps).astype(jnp.float32) / num_steps


def rectified_flow_score(v, x, t):
    """`grad log p_t(x) = (t v(x, t) - x) / (1 - t)` for the path `x_t = (1 - t) z + t a`,
    `z ~ N(0, I)` (from `E[a | x] = x + (1 - t) v` and `p_t(x | a) = N(t a, (1 - t)^2)`)."""
    return (t * v - x) / (1.0 - t)


def brownian_residual(v, v_old, x_t, t):
    """`eta = (1 - t) v - (x_t - t v_old)` `[..., A]` (`t` `[..., 1]`): zero when `v` is the
    negative score `(x_t - t v_old) / (1 - t)` of the behaviour flow."""
    return (1.0 - t) * v - (x_t - t * jax.lax.stop_gradient(v_old))


def sample_midpoint_times(key, shape, num_steps: int, kind: str = "grid"):
    """PolicyFlow's training times `shape` float32: `grid` -> uniform over `j / (2K)`,
    j = 1..2K-1 (grid points and midpoints without t = 0 and t = 1); `uniform` -> U(0, 1)."""
    if kind == "uniform":
        return jax.random.uniform(key, shape)
    j = jax.random.randint(key, shape, 1, 2 * num_steps)
    return j.astype(jnp.float32) / (2.0 * num_steps)
