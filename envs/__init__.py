"""Environments: a registry of MuJoCo Playground, Brax and our own pure-JAX envs.

`make(name)` returns a single-env object with Playground's API (`reset(key) -> State`,
`step(State, action) -> State`), actions normalized to [-1, 1]. New env families join the
registry with `register_family` (see `jaxrl.envs.registry`).
"""

from jaxrl.envs.registry import (
    EnvAssetError,
    EnvFamily,
    UnknownEnvError,
    check_env_name,
    list_envs,
    make,
    make_spec,
    register_family,
    unregister_family,
)

__all__ = ["EnvAssetError", "EnvFamily", "UnknownEnvError", "check_env_name", "list_envs",
           "make", "make_spec", "register_family", "unregister_family"]
