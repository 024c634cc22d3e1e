"""Targeted fixes for upstream env code that the jax we run on broke.

jax 0.10 removed the `a_min=` / `a_max=` keywords of `jnp.clip` (now `min=` / `max=`). Three
upstream modules still call them: Playground 0.2.0's LEAP-hand reorientation
(`mujoco_playground/_src/manipulation/leap_hand/reorient.py`, `_cube_orientation_error`), its
Panda-Robotiq push task (`franka_emika_panda_robotiq/push_cube.py`) and Brax 0.14.2's fluid
model (`brax/fluid.py`, used by `swimmer`). `patch_clip_keywords` gives only those modules a
`jp` namespace whose `clip` accepts the old keywords; `jax.numpy` itself is left as it is.
"""

from __future__ import annotations

import importlib
import sys
import types

import jax.numpy as jnp

CLIP_MODULES = (
    "mujoco_playground._src.manipulation.leap_hand.reorient",
    "mujoco_playground._src.manipulation.franka_emika_panda_robotiq.push_cube",
    "brax.fluid",
)


def clip(x, min=None, max=None, *, a_min=None, a_max=None):  # noqa: A002 (jnp's names)
    """`jnp.clip` that also takes the pre-0.10 `a_min` / `a_max` keywords."""
    lo = a_min if min is None else min
    hi = a_max if max is None else max
    return jnp.clip(x, lo, hi)


class _NumpyWithOldClip(types.ModuleType):
    """`jax.numpy` with `clip` replaced: every other attribute is read from `jax.numpy`."""

    def __init__(self):
        super().__init__("jax.numpy")
        self.clip = clip

    def __getattr__(self, name):
        return getattr(jnp, name)


_NUMPY = _NumpyWithOldClip()


def patch_clip_keywords(module_name: str) -> bool:
    """Points `module.jp` of one of `CLIP_MODULES` at a namespace with the old `clip`.

    Imports the module if needed. Returns False (and changes nothing) when the module cannot
    be imported or has no `jp`; idempotent.
    """
    if module_name not in CLIP_MODULES:
        raise ValueError(f"{module_name!r} is not one of the patched modules {CLIP_MODULES}.")
    try:
        module = sys.modules.get(module_name) or importlib.import_module(module_name)
    except ImportError:
        return False
    if getattr(module, "jp", None) is None:
        return False
    module.jp = _NUMPY
    return True


def patch_all() -> None:
    """Applies `patch_clip_keywords` to every module of `CLIP_MODULES` that imports."""
    for name in CLIP_MODULES:
        patch_clip_keywords(name)
