"""Environments: a registry of MuJoCo Playground, Brax and our own pure-JAX envs.

`make(name)` returns a single-env object with Playground's API (`reset(key) -> State`,
`step(State, action) -> State`), actions normalized to [-1, 1].
"""

from jaxrl.envs.registry import EnvAssetError, UnknownEnvError, list_envs, make, make_spec

__all__ = ["EnvAssetError", "UnknownEnvError", "list_envs", "make", "make_spec"]
