"""SAC Flow: soft actor-critic with a flow-matching actor (Flow-G gated or Flow-T decoder
velocity cells), trained by backpropagating the SAC actor loss through all K Euler steps.

Sources: Zhang et al., "SAC Flow: Sample-Efficient Reinforcement Learning of Flow-Based Policies
via Velocity-Reparameterized Sequential Modeling" (arXiv 2509.25756); `Elessar123/SAC-FLOW`
`from_scratch_code/SAC_flow_gru_jax.py` (Flow-G) and `SAC_flow_transformer_jax.py` (Flow-T).
The cells, the noisy Euler rollout and the path log-likelihood are `jaxrl.learning.flow_cells`;
the SAC machinery (twin critics, temperature, target EMA, replay schedule, observation
normalization) is the `jaxrl.agents.common.sac_core.SACCore` it holds.

- Actor: `a = tanh(A_K)` after K noisy Euler steps from `A_0 ~ N(0, I)`; `log pi` is the
  likelihood of the whole noise path (the entropy surrogate of the paper, not the marginal
  action density). Actor loss `mean(alpha log pi - min_i Q_i(s, a))`, reparameterized through
  every step; the temperature targets `target_entropy` with that `log pi` (released: 0).
- Critic: scalar ensemble, `0.5 mean((Q_i - y)^2)` per head with the soft TD target
  `y = r + gamma^n (1 - d)(min_i Q'_i(s', a') - alpha log pi(a'|s'))` (as `agents/sac.py`).
- Deterministic action (evaluation, export): `A_0 = 0`, no injected noise, the same K steps.
- Exploration: a fresh noise path per env step (zeta noise repetition is not supported);
  `noise_scale_range` multiplies every noise of the path.
- Learning rates: the critic steps with `learning_rate` (the released q lr 1e-3), the actor with
  `actor_learning_rate` (released policy lr 3e-4); a cosine schedule scales both.

Differences from the release (a CrossQ base): no BatchRenorm and no joint `(s, a), (s', a')`
critic forward; a target critic with EMA `tau` instead of `tau = 1` without target; Adam with
the default `b1 = 0.9` (released 0.5); LayerNorm in the Flow-T decoder; running-statistics
observation normalization in place of the actor's input BatchRenorm; the critic loss averages
over the heads (the release sums them: twice the critic gradient).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp

from jaxrl.agents.common.sac_config import HP_FIELDS, HP_INIT_ONLY, HP_RANGES, SACCoreConfig
from jaxrl.agents.common.sac_core import SACCore, SACState
from jaxrl.agents.common.sac_heads import ActorHead, CriticHead
from jaxrl.engine.checks import check_choice
from jaxrl.engine.contract import AgentBase
from jaxrl.learning import exploration
from jaxrl.learning import flow_cells as cells
from jaxrl.learning.networks import ACTIVATIONS


@dataclasses.dataclass(frozen=True)
class FlowSACConfig(SACCoreConfig):
    """SAC Flow settings: the SAC-family core's plus the flow actor. Defaults: the released
    Flow-G actor, target entropy 0 and alpha 0.2; the rest is the core's (see
    `configs/flow_sac.py` for the released CrossQ-style training settings)."""

    flow_cell: str = "gate"
    """Velocity cell: `gate` (Flow-G) or `decoder` (Flow-T)."""
    flow_steps: int = 4
    """K, Euler steps of the rollout (dt = 1/K)."""
    actor_hidden: tuple[int, ...] = (512,)
    """Flow-G: hidden widths of the gate and candidate MLPs (each then a linear layer to |A|;
    released: one hidden layer of 512, i.e. a 2-layer MLP)."""
    log_std_hidden: tuple[int, ...] = (512, 512)
    """Flow-G: hidden widths of the log-std MLP on the observation (ReLU; released 512-512)."""
    time_embedding_dim: int = 32
    """Flow-G: sinusoidal time-embedding size (then Dense 2x swish Dense 1x)."""
    flow_activation: str = "silu"
    """Flow-G: activation of the gate, candidate and time MLPs (released: swish = silu)."""
    d_model: int = 96
    """Flow-T: decoder width (released run setting; the released class default is 64)."""
    num_heads: int = 4
    """Flow-T: attention heads (must divide `d_model`)."""
    num_layers: int = 2
    """Flow-T: decoder layers."""
    flow_t_logprob: str = "jacobian"
    """Flow-T step log-prob: `jacobian` (the step density, with `-sum log(dt sigma)`) or
    `as_released` (only `log N(xi; 0, 1)` per step). Flow-G always uses its step density."""
    log_std_min: float = -5.0
    """Lower bound of the per-step noise log-std (tanh rescale)."""
    log_std_max: float = 2.0
    """Upper bound of the per-step noise log-std (tanh rescale)."""
    target_entropy: str = "zero"
    """Temperature target on the path log-likelihood (released: 0)."""
    init_alpha: float = 0.2
    """Initial temperature (released: 0.2)."""
    actor_learning_rate: float = 3e-4
    """Actor step size (released policy lr 3e-4); `learning_rate` is the critic's."""


