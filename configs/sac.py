"""SAC-family presets: a GPU preset as the peers run it and a CPU preset that learns
`CartpoleBalance` on 2 cores (learning tests; budgets and results in `benchmarks/RESULTS.md`).

- `sac-dmc-gpu`: Playground's `brax_sac_config` for DM Control
  (`mujoco_playground/config/dm_control_suite_params.py`): 128 envs, batch 512, 8 gradient
  steps per env step, lr 1e-3, gamma 0.99, replay 4,194,304, start 8,192.
- `fastdsac-gpu`: FastDSAC-A on Playground G1 (`luge66/FastDSAC` defaults): 1024 envs, batch
  32,768, 2 critic steps per env step, actor every 2nd, tau 0.1, AdamW 3e-4 / wd 0.1,
  gamma 0.97, c = 1e-3, critic mean clamped to +-10, asymmetric critic (privileged state).
- `warpsac-l` (CPU sims) and `warpsac-a` (GPU sims): the two WarpSAC profiles (arXiv 2608.24479);
  `warpsac-l` is sized here for `CartpoleBalance` on 2 cores, `warpsac-a-cpu` is the `-A`
  structure (no normalization, one critic, bf16 replay) at CPU scale.
"""

import dataclasses

from jaxrl.configs.base import Preset, register
from jaxrl.engine.loop import TrainConfig

_CPU_TRAIN = TrainConfig(num_envs=32, unroll_length=4, total_env_steps=96_000, num_chunks=6,
                         num_eval_envs=16)
_CPU_COMMON = (("buffer_size", 100_000), ("learning_starts", 4096), ("batch_size", 256))

register(Preset(
    name="sac-dmc-gpu", agent="sac", env="CartpoleBalance",
    train=TrainConfig(num_envs=128, unroll_length=1, total_env_steps=5_000_000, num_chunks=10,
                      num_eval_envs=128),
    agent_overrides=(("batch_size", 512), ("utd_ratio", 8.0), ("learning_rate", 1e-3),
                     ("gamma", 0.99), ("buffer_size", 4_194_304), ("learning_starts", 8192),
                     ("reward_scaling", 1.0)),
    description="Playground DM Control SAC default (GPU scale)."))

register(Preset(
    name="sac-dmc-cpu", agent="sac", env="CartpoleBalance",
    train=dataclasses.replace(_CPU_TRAIN, total_env_steps=64_000, num_chunks=4),
    agent_overrides=_CPU_COMMON + (("utd_ratio", 4.0), ("learning_rate", 1e-3),
                                   ("gamma", 0.99), ("tau", 0.05), ("init_alpha", 0.1),
                                   ("alpha_learning_rate", 1e-3)),
    description="SAC on DM Control, 2 CPU cores."))

register(Preset(
    name="fastdsac-gpu", agent="fastdsac", env="G1JoystickFlatTerrain",
    train=TrainConfig(num_envs=1024, unroll_length=1, total_env_steps=50_000_000,
                      num_chunks=20, num_eval_envs=128),
    agent_overrides=(("batch_size", 32_768), ("utd_ratio", 2.0), ("buffer_size", 10_485_760),
                     ("learning_starts", 102_400), ("q_clip", 10.0),
                     ("critic_obs_key", "privileged_state")),
    description="FastDSAC-A on Playground G1 joystick (GPU scale)."))

register(Preset(
    name="fastdsac-dmc-cpu", agent="fastdsac", env="CartpoleBalance", train=_CPU_TRAIN,
    agent_overrides=_CPU_COMMON + (("actor_hidden", (256, 256)), ("critic_hidden", (256, 256)),
                                   ("gamma", 0.99), ("policy_noise", 0.1), ("utd_ratio", 4.0)),
    description="FastDSAC-A on DM Control, 2 CPU cores."))

register(Preset(
    name="warpsac-l", agent="warpsac", env="CartpoleBalance",
    train=dataclasses.replace(_CPU_TRAIN, total_env_steps=64_000, num_chunks=4),
    # Normalized nets, twin C51 critics with clipped double Q and SWD as in -L, sized for 2
    # cores: a normalized gradient step costs ~15x a 128-wide MLP step at width 128 x 2 blocks,
    # so width 32 x 1 block (~64 steps/s); tau 0.05 and 3-step targets for fast value growth.
    agent_overrides=_CPU_COMMON + (("actor_hidden", (32,)), ("critic_hidden", (32,)),
                                   ("num_blocks", 1), ("gamma", 0.99), ("n_step", 3),
                                   ("utd_ratio", 4.0), ("tau", 0.05), ("learning_rate", 1e-3),
                                   ("swd_decay_steps", 80_000.0)),
    description="WarpSAC-L (normalized nets, twin Q, SWD), 2 CPU cores."))

register(Preset(
    name="warpsac-a", agent="warpsac", env="G1JoystickFlatTerrain",
    train=TrainConfig(num_envs=1024, unroll_length=1, total_env_steps=50_000_000,
                      num_chunks=20, num_eval_envs=128),
    agent_overrides=(("normalized_nets", False), ("num_q", 1), ("obs_dtype", "bfloat16"),
                     ("normalize_observations", True), ("actor_hidden", (256, 256)),
                     ("critic_hidden", (256, 256)), ("batch_size", 2048), ("utd_ratio", 2.0),
                     ("buffer_size", 10_485_760), ("learning_starts", 102_400),
                     ("swd_decay_steps", 2000.0), ("gamma", 0.97),
                     ("critic_obs_key", "privileged_state")),
    description="WarpSAC-A (no normalization, one Q, bf16 replay, SWD) (GPU scale)."))

register(Preset(
    name="warpsac-a-cpu", agent="warpsac", env="CartpoleBalance",
    train=dataclasses.replace(_CPU_TRAIN, total_env_steps=64_000, num_chunks=4),
    agent_overrides=_CPU_COMMON + (("normalized_nets", False), ("num_q", 1),
                                   ("obs_dtype", "bfloat16"),
                                   ("normalize_observations", True),
                                   ("actor_hidden", (256, 256)), ("critic_hidden", (256, 256)),
                                   ("swd_decay_steps", 2000.0), ("gamma", 0.99),
                                   ("utd_ratio", 4.0), ("tau", 0.05), ("learning_rate", 1e-3)),
    description="WarpSAC-A structure at CPU scale."))

register(Preset(
    name="sac-toy-cpu", agent="sac", env="PointMass1D",
    train=TrainConfig(num_envs=16, unroll_length=4, total_env_steps=8192, num_chunks=2,
                      num_eval_envs=8),
    agent_overrides=(("actor_hidden", (32, 32)), ("critic_hidden", (32, 32)),
                     ("buffer_size", 8192), ("learning_starts", 512), ("batch_size", 64)),
    description="SAC on the pure-JAX toy env: seconds to compile (tests, smoke runs)."))
