"""`ContrastiveNets`: the contrastive actor-critic networks CRL and CPPO hold.

Sources: Eysenbach et al., "Contrastive Learning as Goal-Conditioned Reinforcement Learning"
(NeurIPS 2022, arXiv 2206.07568): the critic `f(s, a, g) = energy(phi(s, a), psi(g))` is a
classifier between future states of `(s, a)` and other goals, trained with InfoNCE; Bortkiewicz
et al., "Accelerating Goal-Conditioned RL Algorithms and Research" (ICLR 2025, arXiv 2408.11052),
`MichalBortkiewicz/JaxGCRL` `jaxgcrl/agents/crl/{crl,losses,networks}.py` for the defaults
(256 x 2 swish encoders, representation 64, `distance` energy (their "norm"), logsumexp
penalty 0.1, log-std in [-5, 2]). Energies and losses are `jaxrl.learning.contrastive`.

Env contract: `obs = concat(state, goal)` with `EnvSpec.goal_indices` the state entries the goal
refers to (`state_dim = obs_dim - len(goal_indices)`); the reward is never read.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp

from jaxrl.engine.types import EnvSpec
from jaxrl.learning import contrastive, distributions, optim
from jaxrl.learning.networks import ACTIVATIONS, Encoder, GaussianActor


@dataclasses.dataclass(frozen=True)
class ContrastiveConfig:
    """Networks and critic loss shared by CRL and CPPO (JaxGCRL defaults)."""

    hidden: tuple[int, ...] = (256, 256)
    """Hidden widths of both encoders `phi(s, a)` and `psi(g)` (JaxGCRL `h_dim x n_hidden`)."""
    actor_hidden: tuple[int, ...] = (256, 256)
    """Hidden widths of the actor on `[s, g]`."""
    repr_dim: int = 64
    """Representation size of `phi` and `psi`."""
    activation: str = "silu"
    """Hidden activation (swish, as JaxGCRL)."""
    layer_norm: bool = False
    """LayerNorm after every hidden layer (keeps deep/wide encoders trainable)."""
    skip_connections: int = 0
    """Residual connection around every this many hidden layers (0: none; JaxGCRL 4)."""
    energy: str = "distance"
    """`distance` (-L2 distance; JaxGCRL's "norm"), `sq_distance` (-squared; JaxGCRL's "l2"),
    `dot`, `cosine` (learned temperature)."""
    contrastive_loss: str = "fwd_infonce"
    """`fwd_infonce`, `bwd_infonce`, `sym_infonce` or `binary_nce`."""
    logsumexp_penalty: float | None = None
    """Weight of `mean(LSE_row^2)` in the critic loss. None: 0.1 (JaxGCRL) for InfoNCE with the
    `distance`, `sq_distance` or `dot` energy; 0 for `cosine` (bounded logits) and `binary_nce`
    (did not learn with 0.1)."""
    log_std_min: float = -5.0
    """Lower bound of the actor's log-std."""
    log_std_max: float = 2.0
    """Upper bound of the actor's log-std."""
    twin_q: bool = False
    """Two critics (independent `phi`/`psi` encoder pairs, both trained on the same batches);
    the agent reads the smaller of their `f(s, a, g)`, as Eysenbach et al.'s `twin_q`
    (`google-research/contrastive_rl`, `networks.py` and `learning.py::actor_loss`)."""
    actor_init_scale: float = 1.0
    """Actor kernel init `variance_scaling(scale, fan_in, uniform)`: 1.0 is lecun uniform;
    JaxGCRL's actor uses 1/3 (`jaxgcrl/agents/crl/networks.py`), as its encoders do here."""


CRITIC_KEYS = ("sa_encoder", "g_encoder", "log_temperature")


