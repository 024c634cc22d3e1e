"""Typed presets: each holds its agent config instance, built (and checked) when defined."""

import pytest

from jaxrl import configs
from jaxrl.engine.contract import lookup
from jaxrl.engine.loop import RunConfig, TrainConfig


def test_every_preset_holds_its_agent_config():
    for preset in configs.PRESETS.values():
        config_cls = lookup(preset.agent)[1]
        assert type(preset.agent_config) is config_cls, preset.name
        assert preset.agent_config == config_cls(**dict(preset.agent_overrides)), preset.name


def test_a_misspelt_field_fails_where_the_preset_is_defined():
    with pytest.raises(TypeError, match="preset 'x': PPOConfig has no field 'lerning_rate'.*"
                                        "'learning_rate'"):
        configs.Preset(name="x", agent="ppo", env="PointMass1D", train=TrainConfig(),
                       agent_overrides=(("lerning_rate", 1e-3),))
    with pytest.raises(ValueError, match="num_envs must be positive"):
        configs.Preset(name="x", agent="ppo", env="PointMass1D", train=TrainConfig(num_envs=0))
    with pytest.raises(ValueError, match="keep_checkpoints must be positive"):
        configs.Preset(name="x", agent="ppo", env="PointMass1D", train=TrainConfig(),
                       run=RunConfig(keep_checkpoints=0))
