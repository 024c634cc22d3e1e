"""Unroll a policy in a batched env: `Transition[T, N]` for training, full episodes for eval."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from jaxrl.engine.types import State, Transition


def key_like(like: jax.Array, seed: int) -> jax.Array:
    """A key from `seed` of the same kind as `like`: typed (`jax.random.key`, `like`'s
    implementation) when `like` is a typed key array, else raw (`jax.random.PRNGKey`)."""
    if jnp.issubdtype(like.dtype, jax.dtypes.prng_key):
        return jax.random.key(seed, impl=jax.random.key_impl(like))
    return jax.random.PRNGKey(seed)


PolicyFn = Callable[[object, jax.Array], tuple[jax.Array, dict]]


def rollout(env, policy: PolicyFn, state: State, key: jax.Array, unroll_length: int
            ) -> tuple[State, Transition]:
    """Steps `env` (an `AutoReset` batch of N envs) for `unroll_length` steps.

    Args:
        env: batched env whose step fills `info['final_obs']`, `terminated`, `truncated`.
        policy: `(obs [N, ...], key) -> (action [N, A] in [-1, 1], extras)`.
        state: batched env state.
        key: PRNG key, split once per step.
        unroll_length: T.

    Returns:
        (final env state, Transition with leaves `[T, N, ...]`). `extras` holds the policy
        extras plus `done`, `final_episode_return`, `final_episode_length`, `traj_id` (int32
        `[T, N]`: the episode counter of the state the action was taken in, i.e. the episode
        that `obs` and `next_obs` belong to; see `wrappers.AutoReset`), the env's per-step
        metrics of the step (under `env/<name>`, the last action-repeat sub-step's), and the
        per-episode metric sums (under `final_episode_metrics/<name>`: where `done`, the sum
        of the metric over the episode that just ended, all action-repeat sub-steps included;
        elsewhere the running sum).
    """

    def with_carry(obs, k, carry, done):
        return (*policy(obs, k), carry)

    (state, _), traj = rollout_carry(env, with_carry, state, (), key, unroll_length)
    return state, traj


def rollout_carry(env, policy, state: State, carry, key: jax.Array, unroll_length: int):
    """`rollout` for a policy with exploration state (zeta noise, per-env noise scales).

    Args:
        policy: `(obs, key, carry, done [N]) -> (action, extras, carry)`; `done` is 1 where
            the env was just auto-reset (its observation starts a new episode).
        carry: initial exploration state (any pytree).

    Returns:
        ((final env state, final carry), Transition `[T, N, ...]` as in `rollout`).
    """

    def step(c, key_t):
        s, pc = c
        action, extras, pc = policy(s.obs, key_t, pc, s.done)
        ns = env.step(s, action)
        extras = dict(extras, done=ns.done, traj_id=s.info["traj_id"],
                      final_episode_return=ns.info["final_episode_return"],
                      final_episode_length=ns.info["final_episode_length"],
                      **{f"env/{k}": v for k, v in ns.metrics.items()},
                      **{f"final_episode_metrics/{k}": v
                         for k, v in ns.info["final_episode_metrics"].items()})
        tr = Transition(obs=s.obs, action=action, reward=ns.reward,
                        terminated=ns.info["terminated"], truncated=ns.info["truncated"],
                        next_obs=ns.info["final_obs"], extras=extras)
        return (ns, pc), tr

    return jax.lax.scan(step, (state, carry), jax.random.split(key, unroll_length))


def evaluate(env, policy: PolicyFn, key: jax.Array, num_steps: int) -> dict[str, jax.Array]:
    """One episode per env slot with no auto-reset (`env` is `Vmap(Episode(...))`).

    Only completed episodes count: each slot's return is frozen at its first `done`; slots that
    have not finished after `num_steps` (>= the time limit, so none unless it is shorter) are
    left out of the averages.

    Returns:
        `eval/episode_return` (mean), `eval/episode_return_std`, `eval/episode_length`,
        `eval/num_episodes`, and `eval/<metric>` for each env metric at the episode end. When the
        env reports a per-step `success` metric (goal-conditioned envs, `jaxrl.envs.goal`), also
        `eval/episode_success`, the mean over completed episodes of the summed per-step success
        (time near the goal, in steps), and `eval/episode_success_any`, the fraction of
        completed episodes with at least one success step (the success rate). Both as in
        JaxGCRL `jaxgcrl/utils/evaluator.py`.
    """
    key_reset, key_run = jax.random.split(key)
    state = env.reset(key_reset)
    n = state.reward.shape[0]
    zeros = jnp.zeros(n)
    finals = jax.tree.map(jnp.zeros_like, state.metrics)
    has_success = "success" in state.metrics

    def step(carry, key_t):
        s, ret, length, ended, fin, succ = carry
        action, _ = policy(s.obs, key_t)
        ns = env.step(s, action)
        live = 1.0 - ended
        newly = live * ns.done
        fin = jax.tree.map(lambda f, m: jnp.where(newly > 0, m, f), fin, ns.metrics)
        if has_success:
            succ = succ + live * ns.metrics["success"]
        return (ns, ret + live * ns.reward, length + live, jnp.maximum(ended, ns.done), fin,
                succ), None

    init = (state, zeros, zeros, zeros, finals, zeros)
    (_, ret, length, ended, fin, succ), _ = jax.lax.scan(
        step, init, jax.random.split(key_run, num_steps))
    count = jnp.maximum(ended.sum(), 1.0)
    mean = (ret * ended).sum() / count
    var = (jnp.square(ret - mean) * ended).sum() / count
    out = {"eval/episode_return": mean, "eval/episode_return_std": jnp.sqrt(var),
           "eval/episode_length": (length * ended).sum() / count, "eval/num_episodes": ended.sum()}
    out.update({f"eval/{k}": (v * ended).sum() / count for k, v in fin.items()})
    if has_success:
        out["eval/episode_success"] = (succ * ended).sum() / count
        out["eval/episode_success_any"] = ((succ > 0) * ended).sum() / count
    return out
