"""Domain randomization re-drawn at every reset, with the randomized model in the env state.

A randomizer has MuJoCo Playground's signature `fn(model, rng) -> (model, in_axes)`: `rng` is a
batch of keys `[B]` (typed) or `[B, 2]` (raw), the returned model holds `[B, ...]` arrays in the
fields it randomizes and `in_axes` marks those fields with 0 (Playground's
`_src/locomotion/go1/randomize.py`, `domain_randomize`). Playground's training wrapper
(`_src/wrapper.py`, `BraxDomainRandomizationVmapWrapper`) draws one model per env slot for the
whole run and writes the traced model into the env object. `DomainRandomization` instead draws a
new model for an env at every reset (so every auto-reset, with the fresh per-env key of
`wrappers.AutoReset`), keeps the randomized fields in `state.info["randomized"]` (so they are
part of the run state and checkpoints resume exactly) and sets the env's model only while its
own `reset` / `step` is traced, restoring the nominal model afterwards (no traced value stays
in the env object).

The env must offer `sim_model` (the nominal simulator model) and `using_model(model)` (a
context manager that makes the env simulate with `model`); `jaxrl.envs` adapters of Playground
envs do, and also offer `domain_randomizer()` (the env's randomizer from Playground's registry).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

import jax

from jaxrl.engine.types import State
from jaxrl.engine.wrappers import Wrapper

PLAYGROUND = "playground"
INFO_KEY = "randomized"


def resolve(choice: str, env) -> Callable:
    """The randomizer a `TrainConfig.domain_randomization` value names.

    Args:
        choice: `playground` (the env's own randomizer from Playground's registry) or
            `module:function` (importable path of a function with Playground's signature).
        env: the single (unwrapped) env.

    Raises:
        ValueError: the env cannot be randomized (no simulator model), has no randomizer of its
            own, or `choice` is malformed or names nothing importable and callable.
    """
    if not hasattr(env, "sim_model") or not hasattr(env, "using_model"):
        raise ValueError(f"Domain randomization needs a MuJoCo Playground env; "
                         f"{getattr(env, 'name', type(env).__name__)!r} has no simulator model "
                         "to randomize.")
    if choice == PLAYGROUND:
        fn = env.domain_randomizer()
        if fn is None:
            raise ValueError(f"Env {env.name!r} has no domain randomizer in Playground's registry "
                             f"(envs with one: {', '.join(env.randomizable_envs())}); pass "
                             "--domain-randomization module:function for your own.")
        return fn
    module, _, name = choice.partition(":")
    if not module or not name:
        raise ValueError(f"domain_randomization must be {PLAYGROUND!r} or 'module:function', "
                         f"got {choice!r}.")
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"domain_randomization {choice!r}: cannot import it ({err}).") from err
    if not callable(fn):
        raise ValueError(f"domain_randomization {choice!r} is not callable.")
    return fn


def _named_leaves(tree) -> dict[str, object]:
    leaves = jax.tree_util.tree_flatten_with_path(tree, is_leaf=lambda x: x is None)[0]
    return {jax.tree_util.keystr(path).lstrip("."): leaf for path, leaf in leaves}


def randomized_fields(fn: Callable, model) -> tuple[str, ...]:
    """Names of the model fields `fn` randomizes, checked before anything compiles.

    Raises:
        ValueError: `fn` randomizes nothing, or returns a field whose shape (less the batch
            axis) or dtype differs from the nominal model's.
    """
    axes = {}

    def draw(key):
        out, in_axes = fn(model, key)
        axes.update(_named_leaves(in_axes))
        return out

    shapes = _named_leaves(jax.eval_shape(draw, jax.random.split(jax.random.PRNGKey(0), 1)))
    nominal = _named_leaves(model)
    fields = tuple(n for n, axis in axes.items() if axis == 0)
    if not fields:
        raise ValueError("The domain randomizer marks no model field with in_axes 0.")
    for n in fields:
        want = (1, *jax.numpy.shape(nominal[n]))
        if tuple(shapes[n].shape) != want or shapes[n].dtype != jax.numpy.asarray(nominal[n]).dtype:
            raise ValueError(f"The domain randomizer changes model field {n!r} from shape "
                             f"{want[1:]} {jax.numpy.asarray(nominal[n]).dtype} to "
                             f"{tuple(shapes[n].shape[1:])} {shapes[n].dtype}; it must keep "
                             "shapes and dtypes.")
    return fields


def with_fields(model, values: dict[str, jax.Array]):
    """`model` with the named fields replaced by `values` (names as `randomized_fields`)."""
    leaves, treedef = jax.tree_util.tree_flatten_with_path(model)
    new = [values.get(jax.tree_util.keystr(p).lstrip("."), leaf) for p, leaf in leaves]
    return jax.tree_util.tree_unflatten(treedef, new)


class DomainRandomization(Wrapper):
    """Single-env wrapper: a fresh randomized model at every reset, carried in `info`.

    Wrap below `Episode`: `AutoReset(Vmap(Episode(DomainRandomization(env, fn))))`.
    `state.info["randomized"]` is `{field: value}` with the nominal field shapes (`[N, ...]`
    once vmapped), e.g. `geom_friction` `[ngeom, 3]` float32 for Go1.
    """

    def __init__(self, env, randomize_fn: Callable):
        super().__init__(env)
        self.randomize_fn = randomize_fn
        self.fields = randomized_fields(randomize_fn, env.sim_model)

    def draw(self, key: jax.Array) -> dict[str, jax.Array]:
        """The randomized fields for one env from one key."""
        model, _ = self.randomize_fn(self.env.sim_model, key[None])
        leaves = _named_leaves(model)
        return {n: leaves[n][0] for n in self.fields}

    def reset(self, key: jax.Array) -> State:
        key_model, key_env = jax.random.split(key)
        values = self.draw(key_model)
        with self.env.using_model(with_fields(self.env.sim_model, values)):
            state = self.env.reset(key_env)
        return state.replace(info=dict(state.info, **{INFO_KEY: values}))

    def step(self, state: State, action: jax.Array) -> State:
        values = state.info[INFO_KEY]
        with self.env.using_model(with_fields(self.env.sim_model, values)):
            nxt = self.env.step(state, action)
        return nxt.replace(info=dict(nxt.info, **{INFO_KEY: values}))


def maybe_randomize(env, choice: str | None):
    """`DomainRandomization(env, resolve(choice, env))`, or `env` itself when `choice` is None."""
    return env if choice is None else DomainRandomization(env, resolve(choice, env))
