"""JaxGCRL's side of `crl_throughput.py`: its step accounting (`peer_plan`) and the worker that
runs inside `.venv-jaxgcrl` (jax 0.4.25, brax 0.12.1, jaxgcrl 0.2.8), where jaxrl is not
installed. Imports nothing from jaxrl; the peer packages are imported inside the functions.

(a) `raw_peer`: random actions through `jaxgcrl.utils.env.create_env(peer_env)` (Brax
    `PipelineEnv`), as `_common.time_random_rollout` times ours.
(b) `peer_crl`: `jaxgcrl.agents.CRL(...).train_fn(config=RunConfig(...), train_env, eval_env,
    progress_fn)`. No wandb, no rendering (our `progress_fn` ignores `do_render`), no
    checkpoints (`checkpoint_logdir=None`). Three defects of jaxgcrl 0.2.8 are worked around
    without touching its code: (1) its `ActorEvaluator` reads the episode metrics
    `success_easy`, `distance_from_origin` and `dist`, which `Reacher` and `Pusher` do not all
    emit, so the env is wrapped in a Brax wrapper that adds them (`with_eval_metrics`); (2)
    `train_fn` returns `params`, which is only bound when `checkpoint_logdir` is set, so its
    `UnboundLocalError` after the last evaluation is caught (the metrics come from
    `progress_fn`); (3) it asserts at the end that it ran at least `total_env_steps` although it
    rounds the epochs down, so the worker passes the budget rounded down to whole epochs
    (`aligned_total_env_steps`, same epoch count).
"""

from __future__ import annotations

import json
import math
import os
import platform
import time

import _common as common

PEER_PACKAGES = ("jaxgcrl",)


def peer_plan(s: dict) -> dict:
    """The peer's step accounting for settings `s` (from JaxGCRL's documented loop), and the
    equal-work `utd_ratio` for ours.

    Raises:
        ValueError: settings JaxGCRL rejects (or would sample garbage with).
    """
    n, u, length, b = s["num_envs"], s["unroll_length"], s["episode_length"], s["batch_size"]
    if n * (length - 1) % b:
        raise ValueError(f"num_envs * (episode_length - 1) = {n * (length - 1)} is not "
                         f"divisible by batch_size {b} (JaxGCRL asserts it).")
    if s["min_replay_size"] <= length:
        raise ValueError("--min-replay-size (rows) must exceed --episode-length: JaxGCRL samples "
                         "windows of episode_length rows from the prefilled buffer.")
    if s["max_replay_size"] < s["min_replay_size"] + u:
        raise ValueError("--max-replay-size is too small for the prefill.")
    per_collect = n * u
    prefill_collects = math.ceil(s["min_replay_size"] / u)
    steps_per_epoch = (s["total_env_steps"] - s["min_replay_size"] * n) // (
        s["num_evals"] * per_collect)
    if steps_per_epoch <= 0:
        raise ValueError("--total-env-steps too small for the prefill and --num-evals epochs.")
    grad_per_collect = n * (length - 1) // b
    collects = prefill_collects + s["num_evals"] * steps_per_epoch
    aligned = s["min_replay_size"] * n + s["num_evals"] * steps_per_epoch * per_collect
    return {"env_steps_per_collect": per_collect, "prefill_collects": prefill_collects,
            "aligned_total_env_steps": aligned,
            "prefill_env_steps": prefill_collects * per_collect,
            "training_steps_per_epoch": steps_per_epoch, "env_steps": collects * per_collect,
            "grad_steps_per_collect": grad_per_collect,
            "grad_steps": s["num_evals"] * steps_per_epoch * grad_per_collect,
            "utd_ratio": grad_per_collect / u}


# ----- (a) raw stepping of the peer env (inside the JaxGCRL venv) --------------------------
def raw_peer(s: dict) -> dict:
    """Raw stepping of JaxGCRL's env (no wrappers), as `common.raw_ours` does for ours."""
    import jax
    from jaxgcrl.utils.env import create_env

    env = create_env(s["peer_env"], backend=s["peer_backend"])
    keys = jax.random.split(jax.random.PRNGKey(s["seed"]), s["num_envs"])
    state = jax.jit(jax.vmap(env.reset))(keys)
    out = common.time_random_rollout(env.step, state, env.action_size, s["num_envs"],
                                     s["raw_steps"], s["raw_repeats"], s["seed"])
    return dict(out, backend=getattr(env, "backend", None), dt=float(env.dt))


