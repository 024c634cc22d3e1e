"""Agents: one file per algorithm, registered by name."""

from jaxrl.agents.cppo import CPPO, CPPOConfig
from jaxrl.agents.crl import CRL, CRLConfig
from jaxrl.agents.fastdsac import FastDSAC, FastDSACConfig
from jaxrl.agents.flow_sac import FlowSAC, FlowSACConfig
from jaxrl.agents.fpo import FPO, FPOConfig
from jaxrl.agents.policyflow import PolicyFlow, PolicyFlowConfig
from jaxrl.agents.ppo import PPO, PPOConfig
from jaxrl.agents.pql import PQL, PQLConfig
from jaxrl.agents.sac import SAC, SACConfig, WarpSACConfig
from jaxrl.engine.contract import register

register("ppo", PPO, PPOConfig)
register("sac", SAC, SACConfig)
register("fastdsac", FastDSAC, FastDSACConfig)
register("warpsac", SAC, WarpSACConfig)  # a profile of SAC: other defaults
register("crl", CRL, CRLConfig)
register("cppo", CPPO, CPPOConfig)
register("pql", PQL, PQLConfig)
register("fpo", FPO, FPOConfig)
register("flow_sac", FlowSAC, FlowSACConfig)
register("policyflow", PolicyFlow, PolicyFlowConfig)

__all__ = ["PPO", "PPOConfig", "SAC", "SACConfig", "FastDSAC", "FastDSACConfig",
           "WarpSACConfig", "CRL", "CRLConfig", "CPPO", "CPPOConfig",
           "PQL", "PQLConfig", "FPO", "FPOConfig", "PolicyFlow", "PolicyFlowConfig",
           "FlowSAC", "FlowSACConfig"]
