"""SAC and the shared off-policy core of the SAC family (FastDSAC, WarpSAC/FlashSAC subclass it).

Sources: Haarnoja et al., "Soft Actor-Critic Algorithms and Applications" (arXiv 1812.05905),
Eqs. 5-7 (soft Q target, policy loss) and 18 (temperature loss); brax
`training/agents/sac/{train,losses,networks}.py` for the defaults, the target entropy
`-0.5 |A|`, observation normalization and the Brax truncation mask; FastTD3 (arXiv 2505.22642,
`younggyoseo/FastTD3`) for many parallel envs with several updates per env step; C51 critics
(Bellemare et al. 2017, arXiv 1707.06887) and FlashSAC's normalized networks and cross-batch
BatchNorm (arXiv 2604.04539, `leeyngdo/FlashSAC` `flash_rl/agents/flashSAC/update.py`).
See `specs/sac_family.md`.

Schedule (spec Sec. 1.8): each `update` gets the chunk `Transition[T, N]`, adds it to the replay
buffer in the state (normalizer statistics in write order), and once the buffer holds
`learning_starts` transitions takes `G = utd_ratio * T` gradient steps on one sample of `G * B`
transitions reshaped to `[G, B]` (`lax.scan`). Each step: critic (and target EMA with `tau`),
then, every `policy_delay` steps, actor and temperature. Before `learning_starts`, behaviour
actions are uniform in [-1, 1] (Brax's random prefill). n-step targets come from the buffer
(windows stop at terminated/truncated and at the write head; truncation bootstraps from the true
final observation); `truncation="brax"` masks truncated transitions out of the critic loss
instead (parity with Brax, which drops them; n_step 1 only).
"""

from __future__ import annotations

import dataclasses
import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from flax import struct

from jaxrl import agent as agent_lib
from jaxrl import distributions as dist
from jaxrl import exploration, normalize, optim, replay, reward_norm
from jaxrl.loop import TrainConfig
from jaxrl.networks import ACTIVATIONS, QHead, Torso, ensemble, flatten_obs, project_weights
from jaxrl.returns import categorical_projection, categorical_support
from jaxrl.types import EnvSpec, Transition

HP_FIELDS = ("learning_rate", "alpha_learning_rate", "gamma", "tau", "reward_scaling",
             "init_alpha")
_HP_RANGES = {"learning_rate": (0.0, 1.0), "alpha_learning_rate": (0.0, 1.0),
              "gamma": (0.0, 1.0), "tau": (0.0, 1.0), "reward_scaling": (0.0, 1e6),
              "init_alpha": (1e-12, 1e6)}
TARGET_ENTROPY = ("brax", "action_dim", "zero", "flash")


