"""jaxrl: JAX-native, massively parallel robotics reinforcement learning.

The env step and the learning update compile into one XLA program (`jit` over a `lax.scan` of
"collect, then update"); envs, seeds and float hyperparameters are vmapped.

The public API (`jaxrl.api`) is imported on first use, so `import jaxrl` stays fast:
`jaxrl.train`, `resume`, `sweep`, `load_run`, `evaluate`, `export`, `render`, `closed_loop`,
`make_env`, `get_agent`, `list_agents`, `list_envs`, `list_presets`, `get_preset`, `resolve`,
`TrainConfig`, `RunConfig`, `PBTConfig`, `Preset` and the agent config classes (`PPOConfig`,
`SACConfig`, ...).
"""

from jaxrl._version import __version__

_API = ("train", "resume", "sweep", "load_run", "evaluate", "export", "render", "closed_loop",
        "make_env", "get_agent", "list_agents", "list_envs", "list_presets", "get_preset",
        "resolve", "TrainConfig", "RunConfig", "Preset", "LoadedRun", "RunResult", "SweepResult",
        "PBTConfig", "PPOConfig", "SACConfig", "WarpSACConfig", "FastDSACConfig", "PQLConfig",
        "FPOConfig", "PolicyFlowConfig", "FlowSACConfig", "CRLConfig", "CPPOConfig")
__all__ = ["__version__", *_API]  # noqa: PLE0604

def __getattr__(name: str):
    if name in _API:
        from jaxrl import api

        return getattr(api, name)
    raise AttributeError(f"module 'jaxrl' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