@dataclasses.dataclass(frozen=True)
class ContrastiveNets:
    """Networks and critic step CRL and CPPO hold (a helper, not a base class): actor
    `pi(a | s, g)` (tanh-Gaussian) and the contrastive critic
    `f(s, a, g) = energy(phi(s, a), psi(g))`, for the agent's config and goal env spec."""

    config: ContrastiveConfig
    spec: EnvSpec

    def validate(self) -> None:
        """Raises ValueError for bad encoder settings (`check_encoder_config`)."""
        check_encoder_config(self.config)

    @property
    def actor_net(self) -> GaussianActor:
        c = self.config
        return GaussianActor(tuple(c.actor_hidden), self.spec.action_size, c.activation,
                             log_std_min=c.log_std_min, log_std_max=c.log_std_max,
                             init_scale=c.actor_init_scale)

    @property
    def encoder_net(self) -> Encoder:
        c = self.config
        return Encoder(tuple(c.hidden), c.repr_dim, c.activation, c.layer_norm,
                       c.skip_connections)

    def init_params(self, key) -> dict:
        """`{"actor", "sa_encoder", "g_encoder", "log_temperature"}` for this env."""
        k_actor, k_sa, k_g = jax.random.split(key, 3)
        obs_dim, goal_dim = self.spec.obs_shape[0], len(self.spec.goal_indices)
        sa_dim = obs_dim - goal_dim + self.spec.action_size

        def encoder(k, dim):  # one encoder, or (twin_q) two stacked on a leading axis
            init = functools.partial(self.encoder_net.init, x=jnp.zeros((1, dim)))
            return jax.vmap(init)(jax.random.split(k)) if self.config.twin_q else init(k)

        return {"actor": self.actor_net.init(k_actor, jnp.zeros((1, obs_dim))),
                "sa_encoder": encoder(k_sa, sa_dim), "g_encoder": encoder(k_g, goal_dim),
                "log_temperature": jnp.zeros(())}

    def policy(self, actor, obs) -> distributions.TanhGaussian:
        """The policy `pi(. | s, g)` for `obs = [s, g]` `[..., obs_dim]`."""
        mu, log_std = self.actor_net.apply(actor, obs)
        return distributions.TanhGaussian(loc=mu, scale=jnp.exp(log_std))

    def split_obs(self, obs):
        """`obs [..., state_dim + goal_dim]` -> (state `[..., state_dim]`, goal)."""
        d = obs.shape[-1] - len(self.spec.goal_indices)
        return obs[..., :d], obs[..., d:]

    def goal_of(self, state_obs):
        """Goal-space coordinates of a state (`goal_indices` entries of the obs)."""
        return state_obs[..., jnp.asarray(self.spec.goal_indices)]

    def _reprs(self, critic, s, action, goal):
        """`(phi [..., D], psi [..., D])`, with a leading axis of 2 under `twin_q`."""
        apply = self.encoder_net.apply
        if self.config.twin_q:
            apply = jax.vmap(apply, in_axes=(0, None))
        phi = apply(critic["sa_encoder"], jnp.concatenate([s, action], -1))
        return phi, apply(critic["g_encoder"], goal)

    def logits(self, critic, s, action, goal):
        """`[B, B]` energies between `phi(s_i, a_i)` and `psi(g_j)` (`[2, B, B]`, one per
        critic, under `twin_q`)."""
        phi, psi = self._reprs(critic, s, action, goal)
        energy = functools.partial(contrastive.energy, kind=self.config.energy,
                                   temperature=jnp.exp(critic["log_temperature"]))
        return jax.vmap(energy)(phi, psi) if self.config.twin_q else energy(phi, psi)

    def q_value(self, critic, s, action, goal):
        """`f(s, a, g)` row-wise, float32 `[...]` (the critic's log-scale Q; the smaller of
        the two under `twin_q`)."""
        phi, psi = self._reprs(critic, s, action, goal)
        q = contrastive.pair_energy(phi, psi, self.config.energy,
                                    jnp.exp(critic["log_temperature"]))
        return q.min(axis=0) if self.config.twin_q else q

    @property
    def lse_weight(self) -> float:
        """The logsumexp penalty weight in use (see `ContrastiveConfig.logsumexp_penalty`)."""
        c = self.config
        if c.logsumexp_penalty is not None:
            return float(c.logsumexp_penalty)
        return 0.0 if c.energy == "cosine" or c.contrastive_loss == "binary_nce" else 0.1

    def critic_loss(self, critic, s, action, goal):
        """Contrastive loss + `logsumexp_penalty * mean(LSE^2)` on one batch of positives
        `(s_i, a_i, g_i)` `[B, ...]` (negatives: the other goals of the batch)."""
        c = self.config
        logits = self.logits(critic, s, action, goal)

        def loss_of(lg):
            return (contrastive.contrastive_loss(lg, c.contrastive_loss)
                    + self.lse_weight * contrastive.logsumexp_penalty(lg))

        if c.twin_q:  # both critics' losses, summed; metrics of the first
            loss, logits = jax.vmap(loss_of)(logits).sum(), logits[0]
        else:
            loss = loss_of(logits)
        return loss, dict(contrastive.critic_metrics(logits), **{"train/critic_loss": loss})

    def critic_step(self, params, opt_state, s, action, goal, lr):
        """One Adam step of the critic. Returns (params, critic opt state, metrics)."""
        critic = {k: params[k] for k in CRITIC_KEYS}
        (_, metrics), grads = jax.value_and_grad(self.critic_loss, has_aux=True)(
            critic, s, action, goal)
        critic, opt_state = optim.apply(optim.make_optimizer(), opt_state, critic, grads, lr)
        return dict(params, **critic), opt_state, metrics



def check_encoder_config(c) -> None:
    """Raises ValueError for an unknown energy / loss / activation or a bad size."""
    for name, value, choices in (("energy", c.energy, contrastive.ENERGIES),
                                 ("contrastive_loss", c.contrastive_loss, contrastive.LOSSES),
                                 ("activation", c.activation, tuple(ACTIVATIONS))):
        if value not in choices:
            raise ValueError(f"{name} must be one of {', '.join(choices)}; got {value!r}.")
    if c.repr_dim <= 0 or not c.hidden or min(c.hidden) <= 0:
        raise ValueError(f"repr_dim and hidden widths must be positive, got {c.repr_dim}, "
                         f"{c.hidden}.")
    if not c.log_std_min < c.log_std_max:
        raise ValueError(f"log_std_min ({c.log_std_min}) must be below log_std_max "
                         f"({c.log_std_max}).")
    lse = c.logsumexp_penalty
    if lse is not None and (lse < 0 or not math.isfinite(lse)):
        raise ValueError(f"logsumexp_penalty must be finite and >= 0 (or None), got {lse}.")
    if c.skip_connections < 0:
        raise ValueError(f"skip_connections must be >= 0, got {c.skip_connections}.")
    if not (math.isfinite(c.actor_init_scale) and c.actor_init_scale > 0):
        raise ValueError(f"actor_init_scale must be finite and > 0, got {c.actor_init_scale}.")
    for name in ("log_std_min", "log_std_max"):
        if not math.isfinite(getattr(c, name)):
            raise ValueError(f"{name} must be finite, got {getattr(c, name)}.")
