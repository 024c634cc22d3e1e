"""Env wrappers: `Episode` (time limit, truncation, episode stats), `Vmap`, `AutoReset`.

Ours rather than Brax's or Playground's: theirs drop the terminal observation on auto-reset and
reset to one cached state (brax `envs/wrappers/training.py`, Playground `_src/wrapper.py`;
brax PR #641, mujoco_playground #305). Wrap as `AutoReset(Vmap(Episode(env), num_envs))`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl.engine.parallel import MEMBER_AXIS
from jaxrl.engine.types import State


class Wrapper:
    """Forwards every attribute to the wrapped env."""

    def __init__(self, env):
        self.env = env

    def __getattr__(self, name):
        return getattr(self.env, name)

    @property
    def unwrapped(self):
        return getattr(self.env, "unwrapped", self.env)

    def trace_key(self):
        """What this wrapper adds to the env's behaviour, hashable, for `Vmap` to share traces
        between equal wrapper stacks over one env; None (the default) shares nothing."""
        return None


class Episode(Wrapper):
    """Time limit, `terminated`/`truncated` flags, action repeat and running episode stats.

    Follows brax `EpisodeWrapper`: when the step counter reaches `episode_length` the step is done
    and `truncated = 1 - terminated` (termination on the limit step wins). Single-env API.

    With `action_repeat > 1` one step runs the env up to `action_repeat` times with the same
    action; the reward and metrics are summed over the sub-steps up to the first that is done
    (later sub-steps are ignored), and `obs`, `data` and `metrics` are the last sub-step's.

    info keys added (float32 scalars unless noted): `steps` (int32), `terminated`, `truncated`,
    `episode_return` (sum of rewards so far), `episode_length` (env steps so far), and
    `episode_metrics` (dict: for every entry of the env's `state.metrics`, its sum over the
    episode's env sub-steps so far; zero at reset).
    """

    def __init__(self, env, episode_length: int, action_repeat: int = 1):
        super().__init__(env)
        if episode_length <= 0 or action_repeat <= 0:
            raise ValueError("episode_length and action_repeat must be positive")
        self.episode_length = int(episode_length)
        self.action_repeat = int(action_repeat)

    def trace_key(self):
        return ("Episode", self.episode_length, self.action_repeat)

    def reset(self, key: jax.Array) -> State:
        state = self.env.reset(key)
        zero = jnp.zeros((), jnp.float32)
        info = dict(state.info, steps=jnp.zeros((), jnp.int32), terminated=zero, truncated=zero,
                    episode_return=zero, episode_length=zero,
                    episode_metrics=jax.tree.map(_zeros_f32, dict(state.metrics)))
        return state.replace(done=zero, reward=zero, info=info)

    def step(self, state: State, action: jax.Array) -> State:
        def repeat(carry, _):
            s, total, metrics, ended = carry
            s = self.env.step(s, action)
            total = total + s.reward * (1.0 - ended)
            metrics = {k: m + jnp.asarray(s.metrics[k], jnp.float32) * (1.0 - ended)
                       for k, m in metrics.items()}
            return (s, total, metrics, jnp.maximum(ended, s.done.astype(jnp.float32))), None

        zero = jnp.zeros((), jnp.float32)
        episode_metrics = state.info["episode_metrics"]
        init = (state.replace(done=zero), zero, jax.tree.map(_zeros_f32, episode_metrics), zero)
        if self.action_repeat == 1:
            (nstate, reward, metrics, terminated), _ = repeat(init, None)
        else:
            (nstate, reward, metrics, terminated), _ = jax.lax.scan(
                repeat, init, None, self.action_repeat)
        steps = state.info["steps"] + 1
        truncated = jnp.where(steps >= self.episode_length, 1.0 - terminated, 0.0)
        done = jnp.maximum(terminated, truncated)
        info = dict(nstate.info, steps=steps, terminated=terminated, truncated=truncated,
                    episode_return=state.info["episode_return"] + reward,
                    episode_length=state.info["episode_length"] + 1.0,
                    episode_metrics={k: episode_metrics[k] + metrics[k] for k in metrics})
        return nstate.replace(reward=reward, done=done, info=info)


def _zeros_f32(x) -> jax.Array:
    return jnp.zeros(jnp.shape(x), jnp.float32)


class Vmap(Wrapper):
    """Batches a single-env API over `num_envs` envs (leading axis N).

    Inside a trace, `reset` and `step` go through one `jax.jit` each, so the batched simulator
    is traced once per input shape and that jaxpr is reused by every program that steps the env
    (training init, the chunk's auto-resets, a restored run's init): an MJX `forward` trace
    costs about 2 s of Python on a 2-core CPU, and its batching as much again. Vmaps over
    equal wrapper stacks (`Wrapper.trace_key`) of one env object share the jitted functions,
    which are kept on that env. The env can opt out for one call with `cacheable() -> False`
    (`envs.adapters.PlaygroundEnv` while it simulates a swapped model). Eager calls run op by
    op, uncompiled, as before.
    """

    def __init__(self, env, num_envs: int):
        super().__init__(env)
        self.num_envs = int(num_envs)
        self._traced_reset, self._traced_step = _shared_jits(env)

    def reset(self, key: jax.Array) -> State:
        """One key for all envs (split into N), or per-env keys: typed `[N]` (`jax.random.key`)
        or raw uint32 `[N, 2]` (`jax.random.PRNGKey`)."""
        typed = jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
        per_env = key.ndim == (1 if typed else 2)
        keys = key if per_env else jax.random.split(key, self.num_envs)
        if self._reuse_trace(keys):
            return self._traced_reset(keys)
        return jax.vmap(self.env.reset)(keys)

    def step(self, state: State, action: jax.Array) -> State:
        if self._reuse_trace(action):
            return self._traced_step(state, action)
        return jax.vmap(self.env.step)(state, action)

    def _reuse_trace(self, x) -> bool:
        cacheable = getattr(self.unwrapped, "cacheable", None)
        return isinstance(x, jax.core.Tracer) and (cacheable is None or cacheable())


_TRACES_ATTR = "_jaxrl_vmap_traces"


def _shared_jits(env):
    """(jit(vmap(env.reset)), jit(vmap(env.step))), shared by equal wrapper stacks over one
    root env (stored on it, so they live as long as it does)."""
    parts, root = [], env
    while isinstance(root, Wrapper):
        parts.append(root.trace_key())
        root = root.env
    fresh = (jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step)))
    if any(p is None for p in parts):
        return fresh
    try:
        cache = root.__dict__.setdefault(_TRACES_ATTR, {})
    except AttributeError:  # no instance dict: nothing to share on
        return fresh
    return cache.setdefault(tuple(parts), fresh)


def select_envs(done: jax.Array, on_true, on_false):
    """Per-env `where(done, on_true, on_false)` over two batched pytrees.

    Leaves whose leading dimension is not N are taken from `on_false` unchanged: MJX `Data`
    keeps some size-0 leaves unbatched under `vmap`, so their shapes do not start with N.
    """
    n = done.shape[0]

    def pick(a, b):
        if jnp.ndim(b) == 0 or b.shape[0] != n or jnp.shape(a) != jnp.shape(b):
            return b
        mask = done.reshape((n,) + (1,) * (b.ndim - 1)).astype(bool)
        return jnp.where(mask, a, b)

    return jax.tree.map(pick, on_true, on_false)


class AutoReset(Wrapper):
    """Batched auto-reset that keeps the final observation and draws a fresh start each time.

    On every step the envs that are done are replaced by a new initial state drawn with a fresh
    per-env key (never a cached state). The returned state keeps the step's `reward`, `done`,
    `metrics`, `terminated` and `truncated`, and adds to `info`:
    `final_obs` (the observation before reset, equal to `obs` where not done),
    `final_episode_return` / `final_episode_length` / `final_episode_metrics` (stats of the
    episode that just ended; `final_episode_metrics` is `Episode`'s `episode_metrics` dict of
    per-episode metric sums; where not done, these are the running stats of the current episode),
    `reset_key` (per-env PRNG keys: typed `[N]`, or raw uint32 `[N, 2]` from a raw key), and
    `traj_id` (int32 `[N]`, a per-slot episode counter: 0 after `reset`, incremented by 1 in
    the slots that are done in a step, so it changes exactly when a new episode starts; goal
    relabeling masks by it like JaxGCRL's `TrajectoryIdWrapper`, `jaxgcrl/utils/env.py`).

    Resets are computed only where they are needed (`reset_done`): a step with no done env
    computes none, a step with at most `max_resets` (M) done envs resets just those in a batch
    of M, and only a step with more than M done envs resets all N. Each done env gets
    `reset(its key)` whichever branch runs, so the results are those of resetting every env and
    selecting the done ones. The trade-off of M: a step that takes the M branch costs M resets
    plus a gather and a scatter, one with more done envs costs N; DM Control tasks, whose envs
    all truncate on the same step, take the N branch once an episode, while envs that terminate
    at random (falls) mostly take the M branch. Default `max(1, N // 16)`.

    With `fixed_starts`, no reset is computed after the first: each slot restarts every episode
    from its own first state (kept in `info["first_state"]`), as Brax's `AutoResetWrapper`
    (`brax/envs/wrappers/training.py`) does with the state it caches at `reset`. JaxGCRL trains
    under that wrapper, so each of its training envs keeps one start and one goal for the whole
    run (`MichalBortkiewicz/JaxGCRL` issue 53); the option exists to reproduce such settings.
    """

    def __init__(self, env, max_resets: int | None = None, fixed_starts: bool = False):
        super().__init__(env)
        n = self.env.num_envs
        self.max_resets = max(1, n // 16) if max_resets is None else int(max_resets)
        self.fixed_starts = bool(fixed_starts)
        if self.max_resets <= 0:
            raise ValueError(f"max_resets must be positive, got {max_resets}.")

    def reset(self, key: jax.Array) -> State:
        key_env, key_reset = jax.random.split(key)
        state = self.env.reset(key_env)
        n = self.env.num_envs
        info = dict(state.info, final_obs=state.obs, reset_key=jax.random.split(key_reset, n),
                    final_episode_return=jnp.zeros(n), final_episode_length=jnp.zeros(n),
                    final_episode_metrics=state.info["episode_metrics"],
                    traj_id=jnp.zeros(n, jnp.int32))
        if self.fixed_starts:
            info["first_state"] = (state.data, state.obs, dict(state.info))
        return state.replace(info=info)

    def step(self, state: State, action: jax.Array) -> State:
        stepped = self.env.step(state, action)
        # The consumed reset_key must not go through the resets below (typed keys under
        # jax_debug_key_reuse); it is replaced by keys[:, 1].
        stepped = stepped.replace(info={k: v for k, v in stepped.info.items() if k != "reset_key"})
        keys = jax.vmap(jax.random.split)(state.info["reset_key"])
        if self.fixed_starts:
            first_data, first_obs, first_info = state.info["first_state"]
            data, obs, info = select_envs(
                stepped.done > 0, (first_data, first_obs, dict(stepped.info, **first_info)),
                (stepped.data, stepped.obs, stepped.info))
        else:
            data, obs, info = reset_done(self.env.reset, stepped, keys[:, 0], self.max_resets)
        merged = stepped.replace(data=data, obs=obs, info=info)
        info = dict(merged.info, terminated=stepped.info["terminated"],
                    truncated=stepped.info["truncated"], final_obs=stepped.obs,
                    final_episode_return=stepped.info["episode_return"],
                    final_episode_length=stepped.info["episode_length"],
                    final_episode_metrics=stepped.info["episode_metrics"], reset_key=keys[:, 1],
                    traj_id=state.info["traj_id"] + (stepped.done > 0).astype(jnp.int32))
        return merged.replace(reward=stepped.reward, done=stepped.done, metrics=stepped.metrics,
                              info=info)


def reset_done(reset, stepped: State, keys: jax.Array, max_resets: int):
    """`(data, obs, info)` of `stepped` with every done env `i` replaced by `reset(keys[i])`.

    Three branches of one `lax.switch`: no env done (no reset computed), at most `max_resets`
    (M) done (their keys gathered, M resets, scattered back; spare slots reset a clamped key
    and are dropped), more than M done (N resets and a per-env select). Keys in `info` that
    the reset does not write keep their stepped values.

    Stoa's `OptimisticResetVmapWrapper` (`stoa/core_wrappers/auto_reset.py`) draws a fixed
    number of resets every step and, when more envs finish than it drew, hands copies of one
    start state to several of them; here the N branch covers that case, so every episode starts
    from its own key. Under a vmap over members (`MEMBER_AXIS`, `parallel.member_map`) a
    per-member predicate would turn the switch into a select that computes every branch, so
    the branch index is the maximum over the members: a step resets in the cheapest branch
    that fits every member.
    """
    done = stepped.done > 0
    n = done.shape[0]
    count = done.sum()
    if max_resets >= n:
        branch = jnp.minimum(count, 1)
    else:
        branch = jnp.where(count == 0, 0, jnp.where(count <= max_resets, 1, 2))
    branch = _max_over_members(branch)
    current = (stepped.data, stepped.obs, stepped.info)

    def none():
        return current

    def every():
        fresh = reset(keys)
        fresh_info = dict(stepped.info, **{k: fresh.info[k] for k in fresh.info})
        return select_envs(done, (fresh.data, fresh.obs, fresh_info), current)

    def some():
        idx = jnp.nonzero(done, size=max_resets, fill_value=n)[0]
        fresh = reset(keys[jnp.minimum(idx, n - 1)])
        fresh_info = {k: fresh.info[k] for k in fresh.info}
        data, obs, info = scatter_envs(idx, n, (fresh.data, fresh.obs, fresh_info),
                                       (stepped.data, stepped.obs, {k: stepped.info[k]
                                                                    for k in fresh.info}))
        return data, obs, dict(stepped.info, **info)

    branches = [none, every] if max_resets >= n else [none, some, every]
    return jax.lax.switch(branch, branches)


def _max_over_members(x: jax.Array) -> jax.Array:
    """`x` maximized over the members when traced under their vmap, else `x`."""
    try:
        return jax.lax.pmax(x, MEMBER_AXIS)
    except NameError:  # not under the members' vmap: one member
        return x


def scatter_envs(idx: jax.Array, n: int, rows, batch):
    """`batch` (leaves `[N, ...]`) with row `idx[j]` set to row `j` of `rows` (leaves
    `[M, ...]`); indices equal to `n` are dropped. Leaves of `batch` whose leading dimension
    is not N, or whose trailing shape differs from the row's, are kept (as `select_envs`)."""
    m = idx.shape[0]

    def put(a, b):
        if (jnp.ndim(b) == 0 or b.shape[0] != n or jnp.ndim(a) == 0 or a.shape[0] != m
                or a.shape[1:] != b.shape[1:]):
            return b
        return b.at[idx].set(a, mode="drop")

    return jax.tree.map(put, rows, batch)


def wrap_for_training(env, num_envs: int, episode_length: int, action_repeat: int = 1,
                      max_resets: int | None = None, fixed_starts: bool = False):
    """`AutoReset(Vmap(Episode(env)), max_resets, fixed_starts)`: the training env."""
    return AutoReset(Vmap(Episode(env, episode_length, action_repeat), num_envs), max_resets,
                     fixed_starts)


def wrap_for_eval(env, num_envs: int, episode_length: int, action_repeat: int = 1):
    """`Vmap(Episode(env))` without auto-reset: one full episode per env slot."""
    return Vmap(Episode(env, episode_length, action_repeat), num_envs)
