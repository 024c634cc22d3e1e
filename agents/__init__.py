"""Agents: one file per algorithm, registered by name."""

from jaxrl.agent import register
from jaxrl.agents.ppo import PPO, PPOConfig

register("ppo", PPO, PPOConfig)

__all__ = ["PPO", "PPOConfig"]
