"""CRL: contrastive RL for goal reaching without rewards, as in JaxGCRL (off-policy).

Sources: Eysenbach et al., "Contrastive Learning as Goal-Conditioned Reinforcement Learning"
(NeurIPS 2022, arXiv 2206.07568): the critic `f(s, a, g)` is a classifier between future
states of `(s, a)` and other goals, trained with InfoNCE, and the actor maximizes `f` for the
commanded goal; Bortkiewicz et al.,
"Accelerating Goal-Conditioned RL Algorithms and Research" (ICLR 2025, arXiv 2408.11052),
`MichalBortkiewicz/JaxGCRL` `jaxgcrl/agents/crl/{crl,losses,networks}.py` for the defaults
(256 x 2 swish encoders, representation 64, `norm` energy, logsumexp penalty 0.1, lr 3e-4,
target entropy `-0.5 |A|`, log-std in [-5, 2]). See `specs/crl.md`.

Env contract: `obs = concat(state, goal)` with `EnvSpec.goal_indices` the state entries the goal
refers to (`state_dim = obs_dim - len(goal_indices)`), and `Transition.extras["traj_id"]`
(episode ids from `AutoReset`). The reward is never read.

Schedule: each `update` adds the chunk `Transition[T, N]` (with `traj_id`) to the replay buffer
in the state; once it holds `learning_starts` transitions it takes `G = utd_ratio * T`
gradient steps. Each step samples B transitions uniformly and, for each, a future state of the
same episode `k >= 1` steps ahead with `P(k) ∝ gamma^(k-1)` (`replay.sample_future`); the goal
is that state's `goal_indices` entries. Per step, as JaxGCRL: actor and temperature first (on
the relabeled goals), then the critic; no target networks and no TD.

Departure from JaxGCRL: it samples one window of `episode_length` rows per env, relabels every
row and scans over all `num_envs * (episode_length - 1) / batch_size` batches, which ties
`num_envs`, `episode_length` and `batch_size` together by divisibility (JaxGCRL #54). Here
pairs are drawn independently and the replay ratio is `utd_ratio`, so no such constraint
exists; JaxGCRL's ratio is `utd_ratio = num_envs * (episode_length - 1) / (batch_size * T)`.
"""

from __future__ import annotations

import dataclasses
import math

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

from jaxrl import agent as agent_lib
from jaxrl import contrastive, optim, replay
from jaxrl import distributions as dist
from jaxrl.agents.sac import Actor
from jaxrl.loop import TrainConfig
from jaxrl.networks import ACTIVATIONS
from jaxrl.types import EnvSpec, Transition

HP_FIELDS = ("learning_rate", "critic_learning_rate", "alpha_learning_rate", "gamma")
_HP_RANGES = {"learning_rate": (0.0, 1.0), "critic_learning_rate": (0.0, 1.0),
              "alpha_learning_rate": (0.0, 1.0), "gamma": (1e-6, 1.0)}


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
    """LayerNorm after every hidden layer (needed for deep/wide encoders, spec Sec. 3)."""
    skip_connections: int = 0
    """Residual connection around every this many hidden layers (0: none; JaxGCRL 4)."""
    energy: str = "norm"
    """`norm` (-L2 distance), `l2` (-squared), `dot`, `cosine` (learned temperature)."""
    contrastive_loss: str = "fwd_infonce"
    """`fwd_infonce`, `bwd_infonce`, `sym_infonce` or `binary_nce`."""
    logsumexp_penalty: float | None = None
    """Weight of `mean(LSE_row^2)` in the critic loss. None: 0.1 (JaxGCRL) for InfoNCE with the
    `norm`, `l2` or `dot` energy; 0 for `cosine` (bounded logits) and `binary_nce`, which did not
    learn `PointMaze` with 0.1 (success 0.02-0.10; 0.88-0.90 with 0)."""
    log_std_min: float = -5.0
    """Lower bound of the actor's log-std."""
    log_std_max: float = 2.0
    """Upper bound of the actor's log-std."""


@dataclasses.dataclass(frozen=True)
class CRLConfig(ContrastiveConfig):
    """CRL settings (JaxGCRL defaults). Float fields named in `HP_FIELDS` are traced."""

    batch_size: int = 256
    """Pairs per gradient step (the negatives are the other B - 1 goals)."""
    utd_ratio: float = 1.0
    """Gradient steps per vectorized env step (`utd_ratio * unroll_length` per update)."""
    buffer_size: int = 1_000_000
    """Replay capacity in transitions (`buffer_size // num_envs` rows per env)."""
    learning_starts: int = 10_000
    """Transitions collected (with the initial actor) before the first gradient step."""
    horizon: int | None = None
    """Longest goal offset in steps; None: the episode length."""
    target_entropy_scale: float = 0.5
    """Target entropy `-scale * action_size` for the temperature (JaxGCRL: 0.5)."""
    learning_rate: float = 3e-4
    """Actor Adam step size."""
    critic_learning_rate: float = 3e-4
    """Critic (both encoders) Adam step size."""
    alpha_learning_rate: float = 3e-4
    """Temperature Adam step size (initial alpha 1, as JaxGCRL's `log_alpha = 0`)."""
    gamma: float = 0.99
    """Discount of the geometric future-goal relabeling."""


