"""Env registry: env families register themselves; `make` builds any registered env by name.

A family (`register_family`) is a name (`toy`, `goal`, `playground`, `brax`), a list of env
names (lazy where listing is expensive) and a factory. This module registers our toy and
goal-conditioned envs (`jaxrl.envs.toy`, `jaxrl.envs.goal`) and MuJoCo Playground and Brax envs
by their own names, in that order; a new family calls `register_family` and edits nothing here.

Robot assets (MuJoCo Menagerie) resolve with no configuration from the `robots` extra's wheels,
with `$JAXRL_MENAGERIE_PATH` first when set (`jaxrl.envs.assets`); with neither, Playground's own
location (which Playground downloads on first use when online). Upstream code that jax 0.10
broke is fixed per module in `jaxrl.envs.compat`. `unavailable()` names the envs that cannot be
built here (robot assets missing, or a family's `unsupported` names) with the reason, cheaply.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import hashlib
import importlib.util
import json
import os
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

import jax

from jaxrl.engine.types import EnvSpec
from jaxrl.envs import assets, compat, goal, toy
from jaxrl.envs.assets import EnvAssetError

BRAX_ENVS = ("ant", "fast", "halfcheetah", "hopper", "humanoid", "humanoidstandup", "swimmer",
             "inverted_pendulum", "inverted_double_pendulum", "pusher", "reacher", "walker2d")
# Known upstream breakage on our jax: named, so asking for them gives the reason, not "unknown".
UNSUPPORTED: dict[str, str] = {}
_MENAGERIE_SUITES = ("locomotion", "manipulation")


class UnknownEnvError(ValueError):
    """An env name that no registry knows."""


@dataclasses.dataclass(frozen=True)
class EnvFamily:
    """A registered family of envs (see `register_family` for the fields)."""

    name: str
    names: tuple[str, ...] | Callable[[], Iterable[str]]
    make_fn: Callable[..., Any]
    unsupported: Mapping[str, str]

    def env_names(self) -> tuple[str, ...]:
        """The family's env names (calls `names` when it is a callable)."""
        return tuple(self.names() if callable(self.names) else self.names)


_FAMILIES: dict[str, EnvFamily] = {}


def register_family(name: str, names: Iterable[str] | Callable[[], Iterable[str]],
                    make_fn: Callable[..., Any], *,
                    unsupported: Mapping[str, str] | None = None) -> EnvFamily:
    """Adds a family of envs to the registry, after the families already registered.

    Args:
        name: the family's key in `list_envs()` (and `jaxrl list envs`), e.g. `"toy"`.
        names: the env names, as a sequence, or as a zero-argument callable returning them.
            A callable is not called here but on every read of the registry (`list_envs`,
            `check_env_name`, `make`), so an expensive listing stays lazy (Playground's
            imports `mujoco_playground`, about 5 s; cache it, e.g. with `functools.cache`).
        make_fn: factory `make_fn(name, *, impl, episode_length, **overrides) -> env`, called
            by `make` with one of `names`; `impl` (MJX implementation) and `episode_length`
            (time limit) are None when the caller gave none, `overrides` are the caller's
            other keyword args. Returns a single env with Playground's API (`reset(key)`,
            `step(state, action)`) and `action_size`, `action_low`, `action_high`,
            `episode_length`, `dt`.
        unsupported: names this family knows but cannot build, mapped to the reason; asking
            for one raises `UnknownEnvError` with that reason.

    Returns:
        The registered `EnvFamily`.

    Raises:
        ValueError: `name` is empty or already registered; `names` (when a sequence) repeats a
            name or holds a name that another family registered as a sequence. Clashes with a
            family whose names are a callable are only found on the next read of the registry,
            which then raises ValueError naming both families.
        TypeError: `make_fn` (or `names`, when not a sequence) is not callable.
    """
    if not name or not isinstance(name, str):
        raise ValueError(f"Env family name must be a non-empty string, got {name!r}.")
    if name in _FAMILIES:
        raise ValueError(f"Env family {name!r} is already registered; call "
                         "unregister_family first to replace it.")
    if not callable(make_fn):
        raise TypeError(f"make_fn of env family {name!r} must be callable, got {make_fn!r}.")
    if isinstance(names, str):
        raise TypeError(f"names of env family {name!r} must be a sequence of names or a "
                        f"callable, got the string {names!r}.")
    if not callable(names):
        names = tuple(names)
        _check_unique({**{f.name: f.names for f in _FAMILIES.values() if not callable(f.names)},
                       name: names})
    family = EnvFamily(name=name, names=names, make_fn=make_fn,
                       unsupported=MappingProxyType(dict(unsupported or {})))
    _FAMILIES[name] = family
    return family


