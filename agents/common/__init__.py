"""Code shared by several agents: the on-policy actor-critic loop, the off-policy replay / UTD
plumbing, the SAC core, the contrastive actor-critic, and agent configs shared by a family.

Agent modules (`jaxrl.agents.<name>`) may import these; these import only the core
(`jaxrl.engine`, `jaxrl.learning`) and each other, never an agent module.
"""
