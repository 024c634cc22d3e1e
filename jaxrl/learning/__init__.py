"""Pure learning blocks shared by the agents: returns, losses, replay, networks, distributions,
running statistics, optimizers, exploration noise, contrastive critics, flow matching.

Imports only the engine's data types (`jaxrl.engine.types`); code agents share lives in
`jaxrl.agents.common`.
"""