def unregister_family(name: str) -> EnvFamily:
    """Removes a registered family (tests register throwaway families and remove them).

    Args:
        name: the family's key, as given to `register_family`.

    Returns:
        The removed `EnvFamily` (pass its fields to `register_family` to restore it).

    Raises:
        KeyError: no family of that name is registered.
    """
    if name not in _FAMILIES:
        raise KeyError(f"No env family {name!r}; registered: {', '.join(_FAMILIES)}.")
    return _FAMILIES.pop(name)


def _check_unique(listing: Mapping[str, Iterable[str]]) -> None:
    owner: dict[str, str] = {}
    for family, names in listing.items():
        for env in names:
            if env in owner:
                where = (f"twice in family {family!r}" if owner[env] == family
                         else f"by both families {owner[env]!r} and {family!r}")
                raise ValueError(f"Env name {env!r} is registered {where}; env names must be "
                                 "unique across families.")
            owner[env] = family


def list_envs() -> dict[str, tuple[str, ...]]:
    """Registered env names by family, in registration order.

    Returns:
        `{family: names}`; the built-in families are `toy`, `goal`, `playground`, `brax`.

    Raises:
        ValueError: two families register the same env name.
    """
    listing = {f.name: f.env_names() for f in _FAMILIES.values()}
    _check_unique(listing)
    return listing


def find_family(name: str) -> EnvFamily:
    listing = list_envs()
    for family, names in listing.items():
        if name in names:
            return _FAMILIES[family]
    for family in _FAMILIES.values():
        if name in family.unsupported:
            raise UnknownEnvError(f"Env {name!r} is not supported: {family.unsupported[name]}")
    every = [n for names in listing.values() for n in names]
    close = difflib.get_close_matches(name, every, n=5, cutoff=0.5)
    lower = [n for n in every if n.lower() == name.lower()]
    hint = f" Did you mean: {', '.join(dict.fromkeys(lower + close))}?" if lower + close else ""
    raise UnknownEnvError(f"Unknown env {name!r}.{hint} Run `jaxrl list envs` for all names.")


def check_env_name(name: str) -> str:
    """Checks that `name` is a registered env.

    Args:
        name: env name, as `list_envs()` lists it.

    Returns:
        `name`.

    Raises:
        UnknownEnvError: `name` is not registered (the message lists close matches, or gives
            the reason when a family names it as unsupported).
        ValueError: two families register the same env name.
    """
    find_family(name)
    return name


def default_impl() -> str:
    """MJX implementation: the pure-JAX one on CPU (about 15x faster there than Warp's CPU
    kernels, measured on CartpoleBalance at 256 envs), Playground's default (`warp`) elsewhere
    when warp-lang is installed, else `jax` (MJX's own fallback, `mujoco.mjx` `_resolve_impl`:
    a GPU machine with Playground installed without its warp-lang dependency still trains)."""
    if jax.default_backend() == "cpu" or importlib.util.find_spec("warp") is None:
        return "jax"
    return "warp"


def make(name: str, *, impl: str | None = None, episode_length: int | None = None, **overrides):
    """Builds one env by registered name, with its family's factory.

    Args:
        name: a Playground name (`CartpoleBalance`), a Brax name (`ant`), a toy name, a
            goal-conditioned env name (`PointMaze`, `ReacherGoal`, `AntGoal`, `PusherGoal`), or
            a name of any family added with `register_family`.
        impl: MJX implementation for Playground envs (`jax` or `warp`); None picks
            `default_impl()`.
        episode_length: time limit to report in the spec; None keeps the env's default.
        **overrides: Playground config overrides, or Brax / toy / goal constructor kwargs.

    Returns:
        A single-env object with `reset`, `step`, `action_size`, `episode_length`, `dt`.

    Raises:
        UnknownEnvError: unknown name (the message lists close matches).
        EnvAssetError: a Menagerie asset is missing or `$JAXRL_MENAGERIE_PATH` is not a
            directory (the message names the `robots` extra and $JAXRL_MENAGERIE_PATH).
        ValueError: two families register the same env name.
    """
    family = find_family(name)
    return family.make_fn(name, impl=impl, episode_length=episode_length, **overrides)


