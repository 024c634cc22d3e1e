"""Typed presets: a `Preset` names an agent, an env, a `TrainConfig` and agent-config overrides.

Presets come in pairs: a GPU preset with thousands of envs, as the peers run them, and a CPU
preset that learns on 2 cores (tests and the README default).
"""

from __future__ import annotations

import dataclasses
import difflib

from jaxrl.engine.loop import TrainConfig


@dataclasses.dataclass(frozen=True)
class Preset:
    """A named run recipe."""

    name: str
    agent: str
    env: str
    train: TrainConfig
    agent_overrides: tuple[tuple[str, object], ...] = ()
    description: str = ""


class UnknownPresetError(ValueError):
    """A preset name that is not registered."""


PRESETS: dict[str, Preset] = {}


def register(preset: Preset) -> Preset:
    PRESETS[preset.name] = preset
    return preset


def get(name: str) -> Preset:
    """The preset called `name`; `UnknownPresetError` with close matches otherwise."""
    if name not in PRESETS:
        close = difflib.get_close_matches(name, list(PRESETS), n=3, cutoff=0.4)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise UnknownPresetError(
            f"Unknown preset {name!r}.{hint} Run `jaxrl list presets` for all names.")
    return PRESETS[name]


from jaxrl.configs import crl as _crl  # noqa: E402,F401
from jaxrl.configs import ppo as _ppo  # noqa: E402,F401  (registers the presets)
from jaxrl.configs import sac as _sac  # noqa: E402,F401
