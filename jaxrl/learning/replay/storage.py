"""Replay ring buffer storage: the buffer state, `init`, `add` and `num_transitions`.

Rows are vectorized env steps: one `add` of a `Transition[T, N]` writes T rows of N envs each.
Everything is a pytree of arrays (no static fields), so the buffer works under `jit`, `vmap`
over seeds, `lax.scan` and `lax.cond`; the capacity is read from the array shapes.

Each row records the `clock` value it was written at (`write_time`), which gives the row ages
that Sample Weight Decay sampling weighs by (`samplers.py`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl.engine.types import Transition

_KEYS = ("obs", "action", "reward", "terminated", "truncated", "next_obs")
_OBS_KEYS = ("obs", "next_obs")
_FLAG_KEYS = ("reward", "terminated", "truncated")


@struct.dataclass
class ReplayState:
    """Ring buffer of vectorized steps. C = capacity per env (rows), N = number of envs.

    Attributes:
        data: dict with keys `obs`, `action`, `reward`, `terminated`, `truncated`, `next_obs`;
            every leaf is `[C, N, ...]`. `obs` / `next_obs` may be pytrees (dict observations)
            and are stored in the `obs_dtype` given to `init`; `reward`, `terminated` and
            `truncated` are float32 `[C, N]`.
        write_time: int32 `[C]`, value of `clock` when the row was written (-1: never written).
        pos: int32 `[]`, next row to write.
        size: int32 `[]`, rows written so far, capped at C. Written rows are `[0, size)` until the
            buffer wraps, then all C.
        clock: int32 `[]`, rows (vectorized env steps) ever written.
    """

    data: dict
    write_time: jax.Array
    pos: jax.Array
    size: jax.Array
    clock: jax.Array


def is_float(dtype) -> bool:
    return jnp.issubdtype(dtype, jnp.floating)


def init(example: Transition, capacity_per_env: int, obs_dtype=jnp.float32,
         extras: tuple[str, ...] = ()) -> ReplayState:
    """Empty buffer shaped after one vectorized step.

    Args:
        example: `Transition` whose leaves are `[N, ...]` (one vectorized step; arrays or
            `jax.ShapeDtypeStruct`s). Only the `extras` named in `extras` are stored.
        capacity_per_env: C, rows kept per env (total capacity `C * N` transitions).
        obs_dtype: storage dtype of the floating leaves of `obs` and `next_obs`
            (e.g. `jnp.bfloat16` halves memory; `sample` returns float32).
        extras: keys of `example.extras` to store too, under the same key in `data` (e.g.
            `("traj_id",)` for the goal relabeling of `sample_future`).

    Returns:
        ReplayState with zero data, `write_time = -1`, `pos = size = clock = 0`.

    Raises:
        ValueError: if `capacity_per_env < 1`, or an `extras` key is not in `example.extras`.
    """
    if capacity_per_env < 1:
        raise ValueError(f"capacity_per_env must be >= 1, got {capacity_per_env}")
    c = int(capacity_per_env)

    def alloc(x, dtype=None):
        dt = dtype if dtype is not None and is_float(x.dtype) else x.dtype
        return jnp.zeros((c,) + tuple(x.shape), dt)

    data = {}
    for k in _KEYS:
        leaf = getattr(example, k)
        if k in _OBS_KEYS:
            data[k] = jax.tree.map(lambda x: alloc(x, obs_dtype), leaf)
        elif k in _FLAG_KEYS:
            data[k] = jnp.zeros((c,) + tuple(leaf.shape), jnp.float32)
        else:
            data[k] = alloc(leaf)
    for k in extras:
        if k not in example.extras:
            raise ValueError(f"extras key {k!r} is not in the example transition's extras")
        data[k] = jax.tree.map(alloc, example.extras[k])
    zero = jnp.zeros((), jnp.int32)
    return ReplayState(
        data=data, write_time=jnp.full((c,), -1, jnp.int32), pos=zero, size=zero, clock=zero
    )


def add(state: ReplayState, traj: Transition) -> ReplayState:
    """Writes `traj` (leaves `[T, N, ...]`, T <= C) as T rows in time order, wrapping around.

    Stored extras (see `init`) are read from `traj.extras`.

    Row `t` of `traj` goes to row `(pos + t) % C` with `write_time = clock + t`; the oldest rows
    are overwritten once the buffer is full.

    Raises:
        ValueError: if T > C, or a leaf's shape is not `[T] + ` the stored row shape.
    """
    c = state.write_time.shape[0]
    t = traj.reward.shape[0]
    if t > c:
        raise ValueError(f"cannot add {t} rows to a buffer of {c} rows per env")
    idx = (state.pos + jnp.arange(t, dtype=jnp.int32)) % c

    def put(buf, x):
        if tuple(x.shape) != (t,) + buf.shape[1:]:
            raise ValueError(f"leaf shape {x.shape} does not match rows {buf.shape[1:]} (T={t})")
        return buf.at[idx].set(x.astype(buf.dtype), unique_indices=True)

    data = {k: jax.tree.map(put, state.data[k], getattr(traj, k)) for k in _KEYS}
    data.update({k: jax.tree.map(put, state.data[k], traj.extras[k])
                 for k in state.data if k not in _KEYS})
    write_time = state.write_time.at[idx].set(state.clock + jnp.arange(t, dtype=jnp.int32))
    return ReplayState(
        data=data,
        write_time=write_time,
        pos=(state.pos + t) % c,
        size=jnp.minimum(state.size + t, c),
        clock=state.clock + t,
    )


def num_transitions(state: ReplayState) -> jax.Array:
    """Transitions stored: `size * N`, int32 `[]`."""
    return state.size * state.data["reward"].shape[1]
