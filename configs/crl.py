"""Contrastive RL presets: CRL (JaxGCRL settings on GPU, small runs on CPU) and CPPO.

GPU presets follow JaxGCRL's `scripts/train.sh`: 512 envs, unroll 62, batch 256, lr 3e-4,
representation 64, 256 x 2 encoders, `distance` energy, 10M env steps, replay 10,000 rows per
env, prefill 1,000 rows, and its actor init (`actor_init_scale` 1/3). JaxGCRL takes
`num_envs * (episode_length - 1) / batch_size` gradient steps per collect of
`unroll_length * num_envs` steps; with 512 envs, episode length 1000 and batch 256 that is 1998
steps per 62 vectorized steps, i.e. `utd_ratio = 1998 / 62`. CPU presets are sized to learn
on 2 cores (budgets in `benchmarks/RESULTS.md`); the maze and CPPO ones share the settings found
on `DetourMaze` (critic learning rate 1e-3, CRL's `random_goals` 0.5, CPPO's baseline over 32
policy actions on the maze; RESULTS, "Contrastive agents on DetourMaze", "Actor goals from
other trajectories" and "CPPO's baseline"). The CPPO maze presets floor the policy's log-std at
-1: at CPPO's default -2 the std collapsed early on some seeds and machines, which then sat at
half the success (`PointMaze`) or under 0.45 (`DetourMaze` seed 2); with -1 the three
`DetourMaze` seeds peak at 0.71-0.77 over 6.4M env steps (RESULTS, "CPPO across seeds and
CPUs"). `cppo-detourmaze-cpu` runs 10.24M (26 minutes of training alone on 2 cores, measured
before the matmul distance energy made CPPO's training 1.4x faster): seeds 0-2 peak at 0.91 /
0.75 / 0.80 with the mode, 0.93-0.95 at the end with sampled actions (RESULTS, "CPPO with
10.24M env steps", "Why success drifts on `DetourMaze`"). `crl-detourmaze-cpu`'s encoders are 8
layers of 128 with a residual every 2 (Wang et al. 2025, "1000 Layer Networks for
Self-Supervised RL"): with 2 layers the mode drifted to 0.61-0.79 over its 2.4M steps on seeds
0-5, with 8 it ends at 0.79-0.89 (RESULTS, "Deeper encoders keep CRL's mode going").
"""

from jaxrl.configs.base import Preset, register
from jaxrl.engine.loop import TrainConfig

_JAXGCRL = (("batch_size", 256), ("learning_rate", 3e-4), ("critic_learning_rate", 3e-4),
            ("alpha_learning_rate", 3e-4), ("gamma", 0.99), ("contrastive_loss", "bwd_infonce"),
            ("energy", "distance"), ("utd_ratio", 1998 / 62), ("buffer_size", 10_000 * 512),
            ("learning_starts", 1000 * 512), ("actor_init_scale", 1 / 3))


_JAXGCRL_TRAIN = TrainConfig(num_envs=512, unroll_length=62, total_env_steps=10_000_000,
                             num_chunks=50, num_eval_envs=256)

for _env in ("AntGoal", "PusherGoal", "ReacherGoal"):
    register(Preset(
        name=f"crl-{_env.removesuffix('Goal').lower()}", agent="crl", env=_env,
        train=_JAXGCRL_TRAIN, agent_overrides=_JAXGCRL,
        description=f"CRL on {_env} with JaxGCRL's train.sh settings (GPU scale)."))


def _replace(overrides: tuple, **changes) -> tuple:
    """`overrides` with the values of the keys in `changes` replaced, order kept."""
    return tuple((k, changes.get(k, v)) for k, v in overrides)


_CRL_MAZE = (("hidden", (128, 128)), ("actor_hidden", (128, 128)), ("layer_norm", True),
             ("batch_size", 256), ("utd_ratio", 1.0), ("learning_starts", 6_400),
             ("learning_rate", 1e-3), ("critic_learning_rate", 1e-3), ("actor_init_scale", 1.0),
             ("random_goals", 0.5))
