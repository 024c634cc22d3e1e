"""CRL throughput and success: our `crl` agent vs JaxGCRL's CRL (Bortkiewicz et al., ICLR 2025;
PyPI `jaxgcrl`) on a goal task (the reacher by default; `--env PusherGoal --peer-env pusher_easy`
for the pusher), with the same work per env step. `benchmarks/crl_vs_jaxgcrl.py` runs it over
seeds and sides and draws the learning curves.

Prints one table (rows: each side's raw env stepping and CRL training) with env steps, compile
and training seconds, SPS (env steps/s) and the final evaluation's success metrics, plus
settings, machine and versions; every number (per-evaluation curves included) goes to
`crl_throughput.json` next to this file (`--json PATH` elsewhere, `--json ''` nowhere).

Env differences that remain: both are Brax's `reacher` on the `generalized` pipeline (dt 0.02 s)
with success below 0.05 m; JaxGCRL's observation is 10 state dims + the 3-D target position (goal
= fingertip x, y, z), ours 8 + the x-y target; under Brax's cached auto-reset JaxGCRL's training
envs keep one target per env slot for the whole run (JaxGCRL #53), ours draws a new goal at
every reset (`--fixed-starts` gives ours JaxGCRL's: `TrainConfig.fixed_starts`). Evaluation
envs are reset fresh on both sides. Batches: ours draws independent pairs by default;
`--sampling windows` cuts JaxGCRL's whole-window batches (`CRLConfig.sampling`). Our actor's
init scale is `CRLConfig`'s default (1/3, JaxGCRL's) unless `--actor-init-scale` sets it;
`--random-goals` sets `CRLConfig.random_goals` (default 0: the actor sees only its own goals);
`--log-det-epsilon` sets `CRLConfig.log_det_epsilon` (default 0: the exact tanh log-det).

Work matched on both sides: num_envs N, unroll_length U, batch B, episode_length L, networks
(`h_dim x n_hidden` = 256 x 2 swish for phi(s, a), psi(g) and the actor, repr 64), lr 3e-4
(actor, critic, alpha), gamma 0.99, forward InfoNCE with `norm` energy and a 0.1 logsumexp
penalty, and the gradient steps per collected env step. JaxGCRL, after each collect of U x N env
steps, samples one L-row window per env, relabels it to N x (L - 1) transitions and runs all
`G = N (L - 1) / B` batches of it (it asserts the divisibility); our `utd_ratio` is gradient
steps per vectorized env step, so the equal-work setting is `utd_ratio = G / U`.

(a) raw: random actions, `jax.jit(lax.scan(vmap(env.step)))`, two warm-up calls excluded (no
    auto-reset). Peer: `jaxgcrl.utils.env.create_env("reacher")` (Brax `PipelineEnv`, backend
    `generalized` by default for reacher, `--peer-backend` overrides); ours:
    `jaxrl.envs.make("ReacherGoal")`.
(b) peer: `jaxgcrl.agents.CRL(...).train_fn(config=RunConfig(...), train_env, eval_env,
    progress_fn)` in `.venv-jaxgcrl` (jax 0.4.25, brax 0.12.1; `--setup-jaxgcrl-venv` installs
    `JAXGCRL_PINS`), through a worker subprocess as in the other benchmark scripts. No
    wandb, rendering or checkpoints; three jaxgcrl 0.2.8 defects are worked around
    (`_jaxgcrl_peer.py`, which also holds the step accounting `peer_plan`).
    Prefill: `ceil(min_replay_size / U)` collects with the untrained actor, no updates; then
    `num_evals` epochs of `(total - min_replay_size N) // (num_evals U N)` training steps, each
    followed by an evaluation (deterministic actor, `num_eval_envs` envs, one L-step episode each).
    Timing: compile = wall time inside jax tracing/lowering/compilation (union of the intervals
    jax logs, so nested jits are not counted twice); train = the whole `train_fn` wall time minus
    compile minus evaluation (evaluation's own compile is counted once, in compile); steady SPS
    = env steps / time of the epochs after the first (JaxGCRL's own `training/sps`).
(c) ours: `jaxrl.run.runner.train("crl", "ReacherGoal", TrainConfig(num_envs=N, unroll_length=U,
    episode_length=L, total_env_steps=<the peer's real env-step count>, num_chunks=num_evals,
    num_eval_envs=...), cfg)` in its own process, with the config fields above set where our
    `crl` config has a field of that name (the JSON lists which were set and which were not
    found). `learning_starts` = the peer's prefill env steps + one collect (ours updates in the
    iteration whose insert reaches it; JaxGCRL's first update follows the first collect after
    the prefill), so both take the same number of gradient steps; `buffer_size` = the peer's
    `max_replay_size x N`. Compile is excluded by the runner (ahead of time); train = the chunk
    loop without evaluation.

Defaults: 128 envs, episode length 51 (ours: 50 by default; JaxGCRL needs `num_envs x
(episode_length - 1)` divisible by the batch), unroll 4, batch 256, 300k env steps, 5
evaluations: 25 gradient steps per 512 env steps, 14,000 in all, enough for JaxGCRL to reach
success_any ~0.97 on reacher. On the 2 shared CPU cores (load average ~7 from other jobs) the
peer took 24 min (compile ~3 min). `--unroll-length 62 --min-replay-size 310` (JaxGCRL's unroll)
is ~13x less gradient work per env step and runs in a few minutes, mostly compiling.

    .venv/bin/python benchmarks/crl_throughput.py --setup-jaxgcrl-venv   # once
    nice -n 5 .venv/bin/python benchmarks/crl_throughput.py     # writes crl_throughput.json
    nice -n 5 .venv/bin/python benchmarks/crl_throughput.py --peer-json OLD.json   # ours only

This file and `_jaxgcrl_peer.py` import nothing from jaxrl at module level, so the peer
worker runs without jaxrl.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import _common as common
from _jaxgcrl_peer import PEER_PACKAGES, peer_plan, peer_worker

NAME = "crl_throughput"
DEFAULT_JAXGCRL_VENV = os.path.join(common.REPO, ".venv-jaxgcrl")
DEFAULT_JSON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "crl_throughput.json")
JAXGCRL_PINS = ("jax==0.4.25", "jaxlib==0.4.25", "brax==0.12.1", "mujoco==3.2.7",
                "mujoco-mjx==3.2.7", "numpy<2", "scipy<1.14", "flax", "tyro", "wandb",
                "wandb-osh", "matplotlib")
"""First install into the JaxGCRL venv; then `pip install --no-deps jaxgcrl` (its own pins ask
for a CUDA jaxlib build that PyPI does not serve; newer brax lacks `brax.v1`)."""

# Our `CRLConfig` fields set from each shared setting.
OURS_FIELDS = {"lr": ("learning_rate", "critic_learning_rate", "alpha_learning_rate"),
               "hidden": ("hidden", "actor_hidden"), "gamma": ("gamma",)}
OURS_ONLY = ("fixed_starts", "sampling", "actor_init_scale", "random_goals", "log_det_epsilon")
"""Settings of our side alone (the peer's part of an earlier --json is reused across them)."""
OURS_FIELDS.update({k: (k,) for k in (
    "batch_size", "utd_ratio", "repr_dim", "logsumexp_penalty", "energy", "contrastive_loss",
    "learning_starts", "buffer_size") + OURS_ONLY[1:]})


def parse_args(argv=None) -> argparse.Namespace:
    """Command-line settings (JaxGCRL's names where there is one)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="ReacherGoal", help="our env name")
    p.add_argument("--peer-env", default="reacher", help="JaxGCRL env name")
    p.add_argument("--peer-backend", default=None,
                   help="Brax backend of the peer env (default: JaxGCRL's, generalized for "
                        "reacher; mjx also works)")
    p.add_argument("--num-envs", type=int, default=128)
    p.add_argument("--unroll-length", type=int, default=4,
                   help="JaxGCRL's default is 62; 4 gives 1 gradient step per 20 env steps at "
                        "the other defaults (JaxGCRL's Ant defaults: about 1 per 16)")
    p.add_argument("--episode-length", type=int, default=51,
                   help="JaxGCRL's default is 1001 for every env (scripts use 1000); "
                        "num_envs * (episode_length - 1) must be divisible by batch_size")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--total-env-steps", type=int, default=300_000,
                   help="peer budget; its real count (prefill + whole epochs) is given to ours")
    p.add_argument("--num-evals", type=int, default=5, help="peer epochs = our chunks")
    p.add_argument("--min-replay-size", type=int, default=100,
                   help="peer prefill rows per env (JaxGCRL's default 1000); must exceed "
                        "episode_length")
    p.add_argument("--max-replay-size", type=int, default=10_000, help="peer buffer rows")
    p.add_argument("--num-eval-envs", type=int, default=128)
    p.add_argument("--h-dim", type=int, default=256)
    p.add_argument("--n-hidden", type=int, default=2)
    p.add_argument("--repr-dim", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-4, help="actor, critic and alpha")
    p.add_argument("--discounting", type=float, default=0.99)
    p.add_argument("--raw-steps", type=int, default=100, help="scan length of one raw call")
    p.add_argument("--raw-repeats", type=int, default=3, help="timed raw calls after warm-up")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fixed-starts", action="store_true",
                   help="ours: every episode of an env slot restarts from its first state (one "
                        "goal per slot, as JaxGCRL trains under Brax's cached auto-reset)")
    p.add_argument("--sampling", default="pairs", choices=("pairs", "windows"),
                   help="ours: `pairs` (our default) or `windows` (JaxGCRL's batches)")
    p.add_argument("--actor-init-scale", type=float, default=None,
                   help="ours: actor kernel init scale (default: our crl config's, 1/3 as "
                        "JaxGCRL's; 1.0 is plain lecun uniform)")
    p.add_argument("--random-goals", type=float, default=None,
                   help="ours: share of actor goals taken from other pairs (default: our crl "
                        "config's, 0 as JaxGCRL)")
    p.add_argument("--log-det-epsilon", type=float, default=None,
                   help="ours: eps in the actor loss's log(1 - tanh(u)^2 + eps) (default: our "
                        "crl config's, 0: exact; JaxGCRL's is 1e-6)")
    p.add_argument("--skip", default="", help="comma list of parts to skip: raw,ours,peer")
    p.add_argument("--jaxgcrl-venv", default=DEFAULT_JAXGCRL_VENV)
    p.add_argument("--peer-timeout", type=int, default=3600, help="seconds for the peer worker")
    p.add_argument("--ours-timeout", type=int, default=3600, help="seconds for our worker")
    p.add_argument("--verbose", action="store_true", help="show simulator/compiler output")
    p.add_argument("--json", dest="json_path", default=DEFAULT_JSON,
                   help="write all numbers here (default: next to this file; '' writes nothing)")
    p.add_argument("--peer-json", default=None,
                   help="take the peer's part (raw and CRL) from this earlier --json instead of "
                        "running it; its settings must equal these")
    p.add_argument("--from-json", default=None, help="print the table of a saved --json, exit")
    p.add_argument("--setup-jaxgcrl-venv", action="store_true",
                   help="create the JaxGCRL venv, exit")
    p.add_argument("--peer-worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--ours-worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.peer_worker is None and args.ours_worker is None:
        try:
            peer_plan(settings_from_args(args))
        except ValueError as e:
            p.error(str(e))
    return args


def settings_from_args(args: argparse.Namespace) -> dict:
    """The JSON-able settings shared by every part (and sent to the workers)."""
    return {"env": args.env, "peer_env": args.peer_env, "peer_backend": args.peer_backend,
            "num_envs": args.num_envs, "unroll_length": args.unroll_length,
            "episode_length": args.episode_length, "batch_size": args.batch_size,
            "total_env_steps": args.total_env_steps, "num_evals": args.num_evals,
            "min_replay_size": args.min_replay_size, "max_replay_size": args.max_replay_size,
            "num_eval_envs": args.num_eval_envs, "h_dim": args.h_dim, "n_hidden": args.n_hidden,
            "repr_dim": args.repr_dim, "lr": args.lr, "discounting": args.discounting,
            "logsumexp_penalty": 0.1, "energy": "norm", "contrastive_loss": "fwd_infonce",
            "raw_steps": args.raw_steps, "raw_repeats": args.raw_repeats, "seed": args.seed,
            "fixed_starts": args.fixed_starts, "sampling": args.sampling,
            "actor_init_scale": args.actor_init_scale, "random_goals": args.random_goals,
            "log_det_epsilon": args.log_det_epsilon}


def run_peer_subprocess(s: dict, venv: str, timeout: int, skip_raw: bool) -> dict:
    """Runs `peer_worker` with `venv`'s Python; `{"error": ...}` when it fails or times out."""
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        raise SystemExit(f"No JaxGCRL venv at {venv}; create it with --setup-jaxgcrl-venv.")
    log = common.worker_log_path(NAME, "jaxgcrl")
    try:
        return common.run_worker(python, __file__, "--peer-worker", dict(s, skip_raw=skip_raw),
                                 timeout, log)
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {timeout} s; killed. Worker stderr: {log}"}
    except RuntimeError as e:
        return {"error": str(e)[-3000:]}


def load_peer(path: str, s: dict) -> dict:
    """The peer part of an earlier `--json`, after checking that its settings equal `s`."""
    with open(path) as f:
        old = json.load(f)
    keys = [k for k in s if k not in ("env", "raw_steps", "raw_repeats") + OURS_ONLY]
    diff = {k: (old["settings"].get(k), s[k]) for k in keys if old["settings"].get(k) != s[k]}
    if diff:
        raise SystemExit(f"--peer-json {path} was measured with other settings (old, now): {diff}")
    if not (old.get("peer") or {}).get("crl"):
        raise SystemExit(f"--peer-json {path} holds no peer CRL result.")
    return dict(old["peer"], reused_from=path, measured_at_load=old["machine"]["loadavg_1_5_15"])


# ----- (c) ours ----------------------------------------------------------------------------
def ours_configs(s: dict):
    """`(TrainConfig, our CRLConfig, {setting: [fields set]})`."""
    from jaxrl.agents.crl import CRLConfig
    from jaxrl.engine.loop import TrainConfig

    plan = peer_plan(s)
    values = {"batch_size": s["batch_size"], "utd_ratio": plan["utd_ratio"], "lr": s["lr"],
              "hidden": (s["h_dim"],) * s["n_hidden"], "repr_dim": s["repr_dim"],
              "gamma": s["discounting"],
              "logsumexp_penalty": s["logsumexp_penalty"],
              "energy": {"norm": "distance", "l2": "sq_distance"}.get(s["energy"], s["energy"]),
              "contrastive_loss": s["contrastive_loss"],
              "learning_starts": plan["prefill_env_steps"] + plan["env_steps_per_collect"],
              "buffer_size": s["max_replay_size"] * s["num_envs"],
              "sampling": s.get("sampling", "pairs"),
              "actor_init_scale": s.get("actor_init_scale"),
              "random_goals": s.get("random_goals"),
              "log_det_epsilon": s.get("log_det_epsilon")}
    # Settings not given on the command line (None) keep our config's default.
    applied = {k: list(f) for k, f in OURS_FIELDS.items() if values[k] is not None}
    agent_cfg = CRLConfig(**{f: values[k] for k, fields in applied.items() for f in fields})
    cfg = TrainConfig(num_envs=s["num_envs"], unroll_length=s["unroll_length"],
                      unrolls_per_update=1, total_env_steps=plan["env_steps"],
                      num_chunks=s["num_evals"], num_eval_envs=s["num_eval_envs"],
                      episode_length=s["episode_length"],
                      fixed_starts=bool(s.get("fixed_starts")))
    return cfg, agent_cfg, applied


def run_ours(s: dict) -> dict:
    """Part (c): our `crl` at the matched settings; times, SPS, success of every evaluation."""
    import dataclasses

    import numpy as np

    from jaxrl.engine.loop import RunConfig
    from jaxrl.run import runner

    cfg, agent_cfg, applied = ours_configs(s)
    result = runner.train("crl", s["env"], cfg, agent_cfg, run_dir=None, progress=False,
                          run=RunConfig(seed=s["seed"]))
    recs, final = result.records, result.records[-1]
    chunk_s = [r["wall_time"] - (recs[i - 1]["wall_time"] if i else 0.0)
               for i, r in enumerate(recs)]
    per_chunk = cfg.iterations_per_chunk * cfg.env_steps_per_iteration
    steady = chunk_s[1:] or chunk_s
    grad = getattr(result.runner.agent_state, "num_updates", None)
    return {"env_steps": result.env_steps, "compile_seconds": result.compile_seconds,
            "train_seconds": result.train_seconds,
            "sps": result.env_steps / result.train_seconds,
            "steady_sps": per_chunk * len(steady) / sum(steady), "chunk_seconds": chunk_s,
            "grad_steps": None if grad is None else int(np.asarray(grad).reshape(-1)[0]),
            "success_any": final.get("eval/episode_success_any"),
            "episode_success": final.get("eval/episode_success"),
            "episode_dist": final.get("eval/episode_dist"),
            "evals": [{k: v for k, v in r.items() if k.startswith(("eval/", "perf/"))
                       or k in ("env_steps", "wall_time")} for r in recs],
            "fields_set": applied,
            "agent_config": {k: (list(v) if isinstance(v, tuple) else v)
                             for k, v in dataclasses.asdict(agent_cfg).items()},
            "train_config": {k: v for k, v in dataclasses.asdict(cfg).items()},
            "loadavg_at_end": common.machine_info()["loadavg_1_5_15"]}


def ours_worker(payload_json: str) -> None:
    """Entry point of our process: prints `RESULT_TAG + json` on one line."""
    payload = json.loads(payload_json)
    s = payload["settings"]
    out = {}
    with common.quiet(payload["quiet_log"]):
        if not s.get("skip_raw"):
            out["raw"] = common.raw_ours(dict(s, impl=None))
        out["crl"] = run_ours(s)
    common.print_worker_result(out)


def run_ours_subprocess(s: dict, timeout: int, quiet_log: str | None, skip_raw: bool) -> dict:
    """Runs our part in a fresh process of this Python; `{"error": ...}` on failure."""
    payload = {"settings": dict(s, skip_raw=skip_raw), "quiet_log": quiet_log}
    log = common.worker_log_path(NAME, "ours")
    try:
        return common.run_worker(sys.executable, __file__, "--ours-worker", payload, timeout, log)
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {timeout} s (compile included); killed. Worker "
                         f"stderr: {log}"}
    except RuntimeError as e:
        return {"error": str(e)[-3000:]}


