"""Robot presets: MuJoCo Playground locomotion and manipulation tasks, in GPU / CPU pairs.

PPO GPU presets are MuJoCo Playground's published Brax PPO settings, transcribed field by field
from `mujoco_playground/config/locomotion_params.py` and `manipulation_params.py`
(`brax_ppo_config(env_name)`, playground 0.2.0; `tests/agents/test_robot_presets.py` compares
them with the installed module). Brax names map to ours as follows: `num_timesteps` ->
`total_env_steps`, `num_evals` -> `num_chunks` (as many evaluations; Brax's first is before
training, ours are after each chunk), `batch_size *
num_minibatches / num_envs` -> `unrolls_per_update`, `num_updates_per_batch` -> `num_epochs`,
`discounting` -> `gamma`, `{policy,value}_hidden_layer_sizes` -> `{policy,value}_hidden`,
`{policy,value}_obs_key` -> the same names (the asymmetric critic reads `privileged_state`);
Brax's defaults fill the rest (`clipping_epsilon` 0.3, `gae_lambda` 0.95, no gradient clipping,
128 eval envs). Domain randomization is on (`domain_randomization="playground"`, the env's own
randomizer from Playground's registry) for the envs that have one (Go1, G1, T1, LEAP), as
Playground trains them (`learning/train_jax_ppo.py --domain_randomization`, the locomotion and
manipulation notebooks); PandaPickCube has none.

What these presets do not reproduce (our PPO cannot express it, or does it differently):
- `num_resets_per_eval`: Brax's auto-reset returns one cached start state per env slot and
  re-draws those every `num_resets_per_eval` evaluations; ours draws a fresh start (and, with
  randomization, a fresh model) at every reset, so there is nothing to set.
- Playground draws one randomized model per env slot for the whole run; ours re-draws it at
  every reset (`jaxrl.engine.randomization`).
- Truncation: our PPO bootstraps from V(final obs) (`gae_mode="bootstrap"`); Brax masks
  truncated steps (`gae_mode="brax"` for parity).
- Brax evaluates the stochastic policy by default (`deterministic_eval=False`); ours evaluates
  the deterministic one.

CPU presets keep each task's algorithm settings (networks, obs keys, gamma, learning rate,
entropy, clipping, randomization) and shrink only the batch: 64 envs (32 for the humanoids),
one unroll per update, 4 minibatches, 4 chunks (0.1-1M env steps in all) and 8 eval envs.
They are smoke-size (runs and tests), not tuned to learn there; an MJX robot program takes
minutes to compile on 2 CPU cores the first time (the second run loads it from the store).

Off-policy presets for Go1 joystick (flat):
- `fastdsac-go1-flat-gpu`: FastDSAC-A as released (`luge66/FastDSAC` `fast_dsac/hyperparams.py`,
  `MuJoCoPlaygroundArgs`; Go1 has no per-task class there, so the Playground defaults apply):
  1024 envs, 100,000 iterations (102.4M env steps), replay 10,240 per env (10,485,760 in
  all), batch 32,768, 2 critic steps per env step, actor every 2nd, tau 0.1, lr 3e-4 with
  AdamW weight decay 0.1, gamma 0.97, c = `policy_noise` 1e-3, DSAC-T `bias` 0.1, critic mean
  clamped to [-10, 10] (`v_min`/`v_max`), actor 512-256 / critic 1024-512 torsos
  (`hidden_dim` 512 / 1024, then halving), asymmetric critic (privileged state) as its
  Playground wrapper gives. The release trains without domain randomization
  (`use_domain_randomization=False`), so it is off here. Not expressible: the release learns
  from iteration 10 (10,240 transitions) with batches of 32,768 drawn with replacement; our
  replay needs `learning_starts >= batch_size`, so learning starts at 32,768 transitions
  (iteration 32), the smallest it accepts.
- `warpsac-a-go1-flat-gpu`: WarpSAC-A, the `playground` profile of `wzhhasadream/warprl`
  `config.py` (arXiv 2608.24479): 1024 envs, 50M steps, replay 10M (10,485,760 here: a whole
  number per env), start 100,000, batch 2048, 2 gradient steps per env step, gamma 0.97, SWD
  over 2,000 steps, bf16 replay observations, n-step 1, 50 eval envs; the `-A` structure
  (no normalized nets, one Q) as `configs/sac.py` `warpsac-a`. No domain randomization.
- `*-go1-flat-cpu`: the same agents at smoke size (32 envs, batch 256, 100k replay).
"""

from __future__ import annotations

import dataclasses

from jaxrl.configs.base import Preset, register
from jaxrl.engine.loop import TrainConfig

PRESET_NAMES: list[str] = []
"""Names of the presets this module registers, in registration order."""
_PRIVILEGED = (("policy_obs_key", "state"), ("value_obs_key", "privileged_state"))
_LOCO_NET = (("policy_hidden", (512, 256, 128)), ("value_hidden", (512, 256, 128)))


def _register(preset: Preset) -> None:
    register(preset)
    PRESET_NAMES.append(preset.name)


