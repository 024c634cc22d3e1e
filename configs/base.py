"""The preset record and registry (`Preset`, `register`, `get`); presets live in the sibling
modules, one per agent family."""

from __future__ import annotations

import dataclasses
import difflib

from jaxrl.engine.loop import RunConfig, TrainConfig


@dataclasses.dataclass(frozen=True)
class Preset:
    """A named run recipe."""

    name: str
    agent: str
    env: str
    train: TrainConfig
    agent_overrides: tuple[tuple[str, object], ...] = ()
    description: str = ""
    run: RunConfig = RunConfig()
    """Host settings (time budget, checkpoints, ...) other than the defaults."""


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


def presets_markdown() -> str:
    """The README's presets table: one row per registered preset, in registration order."""
    lines = ["| preset | agent | env | num_envs | what |", "|---|---|---|---:|---|"]
    lines += [f"| `{p.name}` | `{p.agent}` | `{p.env}` | {p.train.num_envs:,} | {p.description} |"
              for p in PRESETS.values()]
    return "\n".join(lines)