@dataclasses.dataclass(frozen=True)
class SACConfig:
    """SAC-family settings. Float fields named in `HP_FIELDS` are traced (sweepable) defaults;
    everything else is static (changes shapes or program structure)."""

    actor_hidden: tuple[int, ...] = (256, 256)
    """Actor torso widths (`norm=True`: the encoder width is the first entry)."""
    critic_hidden: tuple[int, ...] = (256, 256)
    """Critic torso widths (`norm=True`: the encoder width is the first entry)."""
    activation: str = "relu"
    """Hidden activation of the MLP torsos."""
    layer_norm: bool = False
    """LayerNorm before each MLP activation."""
    norm: bool = False
    """FlashSAC normalized networks: input BatchNorm, unit-norm linears re-projected after each
    step, BN inverted-residual blocks, final RMSNorm, cross-batch BN in the critic update."""
    num_blocks: int = 2
    """Residual blocks of the normalized encoder (`norm=True`)."""
    norm_bias: bool = False
    """Biases in the normalized encoder's linears (FlashSAC: off; WarpSAC: on)."""
    critic_type: str = "scalar"
    """`scalar` (MSE), `categorical` (C51 cross-entropy) or `gaussian` (DSAC-T; fastdsac)."""
    num_q: int = 2
    """Critic ensemble size (2 = clipped double Q with `q_agg=min`)."""
    q_agg: str = "min"
    """How the ensemble is reduced for targets and the actor: `min` or `mean`."""
    num_atoms: int = 101
    """Atoms of the categorical critic."""
    v_min: float = -10.0
    """Lowest atom of the categorical critic."""
    v_max: float = 10.0
    """Highest atom of the categorical critic."""
    batch_size: int = 256
    """Transitions per gradient step (B)."""
    utd_ratio: float = 1.0
    """Gradient steps per vectorized env step (FastTD3's `num_updates`); an update call takes
    `utd_ratio * unroll_length * unrolls_per_update` steps, which must be a whole number."""
    policy_delay: int = 1
    """Actor and temperature step every this many critic steps."""
    buffer_size: int = 1_000_000
    """Replay capacity in transitions (all envs together; `buffer_size / num_envs` per env)."""
    learning_starts: int = 10_000
    """Transitions collected (uniform random actions) before the first gradient step."""
    n_step: int = 1
    """n-step targets (windows stop at episode ends and at the write head)."""
    swd_decay_steps: float = 0.0
    """Sample Weight Decay horizon D in vectorized env steps (WarpSAC); 0 samples uniformly."""
    swd_min_weight: float = 0.1
    """Floor of the SWD weight."""
    obs_dtype: str = "float32"
    """Replay storage dtype of observations: `float32` or `bfloat16`."""
    normalize_observations: bool = True
    """Running mean/std normalization of observations (ignored when `norm=True`: input BN)."""
    log_std_min: float = -5.0
    """Lower bound of the actor log-std (tanh rescale)."""
    log_std_max: float = 2.0
    """Upper bound of the actor log-std (tanh rescale)."""
    target_entropy: str = "brax"
    """`brax` (-0.5 |A|), `action_dim` (-|A|), `zero`, `flash` (0.5 |A| log(2 pi e 0.15^2))."""
    reward_normalization: bool = False
    """Scale rewards by the return-based normalizer (SimbaV2/FlashSAC, spec Sec. 1.6)."""
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


@struct.dataclass(kw_only=True)
class SACState:
    params: dict
    """`{"actor": variables, "critic": variables}` (flax variables incl. `batch_stats`)."""
    target_critic: dict
    opt_state: dict
    log_alpha: jax.Array
    buffer: replay.ReplayState
    norm: normalize.NormState
    reward_norm: object
    hp: dict
    num_updates: jax.Array
    """Gradient steps taken so far (int32)."""
    extra: dict = struct.field(default_factory=dict)
    """Algorithm-specific train state (DSAC-T `wbar`)."""


class Actor(nn.Module):
    """`obs -> (mu, log_std)`; log-std squashed into `[log_std_min, log_std_max]`."""

    hidden: tuple[int, ...]
    action_size: int
    activation: str = "relu"
    norm: bool = False
    num_blocks: int = 2
    layer_norm: bool = False
    log_std_min: float = -5.0
    log_std_max: float = 2.0
    norm_bias: bool = False

    @nn.compact
    def __call__(self, obs, train: bool = False):
        x = Torso(self.hidden, self.activation, self.norm, self.num_blocks, self.layer_norm,
                  self.norm_bias)(obs, train)
        mu_init = nn.initializers.normal(1e-3) if self.norm else nn.initializers.lecun_uniform()
        mu = nn.Dense(self.action_size, kernel_init=mu_init)(x)
        raw = nn.Dense(self.action_size, kernel_init=nn.initializers.zeros if self.norm
                       else nn.initializers.lecun_uniform())(x)
        lo, hi = self.log_std_min, self.log_std_max
        return mu, lo + 0.5 * (hi - lo) * (jnp.tanh(raw) + 1.0)


