"""FPO presets.

`fpo-dmc-gpu` is the reference's Playground DM Control setting (`akanazawa/fpo`
`playground/scripts/train_fpo.py`, `FpoConfig`; FPO paper, arXiv 2507.21053, Sec. 5.1): 2048
envs, unroll 30, 32 minibatches of 1024 sequences (16 unrolls per update), 16 epochs, lr 3e-4,
clip 0.05, gamma 0.995, lambda 0.95, reward x10, N_mc 8, 10 Euler steps, 60M steps.
`fpo-dmc-cpu` is sized here for CartpoleBalance on 2 CPU cores (numbers in
`benchmarks/RESULTS.md`): the batch layout and learning-rate schedule of `ppo-dmc-cpu`, with the
FPO++ per-sample ratios and ASPO; vanilla FPO (averaged ratio, PPO clip) at this step size let
the pre-squash actions drift outward until the CFM losses overflowed, and at 3e-4 it did not
learn within 2M steps. `fpo-plus-locomotion-gpu` is FPO++'s IsaacLab locomotion recipe
(arXiv 2602.02481, Sec. 5) on Playground's Go1 joystick: per-sample ratios, ASPO, zero-sampling
evaluation, 64 integration steps, 3-layer MLPs (256 velocity, 768 critic), 4096 envs x 24 steps.
`fpo-twomodes-cpu` trains on the two-mode bandit `TwoModes` (the multimodality test) with the
plain velocity MSE: the epsilon-MSE weights the loss by t^2, so the velocity near the noise end,
which decides which mode a noise sample flows to, is barely trained, and one mode took all the
mass within 150 updates (both kept about half with `u_mse`; `benchmarks/RESULTS.md`).
"""

from jaxrl.configs.base import Preset, register
from jaxrl.engine.loop import TrainConfig

register(Preset(
    name="fpo-dmc-gpu", agent="fpo", env="CartpoleBalance",
    train=TrainConfig(num_envs=2048, unroll_length=30, unrolls_per_update=16,
                      total_env_steps=60_000_000, num_chunks=10, num_eval_envs=128),
    agent_overrides=(("num_minibatches", 32), ("num_epochs", 16), ("learning_rate", 3e-4),
                     ("gamma", 0.995), ("gae_lambda", 0.95), ("clipping_epsilon", 0.05),
                     ("reward_scaling", 10.0), ("num_mc", 8), ("flow_steps", 10),
                     ("gae_mode", "brax")),
    description="FPO reference, Playground DM Control (GPU scale)."))

register(Preset(
    name="fpo-dmc-cpu", agent="fpo", env="CartpoleBalance",
    train=TrainConfig(num_envs=256, unroll_length=32, unrolls_per_update=1,
                      total_env_steps=2_007_040, num_chunks=5, num_eval_envs=64),
    agent_overrides=(("value_hidden", (64, 64, 64)), ("num_minibatches", 8), ("num_epochs", 4),
                     ("learning_rate", 1e-3), ("anneal_lr", True), ("gamma", 0.97),
                     ("gae_lambda", 0.95), ("clipping_epsilon", 0.05), ("reward_scaling", 1.0),
                     ("normalize_after_sgd", True), ("obs_std_eps", 0.1), ("obs_clip", 5.0),
                     ("per_sample_ratio", True), ("trust_region", "aspo")),
    description="FPO on DM Control, 2 CPU cores."))

register(Preset(
    name="fpo-plus-locomotion-gpu", agent="fpo", env="Go1JoystickFlatTerrain",
    train=TrainConfig(num_envs=4096, unroll_length=24, unrolls_per_update=1,
                      total_env_steps=4096 * 24 * 1500, num_chunks=10, num_eval_envs=128),
    agent_overrides=(("policy_hidden", (256, 256, 256)), ("value_hidden", (768, 768, 768)),
                     ("value_obs_key", "privileged_state"), ("num_minibatches", 4),
                     ("num_epochs", 5), ("learning_rate", 1e-4), ("gamma", 0.99),
                     ("gae_lambda", 0.95), ("clipping_epsilon", 0.05), ("reward_scaling", 1.0),
                     ("flow_steps", 64), ("per_sample_ratio", True), ("trust_region", "aspo"),
                     ("zero_sampling_eval", True), ("max_grad_norm", 1.0)),
    description="FPO++ locomotion recipe on Go1 joystick (GPU scale)."))

register(Preset(
    name="fpo-twomodes-cpu", agent="fpo", env="TwoModes",
    train=TrainConfig(num_envs=256, unroll_length=4, total_env_steps=256 * 4 * 150,
                      num_chunks=3, num_eval_envs=16),
    agent_overrides=(("value_hidden", (32, 32)), ("num_minibatches", 4), ("num_epochs", 4),
                     ("learning_rate", 1e-3), ("gamma", 0.9), ("reward_scaling", 1.0),
                     ("normalize_observations", False), ("per_sample_ratio", True),
                     ("trust_region", "aspo"), ("cfm_loss", "u_mse")),
    description="FPO on the two-mode bandit (multimodality check, seconds)."))
