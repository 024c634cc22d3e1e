"""jaxrl: JAX-native, massively parallel robotics reinforcement learning.

The env step and the learning update compile into one XLA program (`jit` over a `lax.scan` of
"collect, then update"); envs, seeds and float hyperparameters are vmapped.
"""

__version__ = "0.1.0"