# ----- (b) the peer: JaxGCRL's CRL, inside the JaxGCRL venv ---------------------------------
def with_eval_metrics(env):
    """`env` plus the episode metrics jaxgcrl 0.2.8's `ActorEvaluator` reads when the env lacks
    them: `dist` as `-reward_dist` (the pusher's object-goal distance) and `success_easy` /
    `distance_from_origin` as zeros (`Reacher` and `Pusher` emit neither)."""
    import jax.numpy as jnp
    from brax.envs.base import Wrapper

    def fill(metrics, reward):
        if "dist" not in metrics:
            metrics["dist"] = -metrics["reward_dist"] if "reward_dist" in metrics else (
                jnp.zeros_like(reward))
        for k in ("success_easy", "distance_from_origin"):
            metrics.setdefault(k, jnp.zeros_like(reward))

    class FillMetrics(Wrapper):
        def reset(self, rng):
            state = self.env.reset(rng)
            fill(state.metrics, state.reward)
            return state

        def step(self, state, action):
            nstate = self.env.step(state, action)
            fill(nstate.metrics, nstate.reward)
            return nstate

    return FillMetrics(env)


def peer_crl(s: dict) -> dict:
    """Part (b): trains JaxGCRL's CRL; times, SPS and the success metrics of every evaluation."""
    from jaxgcrl.agents import CRL
    from jaxgcrl.utils.config import RunConfig
    from jaxgcrl.utils.env import create_env

    plan = peer_plan(s)
    clock = common.CompileClock().install()
    env = with_eval_metrics(create_env(s["peer_env"], backend=s["peer_backend"]))
    agent = CRL(policy_lr=s["lr"], critic_lr=s["lr"], alpha_lr=s["lr"],
                batch_size=s["batch_size"], discounting=s["discounting"],
                logsumexp_penalty_coeff=s["logsumexp_penalty"],
                max_replay_size=s["max_replay_size"], min_replay_size=s["min_replay_size"],
                unroll_length=s["unroll_length"], h_dim=s["h_dim"], n_hidden=s["n_hidden"],
                repr_dim=s["repr_dim"], contrastive_loss_fn=s["contrastive_loss"],
                energy_fn=s["energy"])
    run = RunConfig(env=s["peer_env"], total_env_steps=plan["aligned_total_env_steps"],
                    episode_length=s["episode_length"], num_envs=s["num_envs"],
                    num_eval_envs=s["num_eval_envs"], action_repeat=1,
                    num_evals=s["num_evals"], seed=s["seed"], backend=s["peer_backend"],
                    log_wandb=False, visualization_interval=10**9, checkpoint_logdir=None)
    evals = []

    def progress(step, metrics, *args, **kwargs):
        del args, kwargs
        evals.append({"time": time.perf_counter(), "env_steps": int(step),
                      **{k: float(v) for k, v in metrics.items()
                         if k.startswith(("eval/", "training/"))}})

    t0 = time.perf_counter()
    try:
        agent.train_fn(config=run, train_env=env, eval_env=env, progress_fn=progress)
    except UnboundLocalError as e:  # `params` is bound only with checkpoint_logdir
        if "params" not in str(e) or len(evals) != s["num_evals"]:
            raise
    t1 = time.perf_counter()
    total = t1 - t0
    compile_s = clock.wall_seconds_between(t0, t1)
    eval_s = sum(e["eval/epoch_eval_time"] for e in evals)
    eval_compile = sum(clock.wall_seconds_between(e["time"] - e["eval/epoch_eval_time"],
                                                  e["time"]) for e in evals)
    train_s = total - compile_s - (eval_s - eval_compile)
    epoch_s = [e["training/walltime"] - (evals[i - 1]["training/walltime"] if i else 0.0)
               for i, e in enumerate(evals)]
    per_epoch = plan["training_steps_per_epoch"] * plan["env_steps_per_collect"]
    steady = epoch_s[1:] or epoch_s
    final = evals[-1]
    return {"env_steps": final["env_steps"], "env_steps_planned": plan["env_steps"],
            "total_seconds": total, "compile_seconds": compile_s, "train_seconds": train_s,
            "eval_seconds": eval_s, "eval_compile_seconds": eval_compile,
            "sps": final["env_steps"] / train_s,
            "steady_sps": per_epoch * len(steady) / sum(steady),
            "epoch_seconds": epoch_s, "prefill_and_setup_seconds":
                evals[0]["time"] - t0 - epoch_s[0] - evals[0]["eval/epoch_eval_time"],
            "grad_steps": plan["grad_steps"],
            "success_any": final["eval/episode_success_any"],
            "episode_success": final["eval/episode_success"],
            "episode_dist": final.get("eval/episode_dist"),
            "evals": [{k: v for k, v in e.items() if k != "time"} for e in evals],
            "backend": getattr(env, "backend", None), "dt": float(env.dt),
            "agent_config": {k: v for k, v in vars(agent).items()},
            "loadavg_at_end": common.machine_info()["loadavg_1_5_15"]}


def peer_worker(settings_json: str) -> None:
    """Entry point inside the JaxGCRL venv: prints `RESULT_TAG + json` on one line."""
    os.environ.setdefault("WANDB_MODE", "disabled")
    s = json.loads(settings_json)
    out = {"versions": common.versions(PEER_PACKAGES), "python": platform.python_version()}
    if not s.get("skip_raw"):
        out["raw"] = raw_peer(s)
    out["crl"] = peer_crl(s)
    common.print_worker_result(out)
