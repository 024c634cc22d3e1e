"""SAC Flow's velocity cells and the noisy Euler rollout with its path log-likelihood.

Sources: Zhang et al., "SAC Flow: Sample-Efficient Reinforcement Learning of Flow-Based Policies
via Velocity-Reparameterized Sequential Modeling" (arXiv 2509.25756), and the released code
`Elessar123/SAC-FLOW` `from_scratch_code/SAC_flow_gru_jax.py` (Flow-G) and
`from_scratch_code/SAC_flow_transformer_jax.py` (Flow-T).

K Euler steps `A_{k+1} = A_k + dt v(t_k, A_k, s)` (dt = 1/K, t_k = k/K, jaxrl's time convention
of `jaxrl.learning.flow`: t = 0 noise, t = 1 action) form a residual recurrent network, so the
velocity is reparameterized as a sequence cell and Gaussian noise is injected at every step:

- Flow-G (`GatedVelocity`): `g = sigmoid(Gate([s, A], emb(t)))`, `h = Cand([s, A], emb(t))`,
  `v = g (h - A)`, so a step is `A <- A + dt g (h - A) + sigma(s) xi` (the noise is not scaled
  by sqrt(dt), as released). The gate's last layer starts with a zero kernel and bias 5
  (g = sigmoid(5) = 0.993307); `log sigma(s)` comes from a separate MLP on `s`, tanh-rescaled to
  `[log_std_min, log_std_max]` and shared by all steps.
- Flow-T (`DecoderVelocity`): a Transformer decoder over one action token (self-attention,
  cross-attention to an observation embedding, GELU FFN of 4 d_model, LayerNorm after each
  residual sublayer) with velocity mean and log-std heads: `v = mu + sigma xi`, `A <- A + dt v`.
  The release normalizes with BatchRenorm; here LayerNorm (the release's `use_batch_norm=False`
  branch), since the observations are already normalized by the SAC core.

Both are `A_{k+1} = A_k + d_k + s_k xi_k` with drift `d_k` and step std `s_k` (Flow-G:
`d = dt v`, `s = sigma`; Flow-T: `d = dt mu`, `s = dt sigma`). With `A_0 ~ N(0, I)` the path
log-likelihood, SAC's entropy surrogate (not the marginal action density), is

    log pi = log N(A_0; 0, I) + sum_k log N(A_{k+1}; A_k + d_k, s_k^2)
             - sum_d log(1 - tanh(A_K,d)^2 + 1e-6),         action = tanh(A_K)

(the released tanh term with action scale 1: jaxrl actions are in [-1, 1]). The released Flow-T
log-prob adds only `log N(xi; 0, 1)` per step, without `-sum log(dt sigma)`, so it is not a
density; `jacobian=False` reproduces it. The rollout is reparameterized: gradients reach the
parameters through all K steps. The deterministic mode (evaluation, export) starts at
`A_0 = 0` with `xi = 0` and is unrolled as a Python loop (K is static), so its jaxpr has no
`scan`. Shapes: observations `[..., O]`, actions `[..., A]`, path noise `[K + 1, ..., A]`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxrl.learning.flow import time_grid
from jaxrl.learning.networks import ACTIVATIONS

CELLS = ("gate", "decoder")
"""`gate`: Flow-G (`GatedVelocity`); `decoder`: Flow-T (`DecoderVelocity`)."""
FLOW_T_LOG_PROBS = ("jacobian", "as_released")
"""Flow-T step log-prob: the density (with `-sum log(dt sigma)`) or the released form."""
GATE_BIAS = 5.0
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


# --- the log-likelihood pieces ---------------------------------------------------------------
def standard_normal_log_prob(x):
    """`log N(x; 0, I)` summed over the last axis."""
    return jnp.sum(-0.5 * jnp.square(x) - _HALF_LOG_2PI, axis=-1)


def step_log_prob(xi, log_scale, jacobian: bool = True):
    """`log N(A_{k+1}; A_k + d, s^2)` of the step `A_{k+1} = A_k + d + s xi`, summed over the
    last axis: `sum_d (-xi^2 / 2 - log s - log(2 pi) / 2)`; `jacobian=False` drops `-log s`
    (Flow-T as released: `log N(xi; 0, 1)`)."""
    out = -0.5 * jnp.square(xi) - _HALF_LOG_2PI
    if jacobian:
        out = out - log_scale
    return jnp.sum(out, axis=-1)


def tanh_correction(a):
    """`sum_d log(1 - tanh(a_d)^2 + 1e-6)`, the released squash term (action scale 1)."""
    return jnp.sum(jnp.log(1.0 - jnp.square(jnp.tanh(a)) + 1e-6), axis=-1)


def bounded_log_std(raw, low: float, high: float):
    """`low + (high - low) (tanh(raw) + 1) / 2`: log-std squashed into `[low, high]`."""
    return low + 0.5 * (high - low) * (jnp.tanh(raw) + 1.0)


# --- the rollout -----------------------------------------------------------------------------
StepFn = Callable[[jax.Array, jax.Array], tuple[jax.Array, jax.Array]]
"""`(A_k [..., A], t_k scalar) -> (drift d_k [..., A], log step std log s_k [..., A])`."""


def noisy_euler(step_fn: StepFn, noise, num_steps: int, jacobian: bool = True,
                noise_scale=None):
    """Stochastic rollout `A_{k+1} = A_k + d_k + s_k xi_k` from `A_0 = noise[0]` (`lax.scan`).

    Args:
        step_fn: the cell's step (see `StepFn`).
        noise: `[K + 1, ..., A]` standard normals: `A_0`, then `xi_0 .. xi_{K-1}`.
        num_steps: K (static).
        jacobian: include `-log s_k` in the step terms (False: Flow-T as released).
        noise_scale: optional multiplier of every noise (exploration scales); the log-prob
            then still scores the unscaled `xi`, so use it only for behaviour actions.

    Returns:
        `(action tanh(A_K) [..., A], path log pi [...], A_K [..., A])`.
    """
    scale = 1.0 if noise_scale is None else noise_scale
    a0 = scale * noise[0]

    def body(carry, inputs):
        a, logp = carry
        t, xi = inputs
        drift, log_s = step_fn(a, t)
        a = a + drift + jnp.exp(log_s) * (scale * xi)
        return (a, logp + step_log_prob(xi, log_s, jacobian)), None

    init = (a0, standard_normal_log_prob(noise[0]))
    (a_k, logp), _ = jax.lax.scan(body, init, (time_grid(num_steps), noise[1:]))
    return jnp.tanh(a_k), logp - tanh_correction(a_k), a_k


def deterministic_euler(step_fn: StepFn, shape, num_steps: int):
    """Noise-free rollout `A_{k+1} = A_k + d_k` from `A_0 = 0`, unrolled in Python (exportable
    without `scan`); returns `tanh(A_K)`, `shape` = `[..., A]`."""
    a = jnp.zeros(shape, jnp.float32)
    for k in range(num_steps):
        drift, _ = step_fn(a, jnp.float32(k / num_steps))
        a = a + drift
    return jnp.tanh(a)


# --- Flow-G ----------------------------------------------------------------------------------
def sinusoidal_embedding(t, dim: int):
    """`[sin(t w_i), cos(t w_i)]`, `w_i = 10000^(-i / (dim/2 - 1))`: `[...] -> [..., dim]`
    (the released `SinusoidalPosEmb`, t in [0, 1) unscaled)."""
    half = dim // 2
    freqs = np.exp(-math.log(10000.0) / (half - 1) * np.arange(half)).astype(np.float32)
    angles = jnp.asarray(t, jnp.float32)[..., None] * freqs
    return jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], axis=-1)


def _dense_stack(hidden: Sequence[int], out: int, prefix: str, **last_init):
    """Dense layers of widths `hidden + (out,)` (flax default inits; `last_init` for the last)."""
    layers = [nn.Dense(w, name=f"{prefix}_{i}") for i, w in enumerate(hidden)]
    return layers + [nn.Dense(out, name=f"{prefix}_out", **last_init)]


def _apply_stack(layers, x, act):
    for layer in layers[:-1]:
        x = act(layer(x))
    return layers[-1](x)


class GatedVelocity(nn.Module):
    """Flow-G cell: `v = sigmoid(Gate(x)) (Cand(x) - A)` with `x = [s, A, TimeMLP(emb(t))]`,
    and `log sigma(s)` from its own MLP. Released sizes (the defaults): sinusoidal embedding 32
    -> Dense 64 swish -> Dense 32; gate and candidate one hidden layer of 512 (swish) and a
    linear layer to |A| (the gate's with zero kernel and bias 5); log-std 512-512 ReLU."""

    action_size: int
    hidden: Sequence[int] = (512,)
    log_std_hidden: Sequence[int] = (512, 512)
    time_dim: int = 32
    activation: str = "silu"
    log_std_min: float = -5.0
    log_std_max: float = 2.0

    def setup(self):
        a = self.action_size
        self.time_layers = _dense_stack((2 * self.time_dim,), self.time_dim, "time")
        self.gate_layers = _dense_stack(self.hidden, a, "gate",
                                        kernel_init=nn.initializers.zeros,
                                        bias_init=nn.initializers.constant(GATE_BIAS))
        self.cand_layers = _dense_stack(self.hidden, a, "cand")
        self.log_std_layers = _dense_stack(self.log_std_hidden, a, "log_std")

    def _features(self, obs, a, t):
        act = ACTIVATIONS[self.activation]
        emb = _apply_stack(self.time_layers, sinusoidal_embedding(t, self.time_dim), act)
        emb = jnp.broadcast_to(emb, a.shape[:-1] + emb.shape[-1:])
        return jnp.concatenate([obs, a, emb], axis=-1), act

    def gate(self, obs, a, t):
        """`g = sigmoid(Gate([s, A, emb(t)]))`, `[..., A]`."""
        x, act = self._features(obs, a, t)
        return nn.sigmoid(_apply_stack(self.gate_layers, x, act))

    def velocity(self, obs, a, t):
        """`v = g (h - A)`, `[..., A]`."""
        x, act = self._features(obs, a, t)
        g = nn.sigmoid(_apply_stack(self.gate_layers, x, act))
        return g * (_apply_stack(self.cand_layers, x, act) - a)

    def context(self, obs):
        """What every step reads: `(obs, log sigma(obs))`."""
        raw = _apply_stack(self.log_std_layers, obs, nn.relu)
        return obs, bounded_log_std(raw, self.log_std_min, self.log_std_max)

    def step(self, ctx, a, t, dt: float):
        """Drift `dt v` and log step std `log sigma(s)` (noise not scaled by dt)."""
        obs, log_std = ctx
        return dt * self.velocity(obs, a, t), log_std

    def __call__(self, obs, train: bool = False):
        """One step from `A = 0, t = 0` (initializes every layer); `train` is unused."""
        del train
        ctx = self.context(obs)
        return self.step(ctx, jnp.zeros(obs.shape[:-1] + (self.action_size,)), 0.0, 1.0)


# --- Flow-T ----------------------------------------------------------------------------------
class _Attention(nn.Module):
    """Multi-head attention (q, k, v and output projections) of the released
    `MultiHeadAttention`: queries `[..., Lq, D]`, keys/values `[..., Lk, D]`."""

    d_model: int
    num_heads: int

    @nn.compact
    def __call__(self, query, memory):
        h, d = self.num_heads, self.d_model // self.num_heads
        heads = lambda x: x.reshape(x.shape[:-1] + (h, d))  # noqa: E731
        q = heads(nn.Dense(self.d_model, name="q_proj")(query))
        k = heads(nn.Dense(self.d_model, name="k_proj")(memory))
        v = heads(nn.Dense(self.d_model, name="v_proj")(memory))
        scores = jnp.einsum("...qhd,...khd->...hqk", q, k) / math.sqrt(d)
        out = jnp.einsum("...hqk,...khd->...qhd", jax.nn.softmax(scores, axis=-1), v)
        return nn.Dense(self.d_model, name="out_proj")(out.reshape(query.shape[:-1] +
                                                                   (self.d_model,)))


class _DecoderLayer(nn.Module):
    """Post-norm decoder layer: self-attention, cross-attention to `memory`, GELU FFN (4x),
    each `x <- LayerNorm(x + sublayer(x))`."""

    d_model: int
    num_heads: int

    @nn.compact
    def __call__(self, x, memory):
        x = nn.LayerNorm(name="norm_self")(x + _Attention(self.d_model, self.num_heads,
                                                          name="self_attn")(x, x))
        x = nn.LayerNorm(name="norm_cross")(x + _Attention(self.d_model, self.num_heads,
                                                           name="cross_attn")(x, memory))
        ffn = nn.Dense(self.d_model, name="ffn_out")(
            nn.gelu(nn.Dense(4 * self.d_model, name="ffn_in")(x)))
        return nn.LayerNorm(name="norm_ffn")(x + ffn)


class DecoderVelocity(nn.Module):
    """Flow-T cell: one action token `Dense(A) + TimeMLP(t)` through `num_layers` decoder
    layers attending to the observation embedding `Dense(D/2) silu Dense(D)`; heads give the
    velocity mean `mu` and log-std (tanh-rescaled). Released: d_model 96 (the class default is
    64), 4 heads, 2 layers; time MLP `1 -> D/4 -> D/2 -> D` (silu) on the raw t."""

    action_size: int
    d_model: int = 96
    num_heads: int = 4
    num_layers: int = 2
    log_std_min: float = -5.0
    log_std_max: float = 2.0

    def setup(self):
        d = self.d_model
        self.obs_layers = _dense_stack((d // 2,), d, "obs")
        self.time_layers = _dense_stack((d // 4, d // 2), d, "time")
        self.action_proj = nn.Dense(d, name="action_proj")
        self.layers = [_DecoderLayer(d, self.num_heads, name=f"layer_{i}")
                       for i in range(self.num_layers)]
        self.mean_head = nn.Dense(self.action_size, name="velocity_mean_head")
        self.log_std_head = nn.Dense(self.action_size, name="velocity_log_std_head")

    def context(self, obs):
        """The memory: observation embedding `[..., 1, D]`."""
        return _apply_stack(self.obs_layers, obs, nn.silu)[..., None, :]

    def velocity(self, memory, a, t):
        """`(mu, log sigma)` of the velocity at `(A, t)`, `[..., A]` each."""
        t = jnp.full(a.shape[:-1] + (1, 1), t, jnp.float32)
        x = self.action_proj(a[..., None, :]) + _apply_stack(self.time_layers, t, nn.silu)
        for layer in self.layers:
            x = layer(x, memory)
        x = x[..., 0, :]
        return self.mean_head(x), bounded_log_std(self.log_std_head(x), self.log_std_min,
                                                  self.log_std_max)

    def step(self, ctx, a, t, dt: float):
        """Drift `dt mu` and log step std `log(dt sigma)` (`A <- A + dt (mu + sigma xi)`)."""
        mu, log_std = self.velocity(ctx, a, t)
        return dt * mu, math.log(dt) + log_std

    def __call__(self, obs, train: bool = False):
        """One step from `A = 0, t = 0` (initializes every layer); `train` is unused."""
        del train
        ctx = self.context(obs)
        return self.step(ctx, jnp.zeros(obs.shape[:-1] + (self.action_size,)), 0.0, 1.0)


# --- the policy object -----------------------------------------------------------------------
@struct.dataclass
class FlowPolicy:
    """A flow policy at prepared observations `obs [..., O]`: what an actor head returns to the
    SAC core (`sample_and_log_prob`, `from_noise`, `mode`, `metrics`). `cell` is a
    `GatedVelocity` or `DecoderVelocity`, `variables` its flax variables (differentiable)."""

    variables: Any
    obs: jax.Array
    cell: nn.Module = struct.field(pytree_node=False)
    num_steps: int = struct.field(pytree_node=False)
    jacobian: bool = struct.field(pytree_node=False, default=True)

    def _step_fn(self) -> StepFn:
        cell, variables, dt = self.cell, self.variables, 1.0 / self.num_steps
        ctx = cell.apply(variables, self.obs, method=cell.context)
        return lambda a, t: cell.apply(variables, ctx, a, t, dt, method=cell.step)

    @property
    def action_shape(self) -> tuple[int, ...]:
        return self.obs.shape[:-1] + (self.cell.action_size,)

    def path_noise(self, key):
        """Standard normals `[K + 1, ..., A]` (`A_0`, then one `xi` per step)."""
        return jax.random.normal(key, (self.num_steps + 1,) + self.action_shape)

    def sample_from_noise(self, noise, noise_scale=None):
        """`(action [..., A], path log pi [...])` for the given path noise."""
        action, logp, _ = noisy_euler(self._step_fn(), noise, self.num_steps,
                                      bool(self.jacobian), noise_scale)
        return action, logp

    def sample_and_log_prob(self, key):
        """Reparameterized `(action [..., A] in (-1, 1), path log pi [...])`."""
        return self.sample_from_noise(self.path_noise(key))

    def from_noise(self, noise, noise_scale=None):
        """Action from path noise `[K + 1, ..., A]`, every noise times `noise_scale`."""
        return self.sample_from_noise(noise, noise_scale)[0]

    def mode(self):
        """Deterministic action: `A_0 = 0`, `xi = 0`, the same K steps, `tanh(A_K)`."""
        return deterministic_euler(self._step_fn(), self.action_shape, self.num_steps)

    def metrics(self) -> dict[str, jax.Array]:
        return {}


def make_cell(kind: str, action_size: int, **kwargs) -> nn.Module:
    """`gate` -> `GatedVelocity`, `decoder` -> `DecoderVelocity` (kwargs: their fields)."""
    return {"gate": GatedVelocity, "decoder": DecoderVelocity}[kind](action_size=action_size,
                                                                       **kwargs)