def _own_factory(envs: Callable[[], Mapping[str, Callable[..., Any]]]):
    """Factory for our pure-JAX envs: `envs()[name](**overrides)`, then the time limit.

    `envs` is read on every call, so tests can add an env to `toy.TOY_ENVS` with monkeypatch.
    """

    def make_fn(name, *, impl=None, episode_length=None, **overrides):
        del impl  # no simulator
        env = envs()[name](**overrides)
        if episode_length:
            env.episode_length = int(episode_length)
        return env

    return make_fn


@functools.cache
def playground_envs() -> tuple[str, ...]:
    """Names of every MuJoCo Playground env.

    Reading them imports `mujoco_playground` (3-5 s on 2 CPU cores), which a run on a toy,
    goal or Brax env does not otherwise need, so the list is kept in
    `$XDG_CACHE_HOME/jaxrl/playground_envs-<key>.json` (default `~/.cache`), keyed by the
    installed version and the modification times of Playground's registry files; an unreadable
    or stale file is rebuilt.
    """
    path = _playground_names_path()
    if path:
        try:
            with open(path) as f:
                return tuple(json.load(f))
        except (OSError, ValueError):
            pass
    names = _import_playground_names()
    if path:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path + f".tmp{os.getpid()}", "w") as f:
                json.dump(list(names), f)
            os.replace(path + f".tmp{os.getpid()}", path)
        except OSError:
            pass
    return names


def _import_playground_names() -> tuple[str, ...]:
    from mujoco_playground import registry

    return tuple(registry.ALL_ENVS)


_PLAYGROUND_REGISTRY_FILES = ("registry.py", "dm_control_suite/__init__.py",
                              "locomotion/__init__.py", "manipulation/__init__.py")


def _playground_names_path() -> str | None:
    """Cache file of Playground's env names for the installed package (None: not installed)."""
    from importlib import metadata, util

    try:
        spec = util.find_spec("mujoco_playground")
        version = metadata.version("playground")
    except (ImportError, ValueError, metadata.PackageNotFoundError):
        return None
    if spec is None or not spec.origin:
        return None
    src = os.path.join(os.path.dirname(spec.origin), "_src")
    files = [os.path.join(src, f) for f in _PLAYGROUND_REGISTRY_FILES]
    stamps = [str(os.stat(f).st_mtime_ns) if os.path.exists(f) else "-" for f in files]
    key = hashlib.sha256("|".join([version, spec.origin, *stamps]).encode()).hexdigest()[:16]
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "jaxrl", f"playground_envs-{key}.json")


def _make_brax(name, *, impl=None, episode_length=None, **overrides):
    del impl  # Brax picks its pipeline per env
    from brax import envs as brax_envs

    from jaxrl.envs.adapters import BraxEnv

    compat.patch_clip_keywords("brax.fluid")
    return BraxEnv(name, brax_envs.get_environment(name, **overrides), episode_length or 1000)


def _make_playground(name, *, impl=None, episode_length=None, **overrides):
    from mujoco_playground import registry

    from jaxrl.envs.adapters import PlaygroundEnv

    cfg = registry.get_default_config(name)
    if "impl" in cfg and "impl" not in overrides:
        overrides["impl"] = impl or default_impl()
    needs_assets = _playground_suite(name) in _MENAGERIE_SUITES
    if needs_assets:
        _point_playground_at_menagerie(name)
        compat.patch_all()
    try:
        env = registry.load(name, config_overrides=overrides or None)
    except Exception as err:
        if needs_assets and _is_missing_file(err):
            raise EnvAssetError(_asset_message(name, err)) from err
        raise
    length = episode_length or int(cfg.get("episode_length", 1000))
    return PlaygroundEnv(name, env, length, self_scaling=needs_assets)


def _playground_suite(name: str) -> str:
    from mujoco_playground import registry

    for suite in ("dm_control_suite", "locomotion", "manipulation"):
        if name in getattr(registry, suite).ALL_ENVS:
            return suite
    return "other"