"""The CPU maze presets' CRL settings (found on `DetourMaze`; lecun actor init, as measured;
half of each actor batch on other pairs' goals, Eysenbach et al.'s `random_goals`)."""

register(Preset(
    name="crl-pointmaze-cpu", agent="crl", env="PointMaze",
    train=TrainConfig(num_envs=64, unroll_length=10, total_env_steps=120_000, num_chunks=3,
                      num_eval_envs=256),
    agent_overrides=_CRL_MAZE + (("buffer_size", 120_000),),
    description="CRL on the pure-JAX point maze, 2 CPU cores (tests)."))

register(Preset(
    name="crl-reacher-cpu", agent="crl", env="ReacherGoal",
    train=TrainConfig(num_envs=64, unroll_length=10, total_env_steps=180_000, num_chunks=3,
                      num_eval_envs=128),
    agent_overrides=(("hidden", (128, 128)), ("actor_hidden", (128, 128)), ("batch_size", 256),
                     ("utd_ratio", 4.0), ("buffer_size", 180_000), ("learning_starts", 6_400),
                     ("learning_rate", 1e-3), ("critic_learning_rate", 1e-3)),
    description="CRL on the Brax reacher goal task, 2 CPU cores (tests)."))

register(Preset(
    name="crl-detourmaze-cpu", agent="crl", env="DetourMaze",
    train=TrainConfig(num_envs=64, unroll_length=10, total_env_steps=2_400_000, num_chunks=8,
                      num_eval_envs=256),
    agent_overrides=_replace(_CRL_MAZE, hidden=(128,) * 8)
    + (("skip_connections", 2), ("buffer_size", 1_000_000)),
    description="CRL on the detour maze (goals behind walls), 8-layer residual encoders, "
                "2 CPU cores."))

_CPPO_CPU = (("hidden", (128, 128)), ("actor_hidden", (128, 128)), ("critic_batch_size", 256),
             ("critic_epochs", 2), ("num_epochs", 4), ("num_minibatches", 8), ("gamma", 0.97),
             ("learning_rate", 3e-4), ("critic_learning_rate", 1e-3))
_CPPO_MAZE = _CPPO_CPU + (("log_std_min", -1.0),)  # the log-std floor; module docstring

register(Preset(
    name="cppo-pointmaze-cpu", agent="cppo", env="PointMaze",
    train=TrainConfig(num_envs=64, unroll_length=50, total_env_steps=240_000, num_chunks=3,
                      num_eval_envs=256),
    agent_overrides=_CPPO_MAZE,
    description="CPPO (our reconstruction) on the pure-JAX point maze, 2 CPU cores (tests)."))

register(Preset(
    name="cppo-detourmaze-cpu", agent="cppo", env="DetourMaze",
    train=TrainConfig(num_envs=64, unroll_length=100, total_env_steps=10_240_000,
                      num_chunks=16, num_eval_envs=256),
    agent_overrides=_replace(_CPPO_MAZE, num_epochs=2)
    + (("clipping_epsilon", 0.1), ("num_action_samples", 32)),
    description="CPPO (our reconstruction) on the detour maze (goals behind walls), 2 CPU cores."))

register(Preset(
    name="cppo-reacher-cpu", agent="cppo", env="ReacherGoal",
    train=TrainConfig(num_envs=64, unroll_length=50, total_env_steps=2_016_000, num_chunks=10,
                      num_eval_envs=128),
    agent_overrides=_CPPO_CPU,
    description="CPPO (our reconstruction) on the Brax reacher goal task, 2 CPU cores."))

register(Preset(
    name="cppo-ant", agent="cppo", env="AntGoal",
    train=TrainConfig(num_envs=2048, unroll_length=128, total_env_steps=100_000_000,
                      num_chunks=50, num_eval_envs=256),
    agent_overrides=(("critic_batch_size", 1024), ("critic_epochs", 2), ("num_epochs", 4),
                     ("num_minibatches", 32)),
    description="CPPO (our reconstruction) on Ant goal reaching (GPU scale, untuned)."))
