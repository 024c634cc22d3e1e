"""The training engine: data records, the agent contract, env wrappers, rollout, the loop, devices.

Depends on nothing else in jaxrl; `learning`, `run` and `deploy` build on it.
"""
