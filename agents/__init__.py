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

register("ppo", PPO, PPOConfig,
         "Proximal Policy Optimization (on-policy), as Brax / MuJoCo Playground's PPO.")
register("sac", SAC, SACConfig,
         "Soft actor-critic (off-policy) with a scalar or C51 critic ensemble.")
register("fastdsac", FastDSAC, FastDSACConfig,
         "FastDSAC-A (off-policy): DSAC-T's Gaussian return critic, large-batch SAC.")
register("warpsac", SAC, WarpSACConfig,  # a profile of SAC: other defaults
         "WarpSAC-L/-A: SAC with a C51 critic, reward normalization and Sample Weight Decay "
         "replay; FlashSAC's normalized nets in -L (a profile of sac).")
register("crl", CRL, CRLConfig,
         "Contrastive RL (off-policy, goal-conditioned, reward-free), as JaxGCRL's.")
register("cppo", CPPO, CPPOConfig,
         "Contrastive PPO (on-policy, goal-conditioned, reward-free); our reconstruction.")
register("pql", PQL, PQLConfig,
         "Parallel Q-Learning and PQL-D (off-policy, deterministic actor, twin critics).")
register("fpo", FPO, FPOConfig,
         "Flow Policy Optimization and FPO++ (on-policy, flow-matching policy).")
register("flow_sac", FlowSAC, FlowSACConfig,
         "SAC Flow (off-policy): SAC with a flow-matching actor (Flow-G or Flow-T).")
register("policyflow", PolicyFlow, PolicyFlowConfig,
         "PolicyFlow (on-policy): a flow policy with a Gaussian residual, no ODE backprop.")

__all__ = ["PPO", "PPOConfig", "SAC", "SACConfig", "FastDSAC", "FastDSACConfig",
           "WarpSACConfig", "CRL", "CRLConfig", "CPPO", "CPPOConfig",
           "PQL", "PQLConfig", "FPO", "FPOConfig", "PolicyFlow", "PolicyFlowConfig",
           "FlowSAC", "FlowSACConfig"]