@dataclasses.dataclass(frozen=True)
class SAC:
    """Soft actor-critic with the switches of `SACConfig` (off-policy)."""

    config: SACConfig
    spec: EnvSpec
    train: TrainConfig
    on_policy: bool = False

    # ----- construction and checks -------------------------------------------------------
    def default_hp(self) -> dict[str, float]:
        return {k: float(getattr(self.config, k)) for k in HP_FIELDS}

    @property
    def updates_per_call(self) -> int:
        return replay.updates_per_call(self.config.utd_ratio, self.train)

    @property
    def capacity_per_env(self) -> int:
        return replay.capacity_per_env(self.config.buffer_size, self.train.num_envs)

    def validate(self, train_cfg, spec: EnvSpec) -> None:
        """Raises ValueError (before compiling) for inconsistent sizes or settings."""
        c = self.config
        _check_choice("critic_type", c.critic_type, ("scalar", "categorical", "gaussian"))
        _check_choice("q_agg", c.q_agg, ("min", "mean"))
        _check_choice("target_entropy", c.target_entropy, TARGET_ENTROPY)
        _check_choice("truncation", c.truncation, ("bootstrap", "brax"))
        _check_choice("lr_schedule", c.lr_schedule, ("constant", "cosine"))
        _check_choice("obs_dtype", c.obs_dtype, ("float32", "bfloat16"))
        if c.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}; got "
                             f"{c.activation!r}.")
        if not c.log_std_min < c.log_std_max:
            raise ValueError(f"log_std_min ({c.log_std_min}) must be below log_std_max "
                             f"({c.log_std_max}).")
        if not c.utd_ratio > 0:
            raise ValueError(f"utd_ratio must be > 0, got {c.utd_ratio}.")
        for name in ("num_q", "policy_delay", "n_step"):
            if getattr(c, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(c, name)}.")
        if c.critic_type == "categorical" and not (c.v_min < c.v_max and c.num_atoms >= 2):
            raise ValueError(f"categorical critic needs v_min < v_max and num_atoms >= 2, got "
                             f"v_min={c.v_min}, v_max={c.v_max}, num_atoms={c.num_atoms}.")
        if c.truncation == "brax" and c.n_step != 1:
            raise ValueError("truncation='brax' masks single transitions: use n_step = 1.")
        if c.noise_scale_range is not None and not 0 < c.noise_scale_range[0] <= \
                c.noise_scale_range[1]:
            raise ValueError(f"noise_scale_range must be 0 < low <= high, got "
                             f"{c.noise_scale_range}.")
        check_hp(self.default_hp())
        replay.check_schedule(utd_ratio=c.utd_ratio, batch_size=c.batch_size,
                              buffer_size=c.buffer_size, learning_starts=c.learning_starts,
                              train=train_cfg)

    # ----- networks ----------------------------------------------------------------------
    @property
    def actor_net(self) -> Actor:
        c = self.config
        return Actor(tuple(c.actor_hidden), self.spec.action_size, c.activation, c.norm,
                     c.num_blocks, c.layer_norm, c.log_std_min, c.log_std_max, c.norm_bias)

    @property
    def critic_net(self):
        c = self.config
        return ensemble(QHead, c.num_q)(tuple(c.critic_hidden), c.critic_type, c.num_atoms,
                                        c.activation, c.norm, c.num_blocks, c.layer_norm,
                                        c.norm_bias)

    def _apply(self, net, variables, *args, train: bool = False):
        """Applies `net`; in training mode with BN returns updated variables too."""
        if train and self.config.norm:
            out, upd = net.apply(variables, *args, True, mutable=["batch_stats"])
            return out, dict(variables, **upd)
        return net.apply(variables, *args, False), variables

    def _obs(self, state: SACState, obs, key_name: str):
        if self.config.normalize_observations and not self.config.norm:
            obs = normalize.normalize(state.norm, obs)
        if isinstance(obs, dict):
            obs = flatten_obs(obs, [key_name])
        return obs.astype(jnp.float32)

    def q_values(self, out):
        """Expected value per head `[E, ...]` from the critic output."""
        if self.config.critic_type == "categorical":
            z = categorical_support(self.config.v_min, self.config.v_max, self.config.num_atoms)
            return jnp.sum(jax.nn.softmax(out, axis=-1) * z, axis=-1)
        return out[..., 0]

    def _agg(self, q):
        return q.min(axis=0) if self.config.q_agg == "min" else q.mean(axis=0)

    def target_entropy(self) -> float:
        a = self.spec.action_size
        return {"brax": -0.5 * a, "action_dim": -float(a), "zero": 0.0,
                "flash": 0.5 * a * math.log(2 * math.pi * math.e * 0.15 ** 2)
                }[self.config.target_entropy]

    # ----- policy ------------------------------------------------------------------------
    def policy_dist(self, actor_vars, obs, train: bool = False):
        """(mu, std) of the pre-squash Gaussian, and the (possibly BN-updated) variables."""
        (mu, log_std), actor_vars = self._apply(self.actor_net, actor_vars, obs, train=train)
        return (mu, jnp.exp(log_std)), actor_vars

    def sample_action(self, key, mu, std):
        """Reparameterized `(action in [-1, 1], log_prob)` for the actor loss and targets."""
        u = dist.sample(key, mu, std)
        return jnp.tanh(u), dist.log_prob(u, mu, std)

    def target_action(self, key, mu, std):
        """Next action and log-prob of the critic target (SAC: same as `sample_action`)."""
        return self.sample_action(key, mu, std)

    def behaviour_action(self, mu, std, eps):
        """Exploration action from standard-normal noise `eps`."""
        return jnp.tanh(mu + std * eps)

    def mode(self, mu):
        return jnp.tanh(mu)

    # ----- protocol ----------------------------------------------------------------------
    def init(self, key, spec: EnvSpec, hp) -> SACState:
        c = self.config
        k_actor, k_critic = jax.random.split(key)
        obs = _zeros_obs(spec, (1,))
        act = jnp.zeros((1, spec.action_size))
        norm0 = normalize.init(_zeros_obs(spec, ()))
        a_obs = _flat(obs, c.policy_obs_key)
        actor = self.actor_net.init(k_actor, a_obs, False)
        critic = self.critic_net.init(k_critic, _flat(obs, c.critic_obs_key), act, False)
        params = {"actor": actor, "critic": critic}
        hp = {k: jnp.asarray(v, jnp.float32) for k, v in hp.items()}
        opt = self._optimizers()
        example = Transition(obs=_zeros_obs(spec, (self.train.num_envs,)),
                             action=jnp.zeros((self.train.num_envs, spec.action_size)),
                             reward=jnp.zeros(self.train.num_envs),
                             terminated=jnp.zeros(self.train.num_envs),
                             truncated=jnp.zeros(self.train.num_envs),
                             next_obs=_zeros_obs(spec, (self.train.num_envs,)))
        buffer = replay.init(example, self.capacity_per_env,
                             jnp.bfloat16 if c.obs_dtype == "bfloat16" else jnp.float32)
        return SACState(
            params=params, target_critic=critic,
            opt_state={"actor": opt["actor"].init(actor["params"]),
                       "critic": opt["critic"].init(critic["params"]),
                       "alpha": opt["alpha"].init(jnp.zeros(()))},
            log_alpha=jnp.log(hp["init_alpha"]), buffer=buffer, norm=norm0,
            reward_norm=reward_norm.init(self.train.num_envs), hp=hp,
            num_updates=jnp.zeros((), jnp.int32), extra=self.init_extra())

    def init_extra(self) -> dict:
        return {}

    def _optimizers(self):
        c = self.config
        wd = [optax.add_decayed_weights(c.weight_decay)] if c.weight_decay else []
        net = optax.chain(optax.scale_by_adam(), *wd)
        return {"actor": net, "critic": net, "alpha": optim.make_optimizer()}

    def act(self, state: SACState, obs, key, deterministic: bool = False):
        """Action in [-1, 1] `[N, A]` (mode when deterministic); uniform during warm-up."""
        (mu, std), _ = self.policy_dist(state.params["actor"],
                                        self._obs(state, obs, self.config.policy_obs_key))
        if deterministic:
            return self.mode(mu), {}
        eps = jax.random.normal(key, mu.shape)
        return self._warmup(state, key, self.behaviour_action(mu, std, eps)), {}

    def _warmup(self, state, key, action):
        warm = replay.num_transitions(state.buffer) < self.config.learning_starts
        rand = jax.random.uniform(jax.random.fold_in(key, 7), action.shape, minval=-1.0,
                                  maxval=1.0)
        return jnp.where(warm, rand, jnp.clip(action, -1.0, 1.0))

    def init_explore(self, key, num_envs: int):
        """Exploration carry: zeta noise and per-env std multipliers (spec Sec. 1.7)."""
        c, a = self.config, self.spec.action_size
        k1, k2 = jax.random.split(key)
        low, high = c.noise_scale_range or (1.0, 1.0)
        return {"zeta": exploration.zeta_init(k1, num_envs, a),
                "scale": exploration.sample_noise_scales(k2, num_envs, low, high)}

    def explore(self, state: SACState, obs, key, carry, done):
        """Behaviour policy with zeta-repeated noise and per-env scales; returns the carry."""
        c = self.config
        k_eps, k_zeta, k_scale = jax.random.split(key, 3)
        scale = carry["scale"]
        if c.noise_scale_range is not None:
            scale = exploration.resample_on_done(k_scale, scale, done, *c.noise_scale_range)
        zeta = carry["zeta"]
        if c.noise_repeat:
            zeta, eps = exploration.zeta_step(zeta, k_zeta)
        else:
            eps = jax.random.normal(k_eps, zeta.eps.shape)
        (mu, std), _ = self.policy_dist(state.params["actor"],
                                        self._obs(state, obs, c.policy_obs_key))
        action = self.behaviour_action(mu, std * scale[:, None], eps)
        return self._warmup(state, k_eps, action), {}, {"zeta": zeta, "scale": scale}

    def update(self, state: SACState, traj: Transition, key):
        c = self.config
        clean = Transition(obs=traj.obs, action=traj.action, reward=traj.reward,
                           terminated=traj.terminated, truncated=traj.truncated,
                           next_obs=traj.next_obs)
        state = state.replace(
            buffer=replay.add(state.buffer, clean),
            norm=normalize.update(state.norm, traj.obs) if c.normalize_observations
            else state.norm,
            reward_norm=reward_norm.update(state.reward_norm, traj.reward, traj.terminated,
                                           traj.truncated, state.hp["gamma"]))
        ready = replay.num_transitions(state.buffer) >= c.learning_starts
        metrics_shape = jax.eval_shape(self._train_steps, state, key)[1]
        zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), metrics_shape)
        state, metrics = jax.lax.cond(ready, self._train_steps, lambda s, k: (s, zeros),
                                      state, key)
        metrics["buffer/transitions"] = replay.num_transitions(state.buffer).astype(jnp.float32)
        return state, metrics

    # ----- gradient steps ----------------------------------------------------------------
    def _train_steps(self, state: SACState, key):
        c, g = self.config, self.updates_per_call
        k_sample, k_steps = jax.random.split(key)
        batch = replay.sample(state.buffer, k_sample, g * c.batch_size, n_step=c.n_step,
                              gamma=state.hp["gamma"], decay_steps=c.swd_decay_steps,
                              min_weight=c.swd_min_weight)
        batch = jax.tree.map(lambda x: x.reshape((g, c.batch_size) + x.shape[1:]), batch)
        state, (metrics, actor_metrics, did_actor) = jax.lax.scan(
            self._one_step, state, (batch, jax.random.split(k_steps, g)))
        # Actor/alpha metrics average over the steps that updated the actor only.
        count = jnp.maximum(did_actor.sum(), 1.0)
        metrics = jax.tree.map(jnp.mean, metrics)
        metrics.update({k: v.sum() / count for k, v in actor_metrics.items()})
        return state, metrics

    def _one_step(self, state: SACState, xs):
        batch, key = xs
        c = self.config
        k_critic, k_actor = jax.random.split(key)
        lr = self._lr(state)
        state, metrics = self._critic_step(state, batch, k_critic, lr)
        do_actor = state.num_updates % c.policy_delay == 0
        actor_metrics_shape = jax.eval_shape(self._actor_step, state, batch, k_actor, lr)[1]
        zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), actor_metrics_shape)
        state, actor_metrics = jax.lax.cond(
            do_actor, self._actor_step, lambda s, b, k, lr_: (s, zeros), state, batch, k_actor,
            lr)
        target = optim.soft_update(state.target_critic, state.params["critic"],
                                   state.hp["tau"])
        state = state.replace(target_critic=target, num_updates=state.num_updates + 1)
        return state, (dict(metrics, **{"train/learning_rate": lr}), actor_metrics,
                       do_actor.astype(jnp.float32))

    def _lr(self, state: SACState):
        lr = state.hp["learning_rate"]
        if self.config.lr_schedule == "constant":
            return lr
        total = max(1, self.train.num_chunks * self.train.iterations_per_chunk *
                    self.updates_per_call)
        frac = jnp.minimum(state.num_updates / total, 1.0)
        final = self.config.lr_final_fraction
        return lr * (final + (1.0 - final) * 0.5 * (1.0 + jnp.cos(jnp.pi * frac)))

    def _scaled_reward(self, state: SACState, reward):
        r = reward * state.hp["reward_scaling"]
        if self.config.reward_normalization:
            r = r / reward_norm.scale(state.reward_norm)
        return r

    def _critic_step(self, state: SACState, batch, key, lr):
        grad_fn = jax.value_and_grad(self._critic_loss, has_aux=True)
        critic = state.params["critic"]
        (_, (metrics, critic_vars, extra)), grads = grad_fn(critic["params"], state, batch, key)
        params, opt_state = self._step(self._optimizers()["critic"], state.opt_state["critic"],
                                       critic_vars["params"], grads, lr)
        critic_vars = dict(critic_vars, params=params)
        return state.replace(params=dict(state.params, critic=critic_vars),
                             opt_state=dict(state.opt_state, critic=opt_state),
                             extra=extra), metrics

    def _step(self, opt, opt_state, params, grads, lr):
        """Optimizer step, then the FlashSAC weight projection when `norm=True`."""
        params, opt_state = optim.apply(opt, opt_state, params, grads, lr)
        return (project_weights(params) if self.config.norm else params), opt_state

    def _next_values(self, state: SACState, batch, key):
        """Target critic output at `(next_obs, a')` `[E, B, ...]` and `alpha * log pi(a')`."""
        c = self.config
        next_pi = self._obs(state, batch.next_obs, c.policy_obs_key)
        (mu, std), _ = self.policy_dist(state.params["actor"], next_pi)
        next_a, next_logp = self.target_action(key, mu, std)
        return jax.lax.stop_gradient(next_a), jax.lax.stop_gradient(
            jnp.exp(state.log_alpha) * next_logp)

    def _critic_outputs(self, critic_params, state: SACState, batch, next_a):
        """Online output at (s, a) and target output at (s', a'): `[E, B, ...]` each.

        With `norm=True` both networks run in training mode on `concat[(s, a); (s', a')]`
        (cross-batch BN, spec Sec. 5); the online prediction is the first half, the bootstrap
        the second half of the target's output.
        """
        c = self.config
        obs = self._obs(state, batch.obs, c.critic_obs_key)
        next_obs = self._obs(state, batch.next_obs, c.critic_obs_key)
        variables = dict(state.params["critic"], params=critic_params)
        if c.norm:
            both_o = jnp.concatenate([obs, next_obs])
            both_a = jnp.concatenate([batch.action, next_a])
            out, variables = self._apply(self.critic_net, variables, both_o, both_a, train=True)
            tgt, _ = self._apply(self.critic_net, state.target_critic, both_o, both_a,
                                 train=True)
            b = obs.shape[0]
            return out[:, :b], jax.lax.stop_gradient(tgt[:, b:]), variables
        out, _ = self._apply(self.critic_net, variables, obs, batch.action)
        tgt, _ = self._apply(self.critic_net, state.target_critic, next_obs, next_a)
        return out, jax.lax.stop_gradient(tgt), variables

    def _critic_loss(self, critic_params, state: SACState, batch, key):
        """Soft TD loss: MSE (scalar) or C51 cross-entropy (categorical) with clipped double Q."""
        c = self.config
        next_a, alpha_logp = self._next_values(state, batch, key)
        out, tgt, variables = self._critic_outputs(critic_params, state, batch, next_a)
        reward = self._scaled_reward(state, batch.reward)
        mask = 1.0 - batch.truncated if c.truncation == "brax" else jnp.ones_like(reward)
        if c.critic_type == "categorical":
            loss, q = self._categorical_loss(out, tgt, reward, batch.discount, alpha_logp, mask)
        else:
            target = reward + batch.discount * (self._agg(self.q_values(tgt)) - alpha_logp)
            q = self.q_values(out)
            loss = 0.5 * jnp.mean(jnp.square(q - jax.lax.stop_gradient(target)) * mask)
        metrics = {"train/critic_loss": loss, "train/q_mean": q.mean()}
        return loss, (metrics, variables, state.extra)

    def categorical_target(self, tgt_logits, reward, discount, alpha_logp):
        """C51 target `[B, K]` shared by all heads: with `q_agg="min"` the whole distribution of
        the head with the lower expected value per sample (distributional clipped double Q,
        spec Sec. 1.5), else the heads' mean; projected after `r + d (z - alpha log pi)`."""
        c = self.config
        z = categorical_support(c.v_min, c.v_max, c.num_atoms)
        probs = jax.nn.softmax(tgt_logits.astype(jnp.float32), axis=-1)  # [E, B, K]
        if c.q_agg == "min":
            pick = jnp.argmin(jnp.sum(probs * z, -1), axis=0)  # [B]
            next_probs = jnp.take_along_axis(probs, pick[None, :, None], axis=0)[0]
        else:
            next_probs = probs.mean(axis=0)
        atoms = reward[:, None] + discount[:, None] * (z[None] - alpha_logp[:, None])
        return categorical_projection(next_probs, atoms, c.v_min, c.v_max)

    def _categorical_loss(self, logits, tgt_logits, reward, discount, alpha_logp, mask):
        target = jax.lax.stop_gradient(
            self.categorical_target(tgt_logits, reward, discount, alpha_logp))
        log_p = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
        ce = -jnp.sum(target[None] * log_p, axis=-1)  # [E, B]
        return jnp.mean(ce.sum(axis=0) * mask), self.q_values(logits)

    def _actor_step(self, state: SACState, batch, key, lr):
        opt = self._optimizers()
        grad_fn = jax.value_and_grad(self._actor_loss, has_aux=True)
        actor = state.params["actor"]
        (_, (metrics, actor_vars, logp)), grads = grad_fn(actor["params"], state, batch, key)
        params, opt_actor = self._step(opt["actor"], state.opt_state["actor"],
                                       actor_vars["params"], grads, lr)
        entropy_gap = jax.lax.stop_gradient(-logp - self.target_entropy())
        alpha_grad = jax.grad(lambda la: jnp.mean(jnp.exp(la) * entropy_gap))(state.log_alpha)
        log_alpha, opt_alpha = optim.apply(opt["alpha"], state.opt_state["alpha"],
                                           state.log_alpha, alpha_grad,
                                           state.hp["alpha_learning_rate"])
        state = state.replace(
            params=dict(state.params, actor=dict(actor_vars, params=params)),
            opt_state=dict(state.opt_state, actor=opt_actor, alpha=opt_alpha),
            log_alpha=log_alpha)
        return state, dict(metrics, **{"train/alpha": jnp.exp(log_alpha)})

    def _actor_loss(self, actor_params, state: SACState, batch, key):
        """`mean(alpha log pi(a|s) - agg_i Q_i(s, a))`, critic in evaluation mode. With
        `norm=True` the actor's BN runs in training mode on `concat(s, s')` (FlashSAC)."""
        c = self.config
        obs = self._obs(state, batch.obs, c.policy_obs_key)
        variables = dict(state.params["actor"], params=actor_params)
        if c.norm:
            both = jnp.concatenate([obs, self._obs(state, batch.next_obs, c.policy_obs_key)])
            (mu, std), variables = self.policy_dist(variables, both, train=True)
            mu, std = mu[: obs.shape[0]], std[: obs.shape[0]]
        else:
            (mu, std), variables = self.policy_dist(variables, obs)
        action, logp = self.sample_action(key, mu, std)
        q_out, _ = self._apply(self.critic_net, state.params["critic"],
                               self._obs(state, batch.obs, c.critic_obs_key), action)
        q = self._agg(self.q_values(q_out))
        loss = jnp.mean(jax.lax.stop_gradient(jnp.exp(state.log_alpha)) * logp - q)
        metrics = {"train/actor_loss": loss, "train/entropy": -logp.mean(),
                   "train/policy_std": std.mean()}
        return loss, (metrics, variables, logp)


def check_hp(hp: dict) -> None:
    """Raises ValueError for a non-finite or out-of-range hyperparameter (host side)."""
    agent_lib.check_hp(hp, _HP_RANGES, None)


def _check_choice(name: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(str, choices))}; got {value!r}.")


def _zeros_obs(spec: EnvSpec, lead: tuple[int, ...]):
    if spec.obs_is_dict:
        return {k: jnp.zeros(lead + tuple(v), jnp.float32) for k, v in spec.obs_shape.items()}
    return jnp.zeros(lead + tuple(spec.obs_shape), jnp.float32)


def _flat(obs, key_name: str):
    return flatten_obs(obs, [key_name]) if isinstance(obs, dict) else obs