@struct.dataclass(kw_only=True)
class CRLState:
    params: dict
    """`{"actor", "sa_encoder", "g_encoder"}` flax variables, and `log_temperature` (cosine)."""
    opt_state: dict
    log_alpha: jax.Array
    buffer: replay.ReplayState
    hp: dict
    num_updates: jax.Array
    """Gradient steps taken so far (int32)."""


class Encoder(nn.Module):
    """MLP `[..., in] -> [..., repr_dim]` with optional LayerNorm and residual skips
    (JaxGCRL `networks.py`; kernels `variance_scaling(1/3, fan_in, uniform)`)."""

    hidden: tuple[int, ...]
    repr_dim: int
    activation: str = "silu"
    layer_norm: bool = False
    skip_connections: int = 0

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        init = nn.initializers.variance_scaling(1 / 3, "fan_in", "uniform")
        act = ACTIVATIONS[self.activation]
        skip = None
        for i, width in enumerate(self.hidden):
            x = nn.Dense(width, kernel_init=init)(x)
            x = act(nn.LayerNorm()(x) if self.layer_norm else x)
            if self.skip_connections and i % self.skip_connections == 0:
                if skip is not None and skip.shape == x.shape:
                    x = x + skip
                skip = x
        return nn.Dense(self.repr_dim, kernel_init=init)(x)


CRITIC_KEYS = ("sa_encoder", "g_encoder", "log_temperature")


@dataclasses.dataclass(frozen=True)
class ContrastiveAgent:
    """Networks and critic step shared by CRL and CPPO: actor `pi(a | s, g)` (tanh-Gaussian)
    and the contrastive critic `f(s, a, g) = energy(phi(s, a), psi(g))`."""

    config: ContrastiveConfig
    spec: EnvSpec
    train: TrainConfig

    @property
    def actor_net(self) -> Actor:
        c = self.config
        return Actor(tuple(c.actor_hidden), self.spec.action_size, c.activation,
                     log_std_min=c.log_std_min, log_std_max=c.log_std_max)

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
        return {"actor": self.actor_net.init(k_actor, jnp.zeros((1, obs_dim))),
                "sa_encoder": self.encoder_net.init(k_sa, jnp.zeros((1, sa_dim))),
                "g_encoder": self.encoder_net.init(k_g, jnp.zeros((1, goal_dim))),
                "log_temperature": jnp.zeros(())}

    def policy(self, actor, obs):
        """`(mu, std)` of the pre-tanh Gaussian for `obs = [s, g]` `[..., obs_dim]`."""
        mu, log_std = self.actor_net.apply(actor, obs)
        return mu, jnp.exp(log_std)

    def split_obs(self, obs):
        """`obs [..., state_dim + goal_dim]` -> (state `[..., state_dim]`, goal)."""
        d = obs.shape[-1] - len(self.spec.goal_indices)
        return obs[..., :d], obs[..., d:]

    def goal_of(self, state_obs):
        """Goal-space coordinates of a state (`goal_indices` entries of the obs)."""
        return state_obs[..., jnp.asarray(self.spec.goal_indices)]

    def _reprs(self, critic, s, action, goal):
        phi = self.encoder_net.apply(critic["sa_encoder"], jnp.concatenate([s, action], -1))
        return phi, self.encoder_net.apply(critic["g_encoder"], goal)

    def logits(self, critic, s, action, goal):
        """`[B, B]` energies between `phi(s_i, a_i)` and `psi(g_j)`."""
        phi, psi = self._reprs(critic, s, action, goal)
        return contrastive.energy(phi, psi, self.config.energy,
                                  jnp.exp(critic["log_temperature"]))

    def q_value(self, critic, s, action, goal):
        """`f(s, a, g)` row-wise, float32 `[...]` (the critic's log-scale Q)."""
        phi, psi = self._reprs(critic, s, action, goal)
        return contrastive.pair_energy(phi, psi, self.config.energy,
                                       jnp.exp(critic["log_temperature"]))

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
        loss = (contrastive.contrastive_loss(logits, c.contrastive_loss)
                + self.lse_weight * contrastive.logsumexp_penalty(logits))
        return loss, dict(contrastive.critic_metrics(logits), **{"train/critic_loss": loss})

    def critic_step(self, params, opt_state, s, action, goal, lr):
        """One Adam step of the critic. Returns (params, critic opt state, metrics)."""
        critic = {k: params[k] for k in CRITIC_KEYS}
        (_, metrics), grads = jax.value_and_grad(self.critic_loss, has_aux=True)(
            critic, s, action, goal)
        critic, opt_state = optim.apply(optim.make_optimizer(), opt_state, critic, grads, lr)
        return dict(params, **critic), opt_state, metrics


