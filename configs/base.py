"""The preset record and registry (`Preset`, `register`, `get`); presets live in the sibling
modules, one per agent family."""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any

from jaxrl.engine.loop import RunConfig, TrainConfig


@dataclasses.dataclass(frozen=True)
class Preset:
    """A named run recipe: agent, env, the program's `TrainConfig`, the agent config, the host's
    `RunConfig`. The agent config is built when the preset is defined (`agent_config`), so a
    misspelt field or an invalid size fails at import, naming the preset."""

    name: str
    agent: str
    env: str
    train: TrainConfig
    agent_overrides: tuple[tuple[str, object], ...] = ()
    """The agent config's fields that differ from its defaults, as (name, value) pairs."""
    description: str = ""
    run: RunConfig = RunConfig()
    """Host settings (time budget, checkpoints, ...) other than the defaults."""
    agent_config: Any = dataclasses.field(init=False, repr=False, compare=False)
    """The agent config instance (`agent`'s config class with `agent_overrides`)."""

    def __post_init__(self):
        import jaxrl.agents  # noqa: F401  (registers the built-in agents)
        from jaxrl.engine.contract import config_fields, lookup

        config_cls = lookup(self.agent)[1]
        fields = config_fields(config_cls)
        for key, _ in self.agent_overrides:
            if key not in fields:
                close = difflib.get_close_matches(key, list(fields), n=1)
                hint = f" Did you mean {close[0]!r}?" if close else ""
                raise TypeError(f"preset {self.name!r}: {config_cls.__name__} has no field "
                                f"{key!r}.{hint}")
        object.__setattr__(self, "agent_config", config_cls(**dict(self.agent_overrides)))
        self.train.validate()
        self.run.validate()


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
