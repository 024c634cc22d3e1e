"""Pure learning blocks shared by the agents: returns, losses, replay, networks, distributions,
running statistics, optimizers, exploration noise, contrastive critics, the off-policy base.

Imports `jaxrl.engine` only (types and the agent contract).
"""