@dataclasses.dataclass(frozen=True)
class CRL(ContrastiveAgent):
    """Contrastive RL (off-policy, goal-conditioned, reward-free)."""

    config: CRLConfig
    on_policy: bool = False

    def default_hp(self) -> dict[str, float]:
        return {k: float(getattr(self.config, k)) for k in HP_FIELDS}

    @property
    def updates_per_call(self) -> int:
        return replay.updates_per_call(self.config.utd_ratio, self.train)

    @property
    def capacity_per_env(self) -> int:
        return replay.capacity_per_env(self.config.buffer_size, self.train.num_envs)

    @property
    def horizon(self) -> int:
        return int(self.config.horizon or self.spec.episode_length)

    def validate(self, train_cfg, spec: EnvSpec) -> None:
        """Raises ValueError (before compiling) for a non-goal env or inconsistent sizes."""
        check_goal_spec(spec, "crl")
        check_encoder_config(self.config)
        c = self.config
        if not math.isfinite(c.target_entropy_scale):
            raise ValueError(f"target_entropy_scale must be finite, got {c.target_entropy_scale}.")
        if c.horizon is not None and c.horizon < 1:
            raise ValueError(f"horizon must be >= 1 or None, got {c.horizon}.")
        check_hp(self.default_hp())
        replay.check_schedule(utd_ratio=c.utd_ratio, batch_size=c.batch_size,
                              buffer_size=c.buffer_size, learning_starts=c.learning_starts,
                              train=train_cfg)

    def init(self, key, spec: EnvSpec, hp) -> CRLState:
        params = self.init_params(key)
        obs_dim, n = spec.obs_shape[0], self.train.num_envs
        opt = optim.make_optimizer()
        example = Transition(obs=jnp.zeros((n, obs_dim)), action=jnp.zeros((n, spec.action_size)),
                             reward=jnp.zeros(n), terminated=jnp.zeros(n), truncated=jnp.zeros(n),
                             next_obs=jnp.zeros((n, obs_dim)),
                             extras={"traj_id": jnp.zeros(n, jnp.int32)})
        return CRLState(
            params=params,
            opt_state={"actor": opt.init(params["actor"]),
                       "critic": opt.init({k: params[k] for k in CRITIC_KEYS}),
                       "alpha": opt.init(jnp.zeros(()))},
            log_alpha=jnp.zeros(()),
            buffer=replay.init(example, self.capacity_per_env, extras=("traj_id",)),
            hp={k: jnp.asarray(v, jnp.float32) for k, v in hp.items()},
            num_updates=jnp.zeros((), jnp.int32))

    def act(self, state: CRLState, obs, key, deterministic: bool = False):
        """Action in [-1, 1] `[N, A]` from `pi(. | s, g)` on `obs = [s, g]`; `tanh(mu)` when
        deterministic."""
        mu, std = self.policy(state.params["actor"], obs)
        if deterministic:
            return dist.mode(mu), {}
        return jnp.tanh(dist.sample(key, mu, std)), {}

    def update(self, state: CRLState, traj: Transition, key):
        clean = Transition(obs=traj.obs, action=traj.action, reward=traj.reward,
                           terminated=traj.terminated, truncated=traj.truncated,
                           next_obs=traj.next_obs, extras={"traj_id": traj.extras["traj_id"]})
        state = state.replace(buffer=replay.add(state.buffer, clean))
        ready = replay.num_transitions(state.buffer) >= self.config.learning_starts
        metrics_shape = jax.eval_shape(self._train_steps, state, key)[1]
        zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), metrics_shape)
        state, metrics = jax.lax.cond(ready, self._train_steps, lambda s, k: (s, zeros),
                                      state, key)
        metrics["buffer/transitions"] = replay.num_transitions(state.buffer).astype(jnp.float32)
        return state, metrics

    def _train_steps(self, state: CRLState, key):
        state, metrics = jax.lax.scan(self._one_step, state,
                                      jax.random.split(key, self.updates_per_call))
        return state, jax.tree.map(jnp.mean, metrics)

    def _one_step(self, state: CRLState, key):
        """Relabel a batch; actor and temperature step, then critic step (JaxGCRL order)."""
        k_sample, k_actor = jax.random.split(key)
        batch = replay.sample_future(state.buffer, k_sample, self.config.batch_size,
                                     gamma=state.hp["gamma"], horizon=self.horizon)
        s, goal = self.split_obs(batch.obs)[0], self.goal_of(batch.future_obs)
        state, actor_metrics = self._actor_step(state, s, goal, k_actor)
        params, opt_critic, metrics = self.critic_step(
            state.params, state.opt_state["critic"], s, batch.action, goal,
            state.hp["critic_learning_rate"])
        state = state.replace(params=params, opt_state=dict(state.opt_state, critic=opt_critic),
                              num_updates=state.num_updates + 1)
        metrics.update(actor_metrics)
        metrics["train/goal_offset"] = batch.offset.mean().astype(jnp.float32)
        return state, metrics

    def _actor_step(self, state: CRLState, s, goal, key):
        opt = optim.make_optimizer()
        (_, (metrics, logp)), grads = jax.value_and_grad(self._actor_loss, has_aux=True)(
            state.params["actor"], state, s, goal, key)
        actor, opt_actor = optim.apply(opt, state.opt_state["actor"], state.params["actor"],
                                       grads, state.hp["learning_rate"])
        target = -self.config.target_entropy_scale * self.spec.action_size
        gap = jax.lax.stop_gradient(-logp - target)
        alpha_grad = jax.grad(lambda la: jnp.mean(jnp.exp(la) * gap))(state.log_alpha)
        log_alpha, opt_alpha = optim.apply(opt, state.opt_state["alpha"], state.log_alpha,
                                           alpha_grad, state.hp["alpha_learning_rate"])
        state = state.replace(params=dict(state.params, actor=actor), log_alpha=log_alpha,
                              opt_state=dict(state.opt_state, actor=opt_actor, alpha=opt_alpha))
        return state, dict(metrics, **{"train/alpha": jnp.exp(log_alpha)})

    def _actor_loss(self, actor, state: CRLState, s, goal, key):
        """`mean(alpha log pi(a | s, g) - f(s, a, g))`, `a ~ pi` reparameterized; the critic
        parameters get no gradient from it."""
        mu, std = self.policy(actor, jnp.concatenate([s, goal], -1))
        u = dist.sample(key, mu, std)
        logp = dist.log_prob(u, mu, std)
        critic = jax.lax.stop_gradient({k: state.params[k] for k in CRITIC_KEYS})
        f = self.q_value(critic, s, jnp.tanh(u), goal)
        loss = jnp.mean(jnp.exp(state.log_alpha) * logp - f)
        return loss, ({"train/actor_loss": loss, "train/entropy": -logp.mean(),
                       "train/policy_std": std.mean()}, logp)


