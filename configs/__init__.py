"""Typed presets: a `Preset` names an agent, an env, a `TrainConfig` and agent-config overrides.

Presets come in pairs: a GPU preset with thousands of envs, as the peers run them, and a CPU
preset that learns on 2 cores (tests and the README default).
"""

from jaxrl.configs import crl as _crl  # noqa: F401  (registers the presets)
from jaxrl.configs import flow_sac as _flow_sac  # noqa: F401
from jaxrl.configs import fpo as _fpo  # noqa: F401
from jaxrl.configs import policyflow as _policyflow  # noqa: F401
from jaxrl.configs import ppo as _ppo  # noqa: F401
from jaxrl.configs import pql as _pql  # noqa: F401
from jaxrl.configs import robots as _robots  # noqa: F401
from jaxrl.configs import sac as _sac  # noqa: F401
from jaxrl.configs.base import (
    PRESETS,
    Preset,
    UnknownPresetError,
    get,
    presets_markdown,
    register,
)

__all__ = ["PRESETS", "Preset", "UnknownPresetError", "get", "presets_markdown", "register"]
