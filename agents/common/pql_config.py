"""Settings of Parallel Q-Learning (`agents/pql.py`); defaults from `Improbable-AI/pql`
`cfg/algo/pql_algo.yaml` (Li et al., arXiv 2307.12983)."""

from __future__ import annotations

import dataclasses

from jaxrl.agents.common.offpolicy import ReplayConfig

HP_FIELDS = ("actor_learning_rate", "critic_learning_rate", "gamma", "tau", "reward_scaling")
HP_RANGES = {"actor_learning_rate": (0.0, 1.0), "critic_learning_rate": (0.0, 1.0),
             "gamma": (0.0, 1.0), "tau": (0.0, 1.0), "reward_scaling": (0.0, 1e6)}


@dataclasses.dataclass(frozen=True)
class PQLConfig(ReplayConfig):
    """PQL settings (defaults: `Improbable-AI/pql` `cfg/algo/pql_algo.yaml`). Float fields named
    in `HP_FIELDS` are traced (sweepable); everything else is static."""

    actor_hidden: tuple[int, ...] = (512, 256, 128)
    """Actor MLP widths (then `|A|` outputs and tanh)."""
    critic_hidden: tuple[int, ...] = (512, 256, 128)
    """Widths of each of the two critic MLPs on `concat(s, a)`."""
    activation: str = "elu"
    """Hidden activation."""
    batch_size: int = 8192
    """Transitions per critic step and observations per actor step (global, all devices)."""
    critic_updates_per_step: int = 8
    """Critic steps per vectorized env step (PQL's `critic_sample_ratio`, beta_a:v = 1:8)."""
    critic_updates_per_actor_update: int = 2
    """Critic steps per actor step (PQL's `critic_actor_ratio`, beta_p:v = 1:2)."""
    buffer_size: int = 5_000_000
    """Replay capacity in transitions (all envs together)."""
    learning_starts: int = 131_072
    """Transitions collected with uniform random actions before learning (PQL: 32 per env)."""
    n_step: int = 3
    """n-step returns (windows stop at episode ends; truncation bootstraps)."""
    sigma_min: float = 0.05
    """Exploration std of env 0 (mixed noise)."""
    sigma_max: float = 0.8
    """Exploration std of env N - 1 (mixed noise); equal to `sigma_min` for fixed noise."""
    target_noise: float = 0.8
    """Std of the target-action smoothing noise (TD3)."""
    target_noise_clip: float = 0.2
    """The smoothing noise is clipped to +-this."""
    normalize_observations: bool = True
    """Running mean/std observation normalization, the same function in every role."""
    obs_clip: float = 5.0
    """Normalized observations are clamped to +-this."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip of both optimizers."""
    weight_decay: float = 0.01
    """AdamW decoupled weight decay of both optimizers."""
    critic_type: str = "scalar"
    """`scalar` (PQL) or `categorical` (PQL-D)."""
    distributional_target: str = "lower_ce"
    """PQL-D target: `min_bce` (reference) or `lower_ce` (ours, see the module docstring)."""
    num_atoms: int = 51
    """PQL-D atoms."""
    v_min: float = -10.0
    """PQL-D lowest atom."""
    v_max: float = 10.0
    """PQL-D highest atom."""
    prob_eps: float = 1e-6
    """PQL-D (`min_bce`): probabilities are clipped to [eps, 1 - eps] inside the BCE."""
    schedule: str = "sync"
    """`sync` (newest parameters) or `pipelined` (every role reads the previous update's)."""
    layout: str = "single"
    """How PQL spreads one run over the run's `--num-devices` D devices: `single` (one device,
    or with D > 1 the data parallelism every agent gets), `data` (PQL's own: envs, replay and
    per-device batches sharded, gradients averaged; D divides num_envs and batch_size) or
    `role` (actor on device 0, learners on the others; D = 2 or 3, `schedule=pipelined`)."""
    obs_key: str = "state"
    """Key read by actor and critic when observations are dicts."""
    actor_learning_rate: float = 5e-4
    """Actor AdamW step size."""
    critic_learning_rate: float = 5e-4
    """Critic AdamW step size."""
    gamma: float = 0.99
    """Discount factor."""
    tau: float = 0.05
    """Target-critic EMA rate, applied after every critic step."""
    reward_scaling: float = 1.0
    """Rewards are multiplied by this in the critic target (PQL: 0.01 Ant, 1.0 ANYmal)."""

    @property
    def utd_ratio(self) -> float:
        """Critic steps per vectorized env step (the replay schedule's `utd_ratio`)."""
        return float(self.critic_updates_per_step)