# ----- output ------------------------------------------------------------------------------
def _num(x, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def format_table(res: dict) -> str:
    """Markdown table (raw and training rows per side), followed by details."""
    fmt, s = common.fmt, res["settings"]
    head = ("| impl | env | num_envs | env steps | compile s | train s | SPS | success_any | "
            "episode_success |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    rows = [head]
    sides = (("JaxGCRL", s["peer_env"], res.get("peer") or {}),
             ("jaxrl", s["env"], res.get("ours") or {}))
    for impl, env, side in sides:
        raw = side.get("raw")
        if raw:
            rows.append(f"| {impl} raw stepping | {env} | {s['num_envs']} | "
                        f"{fmt(raw['env_steps'])} | - | {raw['seconds']:.1f} | "
                        f"{fmt(raw['sps'])} | - | - |")
    for impl, env, side in sides:
        o = side.get("crl")
        if o:
            rows.append(f"| {impl} CRL | {env} | {s['num_envs']} | {fmt(o['env_steps'])} | "
                        f"{o['compile_seconds']:.1f} | {o['train_seconds']:.1f} | "
                        f"{fmt(o['sps'])} | {_num(o['success_any'])} | "
                        f"{_num(o['episode_success'], 1)} |")
        elif side.get("error"):
            rows.append(f"| {impl} CRL | {env} | {s['num_envs']} | failed | - | - | - | - | - |")
    return "\n".join(rows + [""] + details(res))


def details(res: dict) -> list[str]:
    """Settings, mapping and secondary numbers as bullet lines."""
    fmt, s, plan = common.fmt, res["settings"], res["plan"]
    out = [f"- settings: num_envs {s['num_envs']}, unroll_length {s['unroll_length']}, "
           f"episode_length {s['episode_length']}, batch {s['batch_size']}, networks "
           f"{s['h_dim']}x{s['n_hidden']} swish, repr {s['repr_dim']}, lr {s['lr']:g}, gamma "
           f"{s['discounting']}, {s['contrastive_loss']} / {s['energy']} energy, logsumexp "
           f"penalty {s['logsumexp_penalty']}, {s['num_evals']} evaluations of "
           f"{s['num_eval_envs']} envs x {s['episode_length']} steps",
           f"- equal work: JaxGCRL runs num_envs x (episode_length - 1) / batch = "
           f"{plan['grad_steps_per_collect']} gradient steps per collect of "
           f"{fmt(plan['env_steps_per_collect'])} env steps ({s['unroll_length']} per env); "
           f"ours utd_ratio = {plan['grad_steps_per_collect']} / {s['unroll_length']} = "
           f"{plan['utd_ratio']:.4f}; prefill {plan['prefill_collects']} collects = "
           f"{fmt(plan['prefill_env_steps'])} env steps without updates (ours: learning_starts = "
           f"that + 1 collect), "
           f"then {s['num_evals']} x {plan['training_steps_per_epoch']} collects; "
           f"{fmt(plan['grad_steps'])} gradient steps in all"]
    p = (res.get("peer") or {})
    if p.get("error"):
        out.append(f"- JaxGCRL failed: {p['error'].splitlines()[0]}")
    if p.get("crl"):
        o = p["crl"]
        out.append(f"- JaxGCRL: backend {o['backend']} (dt {o['dt']}); total wall "
                   f"{o['total_seconds']:.1f} s = compile {o['compile_seconds']:.1f} + train "
                   f"{o['train_seconds']:.1f} + evaluation "
                   f"{o['eval_seconds'] - o['eval_compile_seconds']:.1f} "
                   f"(evaluation compile {o['eval_compile_seconds']:.1f} s is in compile); "
                   f"steady SPS (epochs 2+, JaxGCRL's training/sps) {fmt(o['steady_sps'])}; "
                   f"epoch seconds {[round(x, 1) for x in o['epoch_seconds']]}; success_any by "
                   f"evaluation {[round(e['eval/episode_success_any'], 2) for e in o['evals']]}; "
                   f"load average at end {o['loadavg_at_end']}")
    if p.get("reused_from"):
        out.append(f"- JaxGCRL part reused from {p['reused_from']} (measured at load average "
                   f"{p['measured_at_load']})")
    if p.get("raw"):
        out.append(f"- JaxGCRL raw stepping: backend {p['raw']['backend']}, dt {p['raw']['dt']}")
    o = res.get("ours") or {}
    if o.get("error"):
        out.append(f"- ours failed: {o['error'].splitlines()[0]}")
    if o.get("crl"):
        c = o["crl"]
        out.append(f"- ours: steady SPS (chunks 2+) {fmt(c['steady_sps'])}; gradient steps "
                   f"{fmt(c['grad_steps'])} (JaxGCRL: {fmt(plan['grad_steps'])}); config fields "
                   f"set {sorted(f for v in c['fields_set'].values() for f in v)}; load "
                   f"average at end {c['loadavg_at_end']}")
    out += common.machine_lines(res)
    if p.get("versions"):
        out.append(f"- versions (JaxGCRL venv): {common.vers(p['versions'])}")
    return out


def main(argv=None) -> None:
    """Runs the parts not skipped, prints the table, optionally writes JSON."""
    args = parse_args(argv)
    if args.peer_worker is not None:
        return peer_worker(args.peer_worker)
    if args.ours_worker is not None:
        return ours_worker(args.ours_worker)
    if args.setup_jaxgcrl_venv:
        return common.setup_venv(
            args.jaxgcrl_venv, [list(JAXGCRL_PINS), ["--no-deps", *PEER_PACKAGES]],
            "import jaxgcrl.agents, jax, brax; print('jaxgcrl venv ok, jax', jax.__version__)")
    if args.from_json:
        with open(args.from_json) as f:
            return print(format_table(json.load(f)))
    skip = set(filter(None, args.skip.split(",")))
    s = settings_from_args(args)
    res = {"settings": s, "plan": peer_plan(s), "machine": common.machine_info(),
           "versions": common.versions(), "command": " ".join(sys.argv)}
    print(f"equal work: {res['plan']['grad_steps_per_collect']} gradient steps per collect of "
          f"{res['plan']['env_steps_per_collect']:,} env steps; ours utd_ratio "
          f"{res['plan']['utd_ratio']:.4f}; {res['plan']['env_steps']:,} env steps", flush=True)
    if args.peer_json:
        res["peer"] = load_peer(args.peer_json, s)
        print(f"JaxGCRL part taken from {args.peer_json}", flush=True)
    elif "peer" not in skip:
        print(f"JaxGCRL worker running in {args.jaxgcrl_venv} (stderr: "
              f"{common.worker_log_path(NAME, 'jaxgcrl')})", flush=True)
        t = time.time()
        res["peer"] = p = run_peer_subprocess(s, args.jaxgcrl_venv, args.peer_timeout,
                                              "raw" in skip)
        print(f"JaxGCRL ({time.time() - t:.0f} s): " + (p["error"] if "error" in p else
              f"{p['crl']['sps']:,.0f} SPS, success_any {p['crl']['success_any']:.2f}"),
              flush=True)
        common.write_json(args.json_path, res)  # keep what is done if a later part fails
    if "ours" not in skip:
        log = common.start_quiet_log(NAME, args.verbose)
        t = time.time()
        res["ours"] = o = run_ours_subprocess(s, args.ours_timeout, log, "raw" in skip)
        msg = (o.get("error")
               or f"{o['crl']['sps']:,.0f} SPS, success_any {_num(o['crl']['success_any'])}")
        print(f"ours ({time.time() - t:.0f} s): {msg}", flush=True)
    print(format_table(res))
    common.write_json(args.json_path, res)


if __name__ == "__main__":
    main()
