"""Generic domain randomizers for any MJX env, with Playground's randomizer signature.

`fn(model, rng) -> (model, in_axes)`: `rng` is a batch of keys `[B]` / `[B, 2]`; the returned
model holds `[B, ...]` arrays in the randomized fields, which `in_axes` marks with 0 (as
MuJoCo Playground's `_src/locomotion/go1/randomize.py`). Use one with
`--domain-randomization jaxrl.envs.randomizers:friction_and_mass` on envs that have no
randomizer of their own (e.g. the DM Control suite); the ranges follow Playground's Go1
randomizer (link masses x U(0.9, 1.1)) and widen its friction range to every geom
(x U(0.8, 1.2) of the nominal sliding friction).
"""

from __future__ import annotations

import jax

FRICTION_SCALE = (0.8, 1.2)
MASS_SCALE = (0.9, 1.1)


def friction_and_mass(model, rng: jax.Array):
    """Scales every geom's sliding friction by U(0.8, 1.2) and every body's mass by U(0.9, 1.1).

    Args:
        model: nominal `mjx.Model`.
        rng: keys `[B]` (typed) or `[B, 2]` (raw uint32).

    Returns:
        `(model, in_axes)`: `geom_friction` `[B, ngeom, 3]` and `body_mass` `[B, nbody]`.
    """

    @jax.vmap
    def draw(key):
        k_friction, k_mass = jax.random.split(key)
        scale = jax.random.uniform(k_friction, (model.ngeom,), minval=FRICTION_SCALE[0],
                                   maxval=FRICTION_SCALE[1])
        friction = model.geom_friction.at[:, 0].multiply(scale)
        mass = model.body_mass * jax.random.uniform(k_mass, (model.nbody,), minval=MASS_SCALE[0],
                                                    maxval=MASS_SCALE[1])
        return friction, mass

    friction, mass = draw(rng)
    in_axes = jax.tree_util.tree_map(lambda _: None, model)
    in_axes = in_axes.tree_replace({"geom_friction": 0, "body_mass": 0})
    return model.tree_replace({"geom_friction": friction, "body_mass": mass}), in_axes