@dataclasses.dataclass(frozen=True)
class FlowSAC(AgentBase):
    """SAC with a flow actor (off-policy): see the module docstring. The SAC machinery is the
    `SACCore` it holds (`core`) with the flow policy as its actor head."""

    config: FlowSACConfig
    HP_FIELDS: ClassVar = HP_FIELDS + ("actor_learning_rate",)
    HP_RANGES: ClassVar = dict(HP_RANGES, actor_learning_rate=(0.0, 1.0))
    HP_INIT_ONLY: ClassVar = HP_INIT_ONLY
    on_policy: ClassVar[bool] = False
    explores: ClassVar[bool] = True
    has_replay: ClassVar[bool] = True

    @property
    def core(self) -> SACCore:
        """The SAC-family core with the flow actor and the scalar critic."""
        c = self.config
        actor = ActorHead(self.actor_net, (c.log_std_min, c.log_std_max),
                          policy=self.flow_policy, learning_rate=self.actor_learning_rate)
        return SACCore(c, self.spec, self.train, actor, CriticHead(self.critic_loss))

    def validate(self) -> None:
        """Raises ValueError (before compiling) for bad flow settings, then `AgentBase`'s and the
        core's checks."""
        c = self.config
        if isinstance(c.flow_steps, bool) or int(c.flow_steps) != c.flow_steps or \
                c.flow_steps <= 0:
            raise ValueError(f"flow_steps (K Euler steps) must be a positive integer, got "
                             f"{c.flow_steps!r}.")
        check_choice("flow_cell", c.flow_cell, cells.CELLS)
        check_choice("flow_t_logprob", c.flow_t_logprob, cells.FLOW_T_LOG_PROBS)
        check_choice("flow_activation", c.flow_activation, tuple(ACTIVATIONS))
        if c.flow_cell == "decoder" and not (c.d_model > 0 and c.num_heads > 0 and
                                             c.d_model % c.num_heads == 0 and
                                             c.d_model % 4 == 0 and c.num_layers > 0):
            raise ValueError(f"flow_cell='decoder' needs d_model a positive multiple of 4 and "
                             f"of num_heads, and num_layers > 0; got d_model={c.d_model}, "
                             f"num_heads={c.num_heads}, num_layers={c.num_layers}.")
        if c.flow_cell == "gate" and not (c.time_embedding_dim >= 4 and
                                          c.time_embedding_dim % 2 == 0):
            raise ValueError(f"time_embedding_dim must be even and >= 4, got "
                             f"{c.time_embedding_dim}.")
        if c.normalized_nets:
            raise ValueError("flow_sac does not support normalized_nets (the flow cells have "
                             "no FlashSAC encoder); use normalize_observations.")
        if c.noise_repeat:
            raise ValueError("flow_sac draws a fresh noise path per step: noise_repeat (zeta "
                             "noise) is not supported.")
        super().validate()
        self.core.validate()

    # ----- the flow actor ----------------------------------------------------------------
    @property
    def actor_net(self):
        """The velocity cell (`flow_cells.GatedVelocity` or `DecoderVelocity`)."""
        c, a = self.config, self.spec.action_size
        lo, hi = c.log_std_min, c.log_std_max
        if c.flow_cell == "decoder":
            return cells.DecoderVelocity(a, c.d_model, c.num_heads, c.num_layers, lo, hi)
        return cells.GatedVelocity(a, tuple(c.actor_hidden), tuple(c.log_std_hidden),
                                   c.time_embedding_dim, c.flow_activation, lo, hi)

    def flow_policy(self, actor_vars, obs) -> cells.FlowPolicy:
        """The noise-path policy (`flow_cells.FlowPolicy`) at prepared `obs`."""
        c = self.config
        jacobian = c.flow_cell == "gate" or c.flow_t_logprob == "jacobian"
        return cells.FlowPolicy(variables=actor_vars, obs=obs, cell=self.actor_net,
                                num_steps=int(c.flow_steps), jacobian=jacobian)

    def export_info(self) -> dict:
        """What the exported deterministic policy computes (for the export sidecar)."""
        c = self.config
        return {"policy": "flow", "agent": "flow_sac", "flow_cell": c.flow_cell,
                "integration_steps": int(c.flow_steps), "sampler": "euler",
                "deterministic": True, "initial_noise": "zeros", "step_noise": "none",
                "squash": "tanh"}

    def act(self, state, obs, key, deterministic: bool = False):
        """Action in [-1, 1] `[N, A]`: the noise-free rollout when deterministic, else a path
        sample (uniform during warm-up)."""
        core = self.core
        dist = self.flow_policy(state.params["actor"],
                                core.prepare_obs(state, obs, self.config.policy_obs_key))
        if deterministic:
            return dist.mode(), {}
        action, _ = dist.sample_and_log_prob(key)
        return core.replay.random_warmup(state, key, action), {}

    def init(self, key, hp) -> SACState:
        return self.core.init(key, hp)

    def init_explore(self, key, num_envs: int):
        return self.core.init_explore(key, num_envs)

    def update(self, state: SACState, traj, key):
        return self.core.update(state, traj, key)

    def explore(self, state, obs, key, carry, done):
        """Behaviour action from a fresh noise path, every noise times the env's scale."""
        c, core = self.config, self.core
        k_eps, k_scale = jax.random.split(key)
        scale = carry["scale"]
        if c.noise_scale_range is not None:
            scale = exploration.resample_on_done(k_scale, scale, done, *c.noise_scale_range)
        dist = self.flow_policy(state.params["actor"],
                                core.prepare_obs(state, obs, c.policy_obs_key))
        action = dist.from_noise(dist.path_noise(k_eps), scale[:, None])
        return core.replay.random_warmup(state, k_eps, action), {}, dict(carry, scale=scale)

    def actor_learning_rate(self, state: SACState, lr):
        """The actor's own step size, scaled by the schedule's factor of `learning_rate`."""
        hp = state.hp
        actor_lr = hp["actor_learning_rate"]
        if self.config.lr_schedule != "constant":
            actor_lr = actor_lr * lr / jnp.maximum(hp["learning_rate"], 1e-30)
        return actor_lr

    # ----- the critic --------------------------------------------------------------------
    def critic_loss(self, critic_params, state, batch, key):
        """`0.5 mean((Q_i - y)^2)` averaged over heads, `y` the soft TD target with the
        ensemble reduced by `q_agg` and the next action's path log-likelihood."""
        loss, out, variables, alpha_logp = self.core.scalar_critic_loss(critic_params, state,
                                                                        batch, key)
        q = out[..., 0]
        metrics = {"train/critic_loss": loss, "train/q_mean": q.mean(),
                   "train/next_log_prob": (alpha_logp / jnp.exp(state.log_alpha)).mean()}
        return loss, (metrics, variables, {})