def _point_playground_at_menagerie(name: str) -> None:
    """Sets Playground's `MENAGERIE_PATH` to the merged view (or back to Playground's own
    folder when there is no source, where Playground clones the Menagerie when online).

    Raises:
        EnvAssetError: `$JAXRL_MENAGERIE_PATH` is not a directory, or no source holds a robot
            folder that `name` reads (checked before Playground reads any file).
    """
    from etils import epath
    from mujoco_playground._src import mjx_env

    view = assets.menagerie_view()
    if view is None:
        mjx_env.MENAGERIE_PATH = mjx_env.EXTERNAL_DEPS_PATH / "mujoco_menagerie"
        return
    missing = assets.missing_folders(name)
    if missing:
        raise EnvAssetError(f"Could not load {name!r}: no robot asset source has the MuJoCo "
                            f"Menagerie folder(s) {', '.join(missing)} (sources: "
                            f"{', '.join(map(str, assets.sources()))}). " + assets.install_hint())
    mjx_env.MENAGERIE_PATH = epath.Path(view)


def unavailable() -> dict[str, str]:
    """Env names that cannot be built here, mapped to the reason, without loading any env.

    Lists each family's `unsupported` names, and Playground robot envs whose MuJoCo Menagerie
    folders (`assets.ROBOT_FOLDERS`) no asset source holds (folder listing only; with no source
    at all, Playground would try to clone the Menagerie on first use, which needs the network).

    Returns:
        `{name: reason}`: robot envs in listing order, then unsupported names by family.

    Raises:
        ValueError: two families register the same env name.
    """
    robots = [n for n in list_envs().get("playground", ()) if assets.robot_folders(n)]
    reasons = _missing_asset_reasons(robots)
    for family in _FAMILIES.values():
        reasons.update({n: f"not supported: {why}" for n, why in family.unsupported.items()})
    return reasons


def _missing_asset_reasons(names: Iterable[str]) -> dict[str, str]:
    hint = f'pip install "jaxrl[{assets.EXTRA}]" or set ${assets.MENAGERIE_VAR}'
    try:
        roots = assets.sources()
    except EnvAssetError:
        bad = f"${assets.MENAGERIE_VAR} is not a directory"
        return {n: f"{bad} (robot assets: {hint})" for n in names}
    have = assets.robots(roots)
    reasons = {}
    for name in names:
        missing = assets.missing_folders(name, have)
        if missing:
            where = "" if roots else "; no asset source, Playground would clone it (network)"
            reasons[name] = (f"robot assets missing: Menagerie {', '.join(missing)}{where} "
                             f"({hint})")
    return reasons


def _is_missing_file(err: Exception) -> bool:
    """A robot file could not be read: epath / open raise OSError, MuJoCo's XML compiler a
    ValueError "Error opening file ...". Other errors (e.g. upstream code that jax broke) are
    not reported as missing assets."""
    return isinstance(err, OSError) or "file" in str(err).lower()


def _asset_message(name: str, err: Exception) -> str:
    from mujoco_playground._src import mjx_env

    return (f"Could not load {name!r}: a MuJoCo Menagerie asset is missing under "
            f"{mjx_env.MENAGERIE_PATH} ({type(err).__name__}: {str(err)[:300]}). "
            + assets.install_hint())


def make_spec(env, name: str | None = None) -> EnvSpec:
    """Reads an `EnvSpec` from an env with `jax.eval_shape` (traces, never compiles)."""
    state = jax.eval_shape(env.reset, jax.random.PRNGKey(0))
    obs = state.obs
    shape = {k: tuple(v.shape) for k, v in obs.items()} if isinstance(obs, dict) else tuple(
        obs.shape)
    return EnvSpec(name=name or getattr(env, "name", type(env).__name__), obs_shape=shape,
                   action_size=int(env.action_size),
                   action_low=tuple(float(x) for x in env.action_low),
                   action_high=tuple(float(x) for x in env.action_high),
                   episode_length=int(env.episode_length), dt=getattr(env, "dt", None),
                   goal_indices=getattr(env, "goal_indices", None))


# Built-in families, in the order `list_envs()` (and `jaxrl list envs`) shows them. Toy and goal
# names are read from their dicts on every call, so tests can add an env with monkeypatch.
register_family("toy", lambda: tuple(toy.TOY_ENVS), _own_factory(lambda: toy.TOY_ENVS))
register_family("goal", lambda: tuple(goal.GOAL_ENVS), _own_factory(lambda: goal.GOAL_ENVS))
register_family("playground", playground_envs, _make_playground)
register_family("brax", BRAX_ENVS, _make_brax, unsupported=UNSUPPORTED)
