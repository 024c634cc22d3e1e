"""SAC with a scalar or a C51 critic, and WarpSAC / FlashSAC as a profile of it.

Sources: Haarnoja et al., "Soft Actor-Critic Algorithms and Applications" (arXiv 1812.05905),
Eqs. 5-7 (soft Q target and policy loss) and 18 (temperature); brax
`training/agents/sac/{train,losses}.py` for the defaults and the truncation mask
(`truncation="brax"`); C51 critics: Bellemare et al. 2017 (arXiv 1707.06887). The shared
machinery (actor, ensemble critics, temperature, replay schedule, exploration) is the
`jaxrl.agents.common.sac_core.SACCore` this agent holds; this file adds the critic losses.

n-step targets come from the buffer: windows stop at terminated/truncated steps and at the write
head; truncation bootstraps from the true final observation. `truncation="brax"` instead masks
truncated transitions out of the critic loss (parity with Brax, which drops them; n_step 1).

WarpSAC (Wu et al., arXiv 2608.24479, `wzhhasadream/warprl` `nnxrl/buffers/jax_buffer.py` for
Sample Weight Decay and `nnxrl/agents/flashsacnetwork.py`) is this SAC with other defaults
(`WarpSACConfig`, registered as `warpsac`): the `-L` profile, i.e. FlashSAC's normalized
networks with biases (Kim et al., arXiv 2604.04539, `leeyngdo/FlashSAC`
`flash_rl/agents/flashSAC/{layer,network,update}.py`), twin C51 critics on [-5, 5] with clipped
double Q, return-based reward normalization, zeta noise repetition and SWD over 80,000
vectorized steps. The `-A` profile (data-abundant parallel sim: normalization off, one critic,
bf16 replay observations, SWD over 2,000 steps) is a preset (`configs/sac.py`); the paper sets
`num_q = 1` there although the released GPU presets do not.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp

from jaxrl.agents.common.sac_config import HP_FIELDS, HP_INIT_ONLY, HP_RANGES, SACCoreConfig
from jaxrl.agents.common.sac_core import SACCore, SACState
from jaxrl.agents.common.sac_heads import ActorHead, CriticHead, gaussian_actor
from jaxrl.engine.checks import check_choice
from jaxrl.engine.contract import AgentBase
from jaxrl.learning import losses
from jaxrl.learning.returns import categorical_support


@dataclasses.dataclass(frozen=True)
class SACConfig(SACCoreConfig):
    """SAC settings: the SAC-family core's plus the critic head and the actor's log-std range."""

    critic_type: str = "scalar"
    """`scalar` (MSE to the soft TD target) or `categorical` (C51 cross-entropy)."""
    num_atoms: int = 101
    """Atoms of the categorical critic."""
    v_min: float = -10.0
    """Lowest atom of the categorical critic."""
    v_max: float = 10.0
    """Highest atom of the categorical critic."""
    log_std_min: float = -5.0
    """Lower bound of the actor log-std (tanh rescale)."""
    log_std_max: float = 2.0
    """Upper bound of the actor log-std (tanh rescale)."""


@dataclasses.dataclass(frozen=True)
class WarpSACConfig(SACConfig):
    """WarpSAC-L defaults: a profile of SAC (see the module docstring)."""

    actor_hidden: tuple[int, ...] = (256,)
    critic_hidden: tuple[int, ...] = (256,)
    normalized_nets: bool = True
    normalized_bias: bool = True
    num_blocks: int = 2
    critic_type: str = "categorical"
    num_atoms: int = 101
    v_min: float = -5.0
    v_max: float = 5.0
    num_q: int = 2
    batch_size: int = 512
    policy_delay: int = 2
    swd_decay_steps: float = 80_000.0
    normalize_observations: bool = False
    log_std_min: float = -10.0
    log_std_max: float = 2.0
    target_entropy: str = "flash"
    reward_normalization: bool = True
    noise_repeat: bool = True
    lr_schedule: str = "cosine"
    lr_final_fraction: float = 0.1
    learning_rate: float = 3e-4
    alpha_learning_rate: float = 3e-4
    tau: float = 0.005
    init_alpha: float = 0.01


@dataclasses.dataclass(frozen=True)
class SAC(AgentBase):
    """Soft actor-critic (off-policy) with a scalar or categorical critic ensemble; the
    machinery is the `SACCore` it holds (`core`)."""

    config: SACConfig
    HP_FIELDS: ClassVar = HP_FIELDS
    HP_RANGES: ClassVar = HP_RANGES
    HP_INIT_ONLY: ClassVar = HP_INIT_ONLY
    on_policy: ClassVar[bool] = False
    explores: ClassVar[bool] = True
    has_replay: ClassVar[bool] = True

    @property
    def core(self) -> SACCore:
        """The SAC-family core with the tanh-Gaussian actor and this file's critic."""
        c = self.config
        bounds = (c.log_std_min, c.log_std_max)
        return SACCore(c, self.spec, self.train,
                       ActorHead(gaussian_actor(c, self.spec.action_size, bounds), bounds),
                       CriticHead(self.critic_loss, c.critic_type, c.num_atoms, self.q_values))

    def validate(self) -> None:
        """The critic's checks, `AgentBase`'s, then the core's (`SACCore.validate`)."""
        c = self.config
        check_choice("critic_type", c.critic_type, ("scalar", "categorical"))
        if c.critic_type == "categorical" and not (c.v_min < c.v_max and c.num_atoms >= 2):
            raise ValueError(f"categorical critic needs v_min < v_max and num_atoms >= 2, got "
                             f"v_min={c.v_min}, v_max={c.v_max}, num_atoms={c.num_atoms}.")
        super().validate()
        self.core.validate()

    def init(self, key, hp) -> SACState:
        return self.core.init(key, hp)

    def act(self, state: SACState, obs, key, deterministic: bool = False):
        return self.core.act(state, obs, key, deterministic)

    def init_explore(self, key, num_envs: int):
        return self.core.init_explore(key, num_envs)

    def explore(self, state: SACState, obs, key, carry, done):
        return self.core.explore(state, obs, key, carry, done)

    def update(self, state: SACState, traj, key):
        return self.core.update(state, traj, key)

    def q_values(self, out):
        """Expected value per head `[E, ...]`: the scalar output, or the C51 mean."""
        if self.config.critic_type == "categorical":
            z = categorical_support(self.config.v_min, self.config.v_max, self.config.num_atoms)
            return jnp.sum(jax.nn.softmax(out, axis=-1) * z, axis=-1)
        return out[..., 0]

    def critic_loss(self, critic_params, state: SACState, batch, key):
        """Soft TD loss with the ensemble reduced by `q_agg` in the target: MSE
        (`losses.soft_q_loss`, scalar) or C51 cross-entropy summed over heads (categorical)."""
        c, core = self.config, self.core
        if c.critic_type != "categorical":
            loss, out, variables, _ = core.scalar_critic_loss(critic_params, state, batch, key)
        else:
            next_a, alpha_logp = core.next_action(state, batch, key)
            out, tgt, variables = core.critic_outputs(critic_params, state, batch, next_a)
            reward = core.scaled_reward(state, batch.reward)
            mask = 1.0 - batch.truncated if c.truncation == "brax" else jnp.ones_like(reward)
            target = losses.categorical_td_target(tgt, reward, batch.discount, alpha_logp,
                                                  c.v_min, c.v_max, c.q_agg)
            loss = losses.categorical_cross_entropy(out, target, mask)
        metrics = {"train/critic_loss": loss, "train/q_mean": self.q_values(out).mean()}
        return loss, (metrics, variables, {})
