"""A `Dense` layer whose weight gradient stays on XLA CPU's fast matmul path under `vmap`.

Why: the weight gradient of `y = x @ W` is `dW = x^T g`. JAX's transpose rule emits it as a
`dot_general` contracting the batch rows of both operands. Without a seed axis XLA CPU inserts a
transposing copy and runs it as a YNNPACK fusion; with the seed axis of `jax.vmap` (one MLP per
seed) the same dot gets a batch dimension, XLA lays it out with a column-major left operand, and
YNNPACK rejects it (`IsDotSupportedByYnn`: "lhs_canonical" / "column_major" operands), so it
falls back to a generic batched dot. Measured on the PPO CPU preset (`benchmarks/vmap_probe.py
--part update`, 2 cores): the weight-gradient dots of 4 vmapped seeds cost 2.2-4x the time of
4 single-seed runs and were most of the gap between them.

Here a `custom_vjp` computes the weight gradient as `x^T [in, rows] @ g [rows, out]` from a
materialized `x^T` (behind an `optimization_barrier`, so that XLA cannot fold the transpose
back into the dot): a canonical row-major matmul with or without batch dimensions, which XLA CPU
runs through YNNPACK in both cases. (A `custom_jvp` version leaves the operand order of the
transposed dot to JAX's transpose rule, which came out column-major again for one seed.)
Forward values and the input gradient are JAX's own; the weight gradient is the same sum, in
YNNPACK's summation order. Limitation of `custom_vjp`: no forward-mode differentiation
(`jax.jvp`, `jacfwd`) through these layers; nothing in jaxrl uses it.
"""

from __future__ import annotations

import functools

import flax.linen as nn
import jax
from jax import lax


@jax.custom_vjp
def matmul(x: jax.Array, w: jax.Array) -> jax.Array:
    """`x [..., in] @ w [in, out]` (flax `Dense`'s contraction)."""
    return lax.dot_general(x, w, (((x.ndim - 1,), (0,)), ((), ())))


def _matmul_fwd(x, w):
    return matmul(x, w), (x, w)


def _matmul_bwd(res, g):
    """Input gradient as JAX's own rule; weight gradient `x^T @ g` with `x^T` materialized."""
    x, w = res
    gx = lax.dot_general(g, w, (((g.ndim - 1,), (1,)), ((), ())))
    rows = x.reshape((-1, x.shape[-1]))
    xt = lax.optimization_barrier(rows.T)  # [in, rows]: kept as a row-major copy
    gw = lax.dot_general(xt, g.reshape((-1, g.shape[-1])), (((1,), (0,)), ((), ())))
    return gx.astype(x.dtype), gw.astype(w.dtype)


matmul.defvjp(_matmul_fwd, _matmul_bwd)


def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    """Drop-in `dot_general` for `nn.Dense`: `matmul` for its plain `[..., in] @ [in, out]`
    contraction, `lax.dot_general` for anything else."""
    plain = (((lhs.ndim - 1,), (0,)), ((), ()))
    if (rhs.ndim == 2 and precision is None and preferred_element_type is None
            and _same_dims(dimension_numbers, plain)):
        return matmul(lhs, rhs)
    return lax.dot_general(lhs, rhs, dimension_numbers, precision=precision,
                           preferred_element_type=preferred_element_type)


def _same_dims(a, b) -> bool:
    """Equal dimension numbers `((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))`."""
    def norm(d):
        return tuple(tuple(tuple(int(i) for i in dims) for dims in pair) for pair in d)
    return norm(a) == norm(b)


Dense = functools.partial(nn.Dense, dot_general=dot_general)
"""`nn.Dense` with `dot_general` above (same parameter names: flax names it `Dense_i`)."""

