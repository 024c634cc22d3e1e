"""Run configs as JSON: `config.json` and the copy in every checkpoint's meta.

`resolved_config` writes the resolved agent, env, `TrainConfig`, `RunConfig` (`run`), agent
config, float hyperparameters and spec; `parse_config`, `parse_run` and `config_from_dict`
rebuild the typed configs
(tuples, nested dataclasses and float fields restored from JSON, following the type hints).
"""

from __future__ import annotations

import dataclasses
import json
import os
import types
import typing
from typing import Any

from jaxrl.engine import contract as agent_lib
from jaxrl.engine import loop
from jaxrl.engine.types import EnvSpec

CONFIG_FILE = "config.json"


class CheckpointError(ValueError):
    """A run dir or checkpoint that is missing, unreadable or does not match the request."""


def resolved_config(
    agent_name: str,
    env_name: str,
    cfg: loop.TrainConfig,
    agent_config,
    spec: EnvSpec,
    hp: dict,
    extra: dict | None = None,
    run: loop.RunConfig | None = None,
) -> dict:
    """The JSON-able resolved config saved as `config.json` and in every checkpoint.

    Args:
        extra: more keys to keep (the CLI adds `preset`); the computed keys win.
        run: the host settings (`run`; default `RunConfig()`).
    """
    out = dict(extra or {})
    out.update(
        agent=agent_name,
        env=env_name,
        train=dataclasses.asdict(cfg),
        run=dataclasses.asdict(run or loop.RunConfig()),
        agent_config=dataclasses.asdict(agent_config),
        hp={k: float(v) for k, v in hp.items()},
        spec={"obs_shape": jsonify(spec.obs_shape), "action_size": spec.action_size},
    )
    return out


def write_config(run_dir: str, resolved: dict) -> None:
    """Writes `<run_dir>/config.json` atomically (`write_json`)."""
    os.makedirs(run_dir, exist_ok=True)
    write_json(os.path.join(run_dir, CONFIG_FILE), resolved)


def write_json(path: str, data: dict) -> None:
    """Writes `data` as indented JSON atomically (a temporary file renamed into place)."""
    with open(path + ".tmp", "w") as f:
        json.dump(data, f, indent=2, default=str)
    os.replace(path + ".tmp", path)


def read_config(run_dir: str) -> dict:
    """Reads `<run_dir>/config.json`.

    Raises:
        CheckpointError: no such folder, no config.json, or config.json is not valid JSON.
    """
    if not os.path.isdir(run_dir):
        raise CheckpointError(f"run dir {run_dir!r} does not exist.")
    path = os.path.join(run_dir, CONFIG_FILE)
    if not os.path.isfile(path):
        raise CheckpointError(f"{run_dir!r} has no {CONFIG_FILE}: not a jaxrl run dir.")
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as err:
        raise CheckpointError(f"cannot read {path}: {err}") from err


def parse_config(resolved: dict) -> tuple[str, str, loop.TrainConfig, Any, dict | None]:
    """(agent name, env name, TrainConfig, agent config, hp or None) from a resolved config.

    Raises:
        CheckpointError: a key is missing or a field is unknown (config from another version).
        jaxrl.engine.contract.UnknownAgentError: the agent is not registered.
    """
    missing = [k for k in ("agent", "env", "train", "agent_config") if k not in resolved]
    if missing:
        raise CheckpointError(
            f"{CONFIG_FILE} lacks {', '.join(missing)}: it was not written "
            "by `jaxrl train` (or by an older version that did not save it)."
        )
    config_cls = agent_lib.lookup(resolved["agent"])[1]
    train = {k: v for k, v in resolved["train"].items() if k not in loop.RUN_FIELDS}
    agent_data, train = _moved_to_train(config_cls, resolved["agent_config"], train)
    cfg = config_from_dict(loop.TrainConfig, train)
    agent_config = config_from_dict(config_cls, agent_data)
    return resolved["agent"], resolved["env"], cfg, agent_config, resolved.get("hp")


def _moved_to_train(config_cls: type, agent_data: dict, train: dict) -> tuple[dict, dict]:
    """(agent config, train config) JSON with the agent fields that became `TrainConfig`
    fields moved over: PQL's `num_devices`, saved before `--num-devices` also counted the
    devices of PQL's own layouts (such a run's `train.num_devices` was 1)."""
    names = {f.name for f in dataclasses.fields(config_cls)}
    defaults = {f.name: f.default for f in dataclasses.fields(loop.TrainConfig)}
    moved = {k: v for k, v in agent_data.items() if k not in names and k in defaults}
    keep = {k: v for k, v in agent_data.items() if k not in moved}
    for k, v in moved.items():
        if train.get(k, defaults[k]) == defaults[k]:
            train = dict(train, **{k: v})
    return keep, train


def parse_run(resolved: dict) -> loop.RunConfig:
    """The host settings of a resolved config: its `run` entry, or, in a config.json written
    before `RunConfig` existed, the same fields inside `train`."""
    data = resolved.get("run")
    if data is None:
        data = {k: v for k, v in resolved.get("train", {}).items() if k in loop.RUN_FIELDS}
    return config_from_dict(loop.RunConfig, data)


def config_from_dict(cls: type, data: dict):
    """Rebuilds a (frozen) config dataclass from its `dataclasses.asdict` JSON form.

    Lists that JSON made of tuples become tuples again, nested dataclasses are rebuilt, and
    ints stored for float fields become floats, following the field type hints.

    Raises:
        CheckpointError: `data` names a field that `cls` does not have.
    """
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise CheckpointError(
            f"saved {cls.__name__} has unknown fields {unknown}: it was "
            "written by another version of jaxrl."
        )
    return cls(**{k: _coerce(hints[k], v) for k, v in data.items()})


def _coerce(tp, value):
    if value is None:
        return None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            if arg is type(None):
                continue
            out = _coerce(arg, value)
            if out is not value or isinstance(value, _plain_type(arg)):
                return out
        return value
    if dataclasses.is_dataclass(tp) and isinstance(value, dict):
        return config_from_dict(tp, value)
    if (origin is tuple or tp is tuple) and isinstance(value, (list, tuple)):
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(args[0], v) for v in value)
        if args:
            return tuple(_coerce(a, v) for a, v in zip(args, value, strict=False))
        return tuple(value)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _plain_type(tp) -> type | tuple:
    origin = typing.get_origin(tp) or tp
    return origin if isinstance(origin, type) else object


def jsonify(x):
    """Tuples (nested, in dicts) as lists, as JSON stores them."""
    if isinstance(x, dict):
        return {k: jsonify(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonify(v) for v in x]
    return x
