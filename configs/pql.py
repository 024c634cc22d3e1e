"""PQL presets: the reference settings at GPU scale and a CPU preset that learns
`CartpoleBalance` on 2 cores (budgets and results in `benchmarks/RESULTS.md`).

- `pql-gpu`: `Improbable-AI/pql` `cfg/algo/pql_algo.yaml` and `cfg/default.yaml`: 4096 envs,
  batch 8192, replay 5e6, 32 random warm-up steps per env, 8 critic steps per env step, one
  actor step per 2 critic steps, 3-step returns, 512-256-128 ELU nets, AdamW 5e-4.
- `pqld-gpu`: PQL-D as released (51 atoms on [-10, 10], BCE to the elementwise min of the
  projected twins); `pqld-ce-gpu`: PQL-D with our recommended cross-entropy to the projection
  of the lower-mean twin.
- `pql-cartpole-cpu` (and `pqld-cartpole-cpu`, `pqld-ce-cartpole-cpu`): the same structure
  sized for 2 cores: 32 envs, batch 256, 4 critic steps per env step, 256-128-64 nets. The PQL-D
  ones scale rewards by 0.1, as PQL scales each task's rewards, so that discounted returns
  (CartpoleBalance: up to 1 / (1 - 0.99) = 100) fit the atoms on [-10, 10].
- `pql-cheetah-cpu`: the CartpoleBalance CPU structure on DM Control `CheetahRun` with a 30-min
  training budget (`max_train_seconds`) and 16 critic steps per env step (CheetahRun's training
  env step is ~100x a gradient step here, so more updates per step pay); 8k-step chunks
  (`benchmarks/locomotion_cpu.py`).
"""

from jaxrl.configs.base import Preset, register
from jaxrl.engine.loop import RunConfig, TrainConfig

_GPU_TRAIN = TrainConfig(num_envs=4096, unroll_length=1, total_env_steps=100_000_000,
                         num_chunks=50, num_eval_envs=128)
_GPU = (("batch_size", 8192), ("buffer_size", 5_000_000), ("learning_starts", 32 * 4096),
        ("critic_updates_per_step", 8), ("critic_updates_per_actor_update", 2))
_PQLD = (("critic_type", "categorical"), ("num_atoms", 51), ("v_min", -10.0), ("v_max", 10.0))
_CPU_TRAIN = TrainConfig(num_envs=32, unroll_length=4, total_env_steps=64_000, num_chunks=4,
                         num_eval_envs=16)
_CPU = (("actor_hidden", (256, 128, 64)), ("critic_hidden", (256, 128, 64)),
        ("batch_size", 256), ("buffer_size", 100_000), ("learning_starts", 4096),
        ("critic_updates_per_step", 4), ("critic_updates_per_actor_update", 2))
_CPU_PQLD = _CPU + _PQLD + (("reward_scaling", 0.1),)

register(Preset(name="pql-gpu", agent="pql", env="G1JoystickFlatTerrain", train=_GPU_TRAIN,
                agent_overrides=_GPU,
                description="PQL reference settings (4096 envs, batch 8192) (GPU scale)."))
register(Preset(name="pqld-gpu", agent="pql", env="G1JoystickFlatTerrain", train=_GPU_TRAIN,
                agent_overrides=_GPU + _PQLD + (("distributional_target", "min_bce"),),
                description="PQL-D as released: BCE to the min of projected twins (GPU)."))
register(Preset(name="pqld-ce-gpu", agent="pql", env="G1JoystickFlatTerrain", train=_GPU_TRAIN,
                agent_overrides=_GPU + _PQLD + (("distributional_target", "lower_ce"),),
                description="PQL-D, cross-entropy to the lower-mean twin (GPU scale)."))
register(Preset(name="pql-cartpole-cpu", agent="pql", env="CartpoleBalance", train=_CPU_TRAIN,
                agent_overrides=_CPU, description="PQL on CartpoleBalance, 2 CPU cores."))
register(Preset(name="pqld-cartpole-cpu", agent="pql", env="CartpoleBalance",
                train=_CPU_TRAIN,
                agent_overrides=_CPU_PQLD + (("distributional_target", "min_bce"),),
                description="PQL-D (reference BCE target) on CartpoleBalance, 2 CPU cores."))
register(Preset(name="pqld-ce-cartpole-cpu", agent="pql", env="CartpoleBalance",
                train=_CPU_TRAIN,
                agent_overrides=_CPU_PQLD + (("distributional_target", "lower_ce"),),
                description="PQL-D (cross-entropy target) on CartpoleBalance, 2 CPU cores."))

_CHEETAH_TRAIN = TrainConfig(num_envs=32, unroll_length=4, total_env_steps=4_000_000,
                             num_chunks=500, num_eval_envs=16)
_CHEETAH = (("actor_hidden", (256, 128, 64)), ("critic_hidden", (256, 128, 64)),
            ("batch_size", 256), ("buffer_size", 100_000), ("learning_starts", 4096),
            ("critic_updates_per_step", 16), ("critic_updates_per_actor_update", 2))
register(Preset(name="pql-cheetah-cpu", agent="pql", env="CheetahRun", train=_CHEETAH_TRAIN,
                agent_overrides=_CHEETAH, run=RunConfig(max_train_seconds=1800.0),
                description="PQL on DM Control CheetahRun, 2 CPU cores, 30 min budget."))