def playground_ppo(env: str, *, num_timesteps: int, num_evals: int, num_envs: int,
                   unroll_length: int, batch_size: int, num_minibatches: int,
                   num_updates_per_batch: int, discounting: float, learning_rate: float,
                   entropy_cost: float, clipping_epsilon: float = 0.3,
                   max_grad_norm: float | None = None, reward_scaling: float = 1.0,
                   randomize: bool = True, num_eval_envs: int = 128,
                   net: tuple = ()) -> tuple[TrainConfig, tuple]:
    """(TrainConfig, PPO overrides) from Brax PPO arguments named as Playground names them.

    Raises:
        ValueError: `batch_size * num_minibatches` is not a whole number of `num_envs` unrolls.
    """
    rows = batch_size * num_minibatches
    if rows % num_envs:
        raise ValueError(f"{env}: batch_size * num_minibatches = {rows} is not a multiple of "
                         f"num_envs = {num_envs}.")
    train = TrainConfig(num_envs=num_envs, unroll_length=unroll_length,
                        unrolls_per_update=rows // num_envs, total_env_steps=num_timesteps,
                        num_chunks=num_evals, num_eval_envs=num_eval_envs,
                        domain_randomization="playground" if randomize else None)
    agent = net + (("num_minibatches", num_minibatches), ("num_epochs", num_updates_per_batch),
                   ("learning_rate", learning_rate), ("gamma", discounting),
                   ("gae_lambda", 0.95), ("entropy_cost", entropy_cost),
                   ("clipping_epsilon", clipping_epsilon), ("reward_scaling", reward_scaling),
                   ("max_grad_norm", max_grad_norm), ("normalize_observations", True))
    return train, agent


def cpu_version(train: TrainConfig, agent: tuple, *, num_envs: int, unroll_length: int,
                total_env_steps: int, num_chunks: int) -> tuple[TrainConfig, tuple]:
    """The same algorithm at 2-core size: one unroll per update, 4 minibatches, 8 eval envs."""
    small = dataclasses.replace(train, num_envs=num_envs, unroll_length=unroll_length,
                                unrolls_per_update=1, total_env_steps=total_env_steps,
                                num_chunks=num_chunks, num_eval_envs=8)
    return small, tuple((k, 4 if k == "num_minibatches" else v) for k, v in agent)


def register_pair(stem: str, env: str, suite: str, train: TrainConfig, agent: tuple,
                  what: str, cpu: dict) -> None:
    """Registers `ppo-<stem>-gpu` (Playground's settings) and `ppo-<stem>-cpu`."""
    dr = " + domain randomization" if train.domain_randomization else ""
    _register(Preset(name=f"ppo-{stem}-gpu", agent="ppo", env=env, train=train,
                     agent_overrides=agent,
                     description=f"Playground PPO ({suite}_params), {what}{dr} (GPU scale)."))
    small, small_agent = cpu_version(train, agent, **cpu)
    _register(Preset(name=f"ppo-{stem}-cpu", agent="ppo", env=env, train=small,
                     agent_overrides=small_agent,
                     description=f"ppo-{stem}-gpu's settings at {small.num_envs} envs, "
                                 "2 CPU cores (smoke size)."))


_QUADRUPED_CPU = dict(num_envs=64, unroll_length=20, total_env_steps=64 * 20 * 40 * 4,
                      num_chunks=4)
_HUMANOID_CPU = dict(num_envs=32, unroll_length=20, total_env_steps=32 * 20 * 40 * 4,
                     num_chunks=4)


def _joystick(env: str, humanoid: bool):
    """locomotion_params: Go1 / G1 / T1 joystick (G1, T1: clip 0.2, entropy 5e-3, 20 evals)."""
    return playground_ppo(
        env, num_timesteps=200_000_000, num_evals=20 if humanoid else 10, num_envs=8192,
        unroll_length=20, batch_size=256, num_minibatches=32, num_updates_per_batch=4,
        discounting=0.97, learning_rate=3e-4, entropy_cost=5e-3 if humanoid else 1e-2,
        clipping_epsilon=0.2 if humanoid else 0.3, max_grad_norm=1.0,
        net=_LOCO_NET + _PRIVILEGED)


register_pair("go1-flat", "Go1JoystickFlatTerrain", "locomotion",
              *_joystick("Go1JoystickFlatTerrain", False), "Go1 joystick flat", _QUADRUPED_CPU)
register_pair("go1-rough", "Go1JoystickRoughTerrain", "locomotion",
              *_joystick("Go1JoystickRoughTerrain", False), "Go1 joystick rough",
              _QUADRUPED_CPU)
register_pair("g1-flat", "G1JoystickFlatTerrain", "locomotion",
              *_joystick("G1JoystickFlatTerrain", True), "G1 joystick flat", _HUMANOID_CPU)
register_pair("g1-rough", "G1JoystickRoughTerrain", "locomotion",
              *_joystick("G1JoystickRoughTerrain", True), "G1 joystick rough", _HUMANOID_CPU)
