"""Pure learning blocks shared by the agents: returns, losses, replay, networks, distributions,
running statistics, optimizers, exploration noise, contrastive critics, flow matching.

Imports only the engine's data types and input checks (`jaxrl.engine.types`,
`jaxrl.engine.checks`); agent base classes live in `jaxrl.agents.common`.
"""
