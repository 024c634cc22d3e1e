"""Networks on flax linen, used through plain `(init, apply)`; params are pytrees.

`MLP` follows brax `training/networks.py::MLP`: lecun_uniform kernels, zero biases, SiLU
(swish) hidden activations, linear output layer.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

ACTIVATIONS = {"silu": nn.silu, "swish": nn.silu, "relu": nn.relu, "tanh": nn.tanh,
               "elu": nn.elu, "gelu": nn.gelu, "mish": jax.nn.mish}


class MLP(nn.Module):
    """Multi-layer perceptron `[..., in] -> [..., layer_sizes[-1]]`.

    Attributes:
        layer_sizes: widths of every layer, the last one being the output size.
        activation: name in `ACTIVATIONS`, applied after every layer but the last.
        kernel_init_scale: scale of the variance-scaling init of the output layer (1.0 = lecun).
    """

    layer_sizes: Sequence[int]
    activation: str = "silu"
    kernel_init_scale: float = 1.0

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = ACTIVATIONS[self.activation]
        last = len(self.layer_sizes) - 1
        for i, size in enumerate(self.layer_sizes):
            scale = self.kernel_init_scale if i == last else 1.0
            init = nn.initializers.variance_scaling(scale, "fan_in", "uniform")
            x = nn.Dense(size, kernel_init=init, bias_init=nn.initializers.zeros)(x)
            if i != last:
                x = act(x)
        return x


def flatten_obs(obs, keys: Sequence[str] | None = None) -> jax.Array:
    """Array observation as is; dict observation -> the named keys concatenated on the last
    axis (all keys, sorted, when `keys` is None)."""
    if not isinstance(obs, dict):
        return obs
    names = list(keys) if keys else sorted(obs)
    return jnp.concatenate([obs[k].reshape(obs[k].shape[:-1] + (-1,)) for k in names], axis=-1)


# --- FlashSAC-style normalized networks ------------------------------------------------------
# Sources: Kim et al., "FlashSAC" (arXiv 2604.04539), `leeyngdo/FlashSAC`
# `flash_rl/agents/flashSAC/{layer,network}.py`; SimbaV2 (arXiv 2502.15280) for the weight
# projection. Kernels are flax `(in, out)`, so a unit's incoming weights are normalized over the
# input axis (-2); ensembles add a leading axis, which the projection keeps.

BN_MOMENTUM = 0.99  # flax convention; PyTorch momentum 0.01
BN_EPS = 1e-5


class UnitDense(nn.Module):
    """Linear layer whose output units have unit-L2 incoming weights (re-projected by
    `project_weights` after every optimizer step). Unit-norm Gaussian init; bias optional."""

    features: int
    use_bias: bool = False

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        kernel = self.param("kernel", _unit_normal, (x.shape[-1], self.features))
        y = x @ kernel
        if self.use_bias:
            y = y + self.param("bias", nn.initializers.zeros, (self.features,))
        return y


def _unit_normal(key, shape, dtype=jnp.float32):
    """Gaussian kernel with unit-norm columns. FlashSAC uses an orthogonal init; its QR
    decomposition (LAPACK) deadlocked inside `jit(vmap(init))` on a 2-core CPU here, and random
    Gaussian columns are near-orthogonal in the fan-in >= fan-out layers anyway."""
    w = jax.random.normal(key, shape, dtype)
    return w / jnp.linalg.norm(w, axis=-2, keepdims=True)


class NormalizedEncoder(nn.Module):
    """FlashSAC encoder `[..., in] -> [..., hidden]`.

    `BN(x) -> UnitDense(hidden)`, then `num_blocks` inverted-residual blocks
    `x + ReLU(BN(W2 ReLU(BN(W1 x))))` with `W1: h -> expansion * h`, `W2: -> h`, then RMSNorm.
    The input BatchNorm replaces the observation normalizer. Call with `train=True` and
    `mutable=["batch_stats"]` to use and update batch statistics (BN momentum 0.99, eps 1e-5).
    """

    hidden: int
    num_blocks: int = 2
    expansion: int = 4
    use_bias: bool = False

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False) -> jax.Array:
        bn = lambda: nn.BatchNorm(use_running_average=not train, momentum=BN_MOMENTUM,  # noqa: E731
                                  epsilon=BN_EPS)
        x = UnitDense(self.hidden, self.use_bias)(bn()(x))
        for _ in range(self.num_blocks):
            y = nn.relu(bn()(UnitDense(self.hidden * self.expansion, self.use_bias)(x)))
            x = x + nn.relu(bn()(UnitDense(self.hidden, self.use_bias)(y)))
        return nn.RMSNorm()(x)


def project_weights(variables):
    """Re-projects normalized-network weights after an optimizer step (SimbaV2 / FlashSAC).

    - `UnitDense` kernels: each output unit's incoming weights to unit L2 norm (axis -2).
    - `BatchNorm` `(scale, bias)` jointly, and `RMSNorm` scales, to L2 norm `sqrt(d)`.
    Leaves of other modules are returned unchanged. Works on ensembles (leading axis kept).

    Args:
        variables: a flax params pytree (nested dicts keyed by module names).
    """
    if not isinstance(variables, dict):
        return variables
    out = {}
    for name, sub in variables.items():
        if name.startswith("UnitDense") and "kernel" in sub:
            k = sub["kernel"]
            out[name] = dict(sub, kernel=k / jnp.linalg.norm(k, axis=-2, keepdims=True))
        elif name.startswith("BatchNorm") and "scale" in sub:
            d = sub["scale"].shape[-1]
            both = jnp.concatenate([sub["scale"], sub["bias"]], axis=-1)
            f = jnp.sqrt(d) / jnp.linalg.norm(both, axis=-1, keepdims=True)
            out[name] = dict(sub, scale=sub["scale"] * f, bias=sub["bias"] * f)
        elif name.startswith("RMSNorm") and "scale" in sub:
            s = sub["scale"]
            out[name] = dict(sub, scale=s * jnp.sqrt(s.shape[-1]) /
                             jnp.linalg.norm(s, axis=-1, keepdims=True))
        else:
            out[name] = project_weights(sub)
    return out


class Torso(nn.Module):
    """Shared feature extractor of the off-policy agents: an MLP (every layer activated) or,
    with `normalized`, a `NormalizedEncoder` of width `hidden[0]`."""

    hidden: Sequence[int]
    activation: str = "relu"
    normalized: bool = False
    num_blocks: int = 2
    layer_norm: bool = False
    normalized_bias: bool = False
    init_scale: float = 1.0
    """Kernel init `variance_scaling(init_scale, fan_in, uniform)` (1.0: lecun uniform)."""

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False) -> jax.Array:
        if self.normalized:
            return NormalizedEncoder(self.hidden[0], self.num_blocks,
                                     use_bias=self.normalized_bias)(x, train)
        act = ACTIVATIONS[self.activation]
        init = nn.initializers.variance_scaling(self.init_scale, "fan_in", "uniform")
        for size in self.hidden:
            x = nn.Dense(size, kernel_init=init)(x)
            x = act(nn.LayerNorm()(x) if self.layer_norm else x)
        return x


class QHead(nn.Module):
    """Critic on `concat(obs, action)`: `Torso` then a head.

    `kind`: `scalar` -> `[..., 1]`; `categorical` -> `[..., num_atoms]` logits (C51);
    `gaussian` -> `[..., 2]` = (mean, softplus std + 1e-4) of the DSAC-T return distribution.
    """

    hidden: Sequence[int]
    kind: str = "scalar"
    num_atoms: int = 101
    activation: str = "relu"
    normalized: bool = False
    num_blocks: int = 2
    layer_norm: bool = False
    normalized_bias: bool = False

    @nn.compact
    def __call__(self, obs, action, train: bool = False):
        x = Torso(self.hidden, self.activation, self.normalized, self.num_blocks,
                  self.layer_norm, self.normalized_bias)(jnp.concatenate([obs, action], axis=-1),
                                                         train)
        if self.kind == "categorical":
            return (UnitDense(self.num_atoms, use_bias=True)(x) if self.normalized
                    else nn.Dense(self.num_atoms)(x))
        if self.kind == "gaussian":
            mean = nn.Dense(1)(x)
            std = jax.nn.softplus(nn.Dense(1)(x)) + 1e-4
            return jnp.concatenate([mean, std], axis=-1)
        return nn.Dense(1)(x)


def ensemble(module_cls: type[nn.Module], num: int) -> type[nn.Module]:
    """`num` independent copies of `module_cls` (params and batch stats stacked on axis 0;
    outputs `[num, ...]`), as one vmapped module: each head keeps its own BatchNorm
    statistics."""
    return nn.vmap(module_cls, variable_axes={"params": 0, "batch_stats": 0},
                   split_rngs={"params": True}, in_axes=None, out_axes=0, axis_size=num)


class GaussianActor(nn.Module):
    """`obs -> (mu, log_std)`, `[..., A]` each; log-std squashed into `[log_std_min,
    log_std_max]` by `lo + (hi - lo) (tanh(raw) + 1) / 2` (as brax SAC / JaxGCRL). With
    `normalized` the torso is FlashSAC's encoder and the heads start near zero."""

    hidden: tuple[int, ...]
    action_size: int
    activation: str = "relu"
    normalized: bool = False
    num_blocks: int = 2
    layer_norm: bool = False
    log_std_min: float = -5.0
    log_std_max: float = 2.0
    normalized_bias: bool = False
    init_scale: float = 1.0
    """Kernel init of the MLP torso and both heads, `variance_scaling(init_scale, fan_in,
    uniform)`: 1.0 is lecun uniform, JaxGCRL's actor uses 1/3 (`crl/networks.py`)."""

    @nn.compact
    def __call__(self, obs, train: bool = False):
        x = Torso(self.hidden, self.activation, self.normalized, self.num_blocks,
                  self.layer_norm, self.normalized_bias, self.init_scale)(obs, train)
        init = nn.initializers.variance_scaling(self.init_scale, "fan_in", "uniform")
        mu_init = nn.initializers.normal(1e-3) if self.normalized else init
        mu = nn.Dense(self.action_size, kernel_init=mu_init)(x)
        raw = nn.Dense(self.action_size, kernel_init=nn.initializers.zeros if self.normalized
                       else init)(x)
        lo, hi = self.log_std_min, self.log_std_max
        return mu, lo + 0.5 * (hi - lo) * (jnp.tanh(raw) + 1.0)


class Encoder(nn.Module):
    """MLP `[..., in] -> [..., repr_dim]` with optional LayerNorm and residual skips, the
    contrastive encoders of JaxGCRL (`jaxgcrl/agents/crl/networks.py`; kernels
    `variance_scaling(1/3, fan_in, uniform)`)."""

    hidden: tuple[int, ...]
    repr_dim: int
    activation: str = "silu"
    layer_norm: bool = False
    skip_connections: int = 0

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        init = nn.initializers.variance_scaling(1 / 3, "fan_in", "uniform")
        act = ACTIVATIONS[self.activation]
        skip = None
        for i, width in enumerate(self.hidden):
            x = nn.Dense(width, kernel_init=init)(x)
            x = act(nn.LayerNorm()(x) if self.layer_norm else x)
            if self.skip_connections and i % self.skip_connections == 0:
                if skip is not None and skip.shape == x.shape:
                    x = x + skip
                skip = x
        return nn.Dense(self.repr_dim, kernel_init=init)(x)
