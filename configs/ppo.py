"""PPO presets.

`ppo-dmc-gpu` is Playground's DM Control default (`mujoco_playground/config/
dm_control_suite_params.py`): 2048 envs, unroll 30, batch 1024 x 32 minibatches (16 unrolls per
update), 16 epochs, lr 1e-3, gamma 0.995, reward scaling 10, 60M nominal steps.
`ppo-dmc-cpu` is tuned here for CartpoleBalance on 2 CPU cores (8 sweeps of 4 members each,
run with our own vmapped sweep mode; notes in `benchmarks/RESULTS.md`). What mattered, from
Brax's DMC defaults: a small batch (256 envs x 32 steps) with 32 Adam steps per batch instead of
512 per ~1M steps; a 64x3 value net (the 256x5 one makes the update 5x slower on CPU);
gamma 0.97 instead of 0.995 and unscaled rewards; a larger entropy bonus (3e-2) because the
policy std otherwise collapses and the policy oscillates; linear learning-rate annealing so the
final policy settles; normalizer updated after SGD with `std_eps` 0.1 and clipping at 5, since
the first batches see a nearly constant pole angle and later falls were normalized to +-50.
"""

from jaxrl.configs.base import Preset, register
from jaxrl.engine.loop import TrainConfig

register(Preset(
    name="ppo-dmc-gpu", agent="ppo", env="CartpoleBalance",
    train=TrainConfig(num_envs=2048, unroll_length=30, unrolls_per_update=16,
                      total_env_steps=60_000_000, num_chunks=10, num_eval_envs=128),
    agent_overrides=(("num_minibatches", 32), ("num_epochs", 16), ("learning_rate", 1e-3),
                     ("gamma", 0.995), ("gae_lambda", 0.95), ("entropy_cost", 1e-2),
                     ("clipping_epsilon", 0.3), ("reward_scaling", 10.0)),
    description="Playground DM Control default (GPU scale)."))

_DMC_CPU = (("value_hidden", (64, 64, 64)), ("num_minibatches", 8), ("num_epochs", 4),
            ("learning_rate", 1e-3), ("anneal_lr", True), ("gamma", 0.97), ("gae_lambda", 0.95),
            ("entropy_cost", 3e-2), ("clipping_epsilon", 0.2), ("reward_scaling", 1.0),
            ("normalize_after_sgd", True), ("obs_std_eps", 0.1), ("obs_clip", 5.0))

register(Preset(
    name="ppo-dmc-cpu", agent="ppo", env="CartpoleBalance",
    train=TrainConfig(num_envs=256, unroll_length=32, unrolls_per_update=1,
                      total_env_steps=5_000_000, num_chunks=10, num_eval_envs=64),
    agent_overrides=_DMC_CPU,
    description="DM Control tuned for 2 CPU cores (README default)."))

register(Preset(
    name="ppo-locomotion-gpu", agent="ppo", env="Go1JoystickFlatTerrain",
    train=TrainConfig(num_envs=8192, unroll_length=20, unrolls_per_update=1,
                      total_env_steps=200_000_000, num_chunks=10, num_eval_envs=128),
    agent_overrides=(("policy_hidden", (512, 256, 128)), ("value_hidden", (512, 256, 128)),
                     ("value_obs_key", "privileged_state"), ("num_minibatches", 32),
                     ("num_epochs", 4), ("learning_rate", 3e-4), ("gamma", 0.97),
                     ("gae_lambda", 0.95), ("entropy_cost", 1e-2), ("clipping_epsilon", 0.3),
                     ("reward_scaling", 1.0), ("max_grad_norm", 1.0)),
    description="Playground locomotion joystick default (GPU scale)."))

register(Preset(
    name="ppo-toy-cpu", agent="ppo", env="PointMass1D",
    train=TrainConfig(num_envs=64, unroll_length=16, total_env_steps=200_000, num_chunks=4,
                      num_eval_envs=32),
    agent_overrides=(("policy_hidden", (32, 32)), ("value_hidden", (32, 32)),
                     ("num_minibatches", 4), ("num_epochs", 4), ("learning_rate", 3e-3),
                     ("gamma", 0.95), ("reward_scaling", 1.0), ("entropy_cost", 1e-3)),
    description="Pure-JAX toy env: seconds to compile (tests, smoke runs)."))

register(Preset(
    name="ppo-twomodes-cpu", agent="ppo", env="TwoModes",
    train=TrainConfig(num_envs=256, unroll_length=4, total_env_steps=256 * 4 * 150,
                      num_chunks=3, num_eval_envs=16),
    agent_overrides=(("policy_hidden", (32, 32)), ("value_hidden", (32, 32)),
                     ("num_minibatches", 4), ("num_epochs", 4), ("learning_rate", 1e-3),
                     ("gamma", 0.9), ("reward_scaling", 1.0), ("normalize_observations", False)),
    description="Gaussian PPO on the two-mode bandit (the flow policies' comparison)."))

register(Preset(
    name="ppo-goal-dense-cpu", agent="ppo", env="DetourMazeDense",
    train=TrainConfig(num_envs=256, unroll_length=32, unrolls_per_update=1,
                      total_env_steps=6_400_000, num_chunks=10, num_eval_envs=256),
    agent_overrides=tuple((k, 0.99 if k == "gamma" else v) for k, v in _DMC_CPU),
    description="PPO with the dense reward -distance on the goal envs' Dense variants "
                "(baseline for the reward-free agents; ppo-dmc-cpu with gamma 0.99), 2 CPU cores."))
