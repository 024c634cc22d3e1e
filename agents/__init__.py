"""Agents: one file per algorithm, registered by name."""

from jaxrl.agent import register
from jaxrl.agents.cppo import CPPO, CPPOConfig
from jaxrl.agents.crl import CRL, CRLConfig
from jaxrl.agents.fastdsac import FastDSAC, FastDSACConfig
from jaxrl.agents.ppo import PPO, PPOConfig
from jaxrl.agents.sac import SAC, SACConfig
from jaxrl.agents.warpsac import WarpSAC, WarpSACConfig

register("ppo", PPO, PPOConfig)
register("sac", SAC, SACConfig)
register("fastdsac", FastDSAC, FastDSACConfig)
register("warpsac", WarpSAC, WarpSACConfig)
register("crl", CRL, CRLConfig)
register("cppo", CPPO, CPPOConfig)

__all__ = ["PPO", "PPOConfig", "SAC", "SACConfig", "FastDSAC", "FastDSACConfig", "WarpSAC",
           "WarpSACConfig", "CRL", "CRLConfig", "CPPO",
           "CPPOConfig"]
