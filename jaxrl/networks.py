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
               "elu": nn.elu, "gelu": nn.gelu}


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