register_pair("t1-flat", "T1JoystickFlatTerrain", "locomotion",
              *_joystick("T1JoystickFlatTerrain", True), "T1 joystick flat", _HUMANOID_CPU)

# manipulation_params: `PandaPickCube*` branch (no randomizer in Playground's registry; the
# env's episode_length 150 and action_repeat 1 are its defaults).
register_pair("panda-pick", "PandaPickCube", "manipulation", *playground_ppo(
    "PandaPickCube", num_timesteps=20_000_000, num_evals=4, num_envs=2048, unroll_length=10,
    batch_size=512, num_minibatches=32, num_updates_per_batch=8, discounting=0.97,
    learning_rate=1e-3, entropy_cost=2e-2, randomize=False,
    net=(("policy_hidden", (32, 32, 32, 32)), ("value_hidden", (256,) * 5))),
    "Panda pick cube", dict(num_envs=64, unroll_length=10, total_env_steps=64 * 10 * 8 * 50 * 4,
                            num_chunks=4))

# manipulation_params: `LeapCubeRotateZAxis` (episode_length 500 at 20 Hz).
register_pair("leap-rotate", "LeapCubeRotateZAxis", "manipulation", *playground_ppo(
    "LeapCubeRotateZAxis", num_timesteps=100_000_000, num_evals=10, num_envs=8192,
    unroll_length=40, batch_size=256, num_minibatches=32, num_updates_per_batch=4,
    discounting=0.97, learning_rate=3e-4, entropy_cost=1e-2, net=_LOCO_NET + _PRIVILEGED),
    "LEAP hand cube rotation (z axis)", dict(num_envs=64, unroll_length=40,
                                             total_env_steps=64 * 40 * 20 * 4, num_chunks=4))

# ----- off-policy, Go1 joystick flat (sources in the module docstring) -------------------------

_FASTDSAC_GO1 = (("actor_hidden", (512, 256)), ("critic_hidden", (1024, 512)), ("gamma", 0.97),
                 ("tau", 0.1), ("learning_rate", 3e-4), ("alpha_learning_rate", 3e-4),
                 ("weight_decay", 0.1), ("policy_noise", 1e-3), ("dsac_b", 0.1),
                 ("q_clip", 10.0), ("utd_ratio", 2.0), ("policy_delay", 2),
                 ("critic_obs_key", "privileged_state"))
_register(Preset(
    name="fastdsac-go1-flat-gpu", agent="fastdsac", env="Go1JoystickFlatTerrain",
    train=TrainConfig(num_envs=1024, unroll_length=1, total_env_steps=102_400_000,
                      num_chunks=20, num_eval_envs=128),
    agent_overrides=_FASTDSAC_GO1 + (("batch_size", 32_768), ("buffer_size", 10_485_760),
                                     ("learning_starts", 32_768)),
    description="FastDSAC-A, released Playground defaults (luge66/FastDSAC) (GPU scale)."))
_register(Preset(
    name="fastdsac-go1-flat-cpu", agent="fastdsac", env="Go1JoystickFlatTerrain",
    train=TrainConfig(num_envs=32, unroll_length=4, total_env_steps=32 * 4 * 50 * 2,
                      num_chunks=2, num_eval_envs=8),
    agent_overrides=_FASTDSAC_GO1 + (("batch_size", 256), ("buffer_size", 100_000),
                                     ("learning_starts", 2048)),
    description="fastdsac-go1-flat-gpu's settings at smoke size (2 CPU cores)."))

_WARPSAC_A = (("normalized_nets", False), ("num_q", 1), ("obs_dtype", "bfloat16"),
              ("normalize_observations", True), ("actor_hidden", (256, 256)),
              ("critic_hidden", (256, 256)), ("utd_ratio", 2.0), ("swd_decay_steps", 2000.0),
              ("gamma", 0.97), ("n_step", 1), ("critic_obs_key", "privileged_state"))
_register(Preset(
    name="warpsac-a-go1-flat-gpu", agent="warpsac", env="Go1JoystickFlatTerrain",
    train=TrainConfig(num_envs=1024, unroll_length=1, total_env_steps=50_000_896,
                      num_chunks=20, num_eval_envs=50),
    agent_overrides=_WARPSAC_A + (("batch_size", 2048), ("buffer_size", 10_485_760),
                                  ("learning_starts", 100_000)),
    description="WarpSAC-A playground profile (arXiv 2608.24479) (GPU scale)."))
_register(Preset(
    name="warpsac-a-go1-flat-cpu", agent="warpsac", env="Go1JoystickFlatTerrain",
    train=TrainConfig(num_envs=32, unroll_length=4, total_env_steps=32 * 4 * 50 * 2,
                      num_chunks=2, num_eval_envs=8),
    agent_overrides=_WARPSAC_A + (("batch_size", 256), ("buffer_size", 100_000),
                                  ("learning_starts", 2048)),
    description="warpsac-a-go1-flat-gpu's settings at smoke size (2 CPU cores)."))
