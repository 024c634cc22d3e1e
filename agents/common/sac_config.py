"""Settings shared by every SAC-family agent (`jaxrl.agents.common.sac_core.SACCore`)."""

from __future__ import annotations

import dataclasses

from jaxrl.agents.common.offpolicy import ReplayConfig

HP_FIELDS = ("learning_rate", "alpha_learning_rate", "gamma", "tau", "reward_scaling",
             "init_alpha")
HP_RANGES = {"learning_rate": (0.0, 1.0), "alpha_learning_rate": (0.0, 1.0),
             "gamma": (0.0, 1.0), "tau": (0.0, 1.0), "reward_scaling": (0.0, 1e6),
             "init_alpha": (1e-12, 1e6)}
HP_INIT_ONLY = ("init_alpha",)
"""Read only by `init` (the initial temperature): population-based training cannot change it."""
TARGET_ENTROPY = ("brax", "action_dim", "zero", "flash")


@dataclasses.dataclass(frozen=True)
class SACCoreConfig(ReplayConfig):
    """Settings every SAC-family agent shares. Float fields named in `HP_FIELDS` are traced
    (sweepable) defaults; everything else is static (changes shapes or program structure)."""

    actor_hidden: tuple[int, ...] = (256, 256)
    """Actor torso widths (`normalized_nets`: the encoder width is the first entry)."""
    critic_hidden: tuple[int, ...] = (256, 256)
    """Critic torso widths (`normalized_nets`: the encoder width is the first entry)."""
    activation: str = "relu"
    """Hidden activation of the MLP torsos."""
    layer_norm: bool = False
    """LayerNorm before each MLP activation."""
    normalized_nets: bool = False
    """FlashSAC normalized networks: input BatchNorm, unit-norm linears re-projected after each
    step, BN inverted-residual blocks, final RMSNorm, cross-batch BN in the critic update."""
    num_blocks: int = 2
    """Residual blocks of the normalized encoder (`normalized_nets`)."""
    normalized_bias: bool = False
    """Biases in the normalized encoder's linears (FlashSAC: off; WarpSAC: on)."""
    num_q: int = 2
    """Critic ensemble size (2 = clipped double Q with `q_agg=min`)."""
    q_agg: str = "min"
    """How the ensemble is reduced for targets and the actor: `min` or `mean`."""
    utd_ratio: float = 1.0
    """Gradient steps per vectorized env step (FastTD3's `num_updates`); an update call takes
    `utd_ratio * unroll_length * unrolls_per_update` steps, which must be a whole number."""
    policy_delay: int = 1
    """Actor and temperature step every this many critic steps."""
    n_step: int = 1
    """n-step targets (windows stop at episode ends and at the write head)."""
    swd_decay_steps: float = 0.0
    """Sample Weight Decay horizon D in vectorized env steps (WarpSAC); 0 samples uniformly."""
    swd_min_weight: float = 0.1
    """Floor of the SWD weight."""
    obs_dtype: str = "float32"
    """Replay storage dtype of observations: `float32` or `bfloat16`."""
    normalize_observations: bool = True
    """Running mean/std observation normalization (ignored with `normalized_nets`, whose input
    BatchNorm normalizes)."""
    target_entropy: str = "brax"
    """`brax` (-0.5 |A|), `action_dim` (-|A|), `zero`, `flash` (0.5 |A| log(2 pi e 0.15^2))."""
    reward_normalization: bool = False
    """Divide rewards by the return-based scale of SimbaV2 / FlashSAC (`reward_scaling`)."""
    noise_repeat: bool = False
    """Zeta noise repetition: hold each env's Gaussian noise for k ~ k^-2 steps (FlashSAC)."""
    noise_scale_range: tuple[float, float] | None = None
    """Mixed exploration: per-env multipliers of the policy std drawn from this range and
    redrawn when the env resets (FastDSAC-B uses (0.01, 2.0)); None disables."""
    truncation: str = "bootstrap"
    """`bootstrap` from the true final obs, or `brax` (mask truncated steps, n_step 1)."""
    lr_schedule: str = "constant"
    """`constant` or `cosine` (to `lr_final_fraction` of the start over the run)."""
    lr_final_fraction: float = 0.1
    """Final learning-rate fraction of the cosine schedule."""
    weight_decay: float = 0.0
    """Decoupled weight decay of the actor and critic optimizers (AdamW)."""
    policy_obs_key: str = "state"
    """Key read by the actor when observations are dicts."""
    critic_obs_key: str = "state"
    """Key read by the critic when observations are dicts."""
    learning_rate: float = 1e-3
    """Actor and critic step size (Brax SAC / Playground: 1e-3)."""
    alpha_learning_rate: float = 3e-4
    """Temperature step size."""
    gamma: float = 0.99
    """Discount factor."""
    tau: float = 0.005
    """Target-network EMA rate per critic step."""
    reward_scaling: float = 1.0
    """Rewards are multiplied by this in the critic target."""
    init_alpha: float = 1.0
    """Initial temperature."""