def check_goal_spec(spec: EnvSpec, agent: str) -> None:
    """Raises ValueError unless `spec` is a flat goal-conditioned observation with valid
    `goal_indices` (each in `[0, state_dim)`)."""
    if spec.goal_indices is None:
        raise ValueError(f"Agent {agent!r} needs a goal-conditioned env (EnvSpec.goal_indices "
                         f"set, obs = concat(state, goal)); env {spec.name!r} has none. "
                         "Goal envs: PointMaze, ReacherGoal, AntGoal, PusherGoal.")
    if spec.obs_is_dict or len(spec.obs_shape) != 1:
        raise ValueError(f"Agent {agent!r} needs a flat observation vector; env {spec.name!r} "
                         f"has {spec.obs_shape}.")
    goal_dim = len(spec.goal_indices)
    state_dim = spec.obs_shape[0] - goal_dim
    bad = [i for i in spec.goal_indices if not 0 <= int(i) < state_dim]
    if goal_dim == 0 or state_dim <= 0 or bad:
        raise ValueError(f"goal_indices {tuple(spec.goal_indices)} of env {spec.name!r} must be "
                         f"non-empty and within the state (state_dim = {state_dim}: obs "
                         f"{spec.obs_shape[0]} minus goal {goal_dim}); out of range: {bad}.")


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
    for name in ("log_std_min", "log_std_max"):
        if not math.isfinite(getattr(c, name)):
            raise ValueError(f"{name} must be finite, got {getattr(c, name)}.")


def check_hp(hp: dict) -> None:
    """Raises ValueError for a non-finite or out-of-range hyperparameter (host side)."""
    agent_lib.check_hp(hp, _HP_RANGES, 'crl')
