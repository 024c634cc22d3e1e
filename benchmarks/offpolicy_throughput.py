"""Off-policy throughput: raw MJX stepping vs our SAC family vs Brax's own SAC trainer, with the
same env, num_envs, batch size, updates per env step and replay sizes.

Prints one table (rows: raw stepping, Brax SAC, and each of our agents) with training SPS (env
steps/s) and gradient steps/s, plus settings, machine and the package versions of each side;
`--json PATH` also writes every number.

(a) raw: random actions, `jax.jit(lax.scan(vmap(env.step)))` over `jaxrl.envs.make(name,
    impl=impl)`, timed after two warm-up calls with `block_until_ready` (no auto-reset).
(b) ours: `jaxrl.run.runner.train(agent, ...)` for each agent in `--agents`, starting from the
    agent config of its CPU preset (`AGENT_PRESETS`: architecture, losses, exploration) with
    `batch_size`, `utd_ratio` (= Brax `grad_updates_per_step`), `learning_starts` (= Brax
    `min_replay_size`) and `buffer_size` (= Brax `max_replay_size`) set from the command line,
    `TrainConfig(unroll_length=1, unrolls_per_update=1, num_eval_envs=0)`: one env step per env,
    then `utd_ratio` gradient steps, as Brax's `training_step` does. Compile is excluded (the
    runner compiles ahead of time). SPS and gradient steps/s count the chunks after the one in
    which learning starts (Brax times its random prefill apart from its epochs as well); the
    gradient-step count is checked against the final `agent_state.num_updates`. One gradient
    step = one critic step (+ target update); actor and temperature step every `policy_delay`
    critic steps (1 for sac/fastdsac, as in Brax; 2 for warpsac). Each agent runs in its own
    process (this file with `--ours-worker`), killed after `--ours-timeout` seconds, so a hung
    or crashed agent costs only its row.
(c) brax: `brax.training.agents.sac.train` on the same Playground env
    (`registry.load(name, config_overrides={"impl": impl})`, wrapped by Playground's
    `wrapper.wrap_for_brax_training`), MLPs 256x2 (Brax's default), observation normalization
    on, lr 1e-3, discount 0.99, tau 0.005, reward scale 1, `num_evals = num_chunks + 1`.
    Brax's SAC trainer always evaluates after each epoch; the worker replaces its `Evaluator`
    with one that returns the training metrics only (no rollout, no compile), so the epochs hold
    training only, like ours with `num_eval_envs=0`. SPS is measured from the `progress_fn`
    wall clock over the epochs after the first in which jax compiled for under 1% of the epoch
    (as in `ppo_throughput.py`); Brax's own `training/sps` over the same epochs is reported too.

Brax's trainers need an older jax, so (c) runs in `.venv-brax` through a worker subprocess
(`benchmarks/_common.py`; create the venv with `--setup-brax-venv`). This file imports nothing
from jaxrl at module level, so the worker runs without jaxrl. Example (2 CPU cores, shared):

    .venv/bin/python benchmarks/offpolicy_throughput.py --num-envs 32 --batch-size 256 \\
        --grad-updates-per-step 1 --min-replay-size 1024 --total-env-steps 40000 \\
        --json benchmarks/offpolicy_throughput_cpu_32.json
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time

import _common as common

AGENT_PRESETS = {"sac": "sac-dmc-cpu", "fastdsac": "fastdsac-dmc-cpu", "warpsac-l": "warpsac-l",
                 "warpsac-a": "warpsac-a-cpu"}
"""Row name -> the preset whose agent config (minus the batch/replay settings) is used."""
BRAX_HIDDEN = (256, 256)
NAME = "offpolicy_throughput"


def parse_args(argv=None) -> argparse.Namespace:
    """Command-line settings (Brax SAC names where there is one)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="CartpoleBalance", help="Playground env name")
    p.add_argument("--impl", default="jax", choices=("jax", "warp"), help="MJX implementation")
    p.add_argument("--num-envs", type=int, default=32)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--grad-updates-per-step", type=int, default=1,
                   help="gradient steps per vectorized env step (ours: utd_ratio)")
    p.add_argument("--min-replay-size", type=int, default=1024, help="ours: learning_starts")
    p.add_argument("--max-replay-size", type=int, default=100_000, help="ours: buffer_size")
    p.add_argument("--total-env-steps", type=int, default=40_000)
    p.add_argument("--num-chunks", type=int, default=8, help="our chunks = Brax epochs "
                   "(num_evals - 1); at least 3: Brax's first epochs compile")
    p.add_argument("--agents", default=",".join(AGENT_PRESETS),
                   help=f"comma list of ours: {', '.join(AGENT_PRESETS)}")
    p.add_argument("--raw-steps", type=int, default=100, help="scan length of one raw call")
    p.add_argument("--raw-repeats", type=int, default=3, help="timed raw calls after warm-up")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--skip", default="", help="comma list of parts to skip: raw,ours,brax")
    p.add_argument("--brax-venv", default=common.DEFAULT_BRAX_VENV)
    p.add_argument("--brax-timeout", type=int, default=1800, help="seconds for the Brax worker")
    p.add_argument("--ours-timeout", type=int, default=900,
                   help="seconds for each of our agents (its own process, compile included)")
    p.add_argument("--verbose", action="store_true", help="show simulator/compiler output")
    p.add_argument("--json", dest="json_path", default=None, help="write all numbers here")
    p.add_argument("--from-json", default=None, help="print the table of a saved --json, exit")
    p.add_argument("--setup-brax-venv", action="store_true", help="create the Brax venv, exit")
    p.add_argument("--brax-worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--ours-worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.num_chunks < 3:
        p.error("--num-chunks must be at least 3 (Brax's first epochs compile).")
    unknown = set(filter(None, args.agents.split(","))) - set(AGENT_PRESETS)
    if unknown:
        p.error(f"unknown agents {sorted(unknown)}; choose from {list(AGENT_PRESETS)}")
    if args.min_replay_size >= args.total_env_steps:
        p.error("--min-replay-size must be below --total-env-steps.")
    return args


def settings_from_args(args: argparse.Namespace) -> dict:
    """The JSON-able settings shared by every part (and sent to the Brax worker)."""
    return {"env": args.env, "impl": args.impl, "num_envs": args.num_envs,
            "batch_size": args.batch_size, "grad_updates_per_step": args.grad_updates_per_step,
            "min_replay_size": args.min_replay_size, "max_replay_size": args.max_replay_size,
            "total_env_steps": args.total_env_steps, "num_chunks": args.num_chunks,
            "agents": [a for a in args.agents.split(",") if a], "raw_steps": args.raw_steps,
            "raw_repeats": args.raw_repeats, "seed": args.seed,
            "brax_hidden": list(BRAX_HIDDEN)}


# ----- (b) ours ----------------------------------------------------------------------------
def ours_configs(s: dict, row: str):
    """`(agent name, TrainConfig, agent config)` for one row at the shared settings."""
    import dataclasses

    from jaxrl import configs
    from jaxrl.engine.loop import TrainConfig

    preset = configs.get(AGENT_PRESETS[row])
    agent_cfg = preset.agent_config
    agent_cfg = dataclasses.replace(
        agent_cfg, batch_size=s["batch_size"], utd_ratio=float(s["grad_updates_per_step"]),
        learning_starts=s["min_replay_size"], buffer_size=s["max_replay_size"])
    cfg = TrainConfig(num_envs=s["num_envs"], unroll_length=1, unrolls_per_update=1,
                      total_env_steps=s["total_env_steps"], num_chunks=s["num_chunks"],
                      num_eval_envs=0, seed=s["seed"], env_impl=s["impl"])
    return preset.agent, cfg, agent_cfg


def steady_chunks(cfg, learning_starts: int) -> tuple[int, int]:
    """`(first steady chunk index, 1-based iteration of the first gradient step)`.

    Gradient steps start in the update call after which the buffer holds `learning_starts`
    transitions, i.e. iteration `ceil(learning_starts / num_envs)`; chunks after the one
    holding that iteration run updates throughout.
    """
    first_update_iter = max(1, -(-learning_starts // cfg.num_envs))
    first = (first_update_iter - 1) // cfg.iterations_per_chunk + 1
    if first >= cfg.num_chunks:
        raise ValueError("learning starts in the last chunk: raise --total-env-steps or lower "
                         "--min-replay-size.")
    return first, first_update_iter


def run_ours(s: dict, row: str) -> dict:
    """Part (b) for one agent: SPS and gradient steps/s over the chunks after learning starts."""
    import numpy as np

    from jaxrl.run import runner

    agent_name, cfg, agent_cfg = ours_configs(s, row)
    result = runner.train(agent_name, s["env"], cfg, agent_cfg, run_dir=None, progress=False)
    recs, g = result.records, int(round(agent_cfg.utd_ratio))
    first, first_iter = steady_chunks(cfg, agent_cfg.learning_starts)
    steady_s = recs[-1]["wall_time"] - recs[first - 1]["wall_time"]
    steady_iters = cfg.iterations_per_chunk * (cfg.num_chunks - first)
    num_updates = int(np.asarray(result.runner.agent_state.num_updates).reshape(-1)[0])
    total_iters = cfg.iterations_per_chunk * cfg.num_chunks
    return {"agent": agent_name, "preset": AGENT_PRESETS[row],
            "sps": steady_iters * cfg.num_envs / steady_s,
            "updates_per_s": steady_iters * g / steady_s,
            "steady_chunks": list(range(first + 1, cfg.num_chunks + 1)),
            "steady_seconds": steady_s, "steady_env_steps": steady_iters * cfg.num_envs,
            "sps_all_chunks": result.env_steps / result.train_seconds,
            "env_steps": result.env_steps, "train_seconds": result.train_seconds,
            "compile_seconds": result.compile_seconds, "num_updates": num_updates,
            "num_updates_expected": (total_iters - first_iter + 1) * g,
            "actor_hidden": list(agent_cfg.actor_hidden),
            "critic_hidden": list(agent_cfg.critic_hidden),
            "normalized_nets": agent_cfg.normalized_nets,
            "num_blocks": agent_cfg.num_blocks,
            "num_q": agent_cfg.num_q, "critic_type": agent_cfg.critic_type,
            "policy_delay": agent_cfg.policy_delay,
            "chunk_sps": [r["perf/sps"] for r in recs],
            "loadavg_at_end": common.machine_info()["loadavg_1_5_15"]}


def ours_worker(payload_json: str) -> None:
    """Entry point of one agent's process: prints `RESULT_TAG + json` on one line."""
    payload = json.loads(payload_json)
    with common.quiet(payload["quiet_log"]):
        out = run_ours(payload["settings"], payload["row"])
    common.print_worker_result(out)


def run_ours_subprocess(s: dict, row: str, timeout: int, quiet_log: str | None) -> dict:
    """Runs `run_ours(s, row)` in a fresh process of this Python (one agent per process, so a
    hung or crashed run costs only its row); `{"error": ...}` when it fails or times out."""
    payload = {"settings": s, "row": row, "quiet_log": quiet_log}
    log = common.worker_log_path(NAME, row)
    try:
        return common.run_worker(sys.executable, __file__, "--ours-worker", payload, timeout, log)
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {timeout} s (compile included); killed. Worker "
                         f"stderr: {log}"}
    except RuntimeError as e:
        return {"error": str(e)[-1500:]}


# ----- (c) brax, inside the Brax venv ------------------------------------------------------
class NoEvaluator:
    """Stands in for `brax.training.acting.Evaluator`: no rollouts, training metrics only."""

    def __init__(self, *args, **kwargs):
        del args, kwargs

    def run_evaluation(self, policy_params, training_metrics, aggregate_episodes=True):
        del policy_params, aggregate_episodes
        return dict(training_metrics)


def brax_train_kwargs(s: dict) -> dict:
    """Keyword arguments for `brax.training.agents.sac.train` matching our settings."""
    import functools

    from brax.training.agents.sac import networks as sac_networks
    from mujoco_playground import wrapper

    factory = functools.partial(sac_networks.make_sac_networks,
                                hidden_layer_sizes=tuple(s["brax_hidden"]))
    return dict(num_timesteps=s["total_env_steps"], num_evals=s["num_chunks"] + 1,
                num_eval_envs=1, num_envs=s["num_envs"], episode_length=s["episode_length"],
                action_repeat=1, batch_size=s["batch_size"],
                grad_updates_per_step=s["grad_updates_per_step"],
                min_replay_size=s["min_replay_size"], max_replay_size=s["max_replay_size"],
                normalize_observations=True, learning_rate=1e-3, discounting=0.99,
                reward_scaling=1.0, tau=0.005, network_factory=factory,
                wrap_env_fn=wrapper.wrap_for_brax_training, seed=s["seed"])


def brax_sac(s: dict) -> dict:
    """Part (c): Brax's SAC trainer, SPS and gradient steps/s over the steady epochs."""
    from brax.training.agents.sac import train as sac_train

    env, cfg = common.load_playground(s["env"], s["impl"])
    s = dict(s, episode_length=int(cfg.get("episode_length", 1000)))
    sac_train.acting.Evaluator = NoEvaluator  # the trainer looks it up at call time
    stamps, metrics, clock = [], [], common.CompileClock().install()

    def progress(step, m):
        stamps.append((time.perf_counter(), int(step)))
        metrics.append({k: float(v) for k, v in m.items() if k.startswith("training/")})

    t0 = time.perf_counter()
    sac_train.train(environment=env, progress_fn=progress, **brax_train_kwargs(s))
    total = time.perf_counter() - t0
    if stamps and stamps[0][1] == 0:  # the initial "evaluation" before the prefill
        t0 = stamps[0][0]
        stamps, metrics = stamps[1:], metrics[1:]
    epochs = common.brax_epochs(t0, stamps, metrics, clock)
    steady = common.steady_epochs(epochs)
    steps = sum(epochs[i]["env_steps"] for i in steady)
    secs = sum(epochs[i]["seconds"] for i in steady)
    own = [epochs[i]["brax_training_sps"] for i in steady]
    updates = steps // s["num_envs"] * s["grad_updates_per_step"]
    return {"sps": steps / secs, "updates_per_s": updates / secs, "env_steps": stamps[-1][1],
            "steady_env_steps": steps, "steady_seconds": secs,
            "steady_epochs": [i + 1 for i in steady], "total_seconds": total, "epochs": epochs,
            "brax_training_sps_mean_steady": sum(own) / len(own),
            "loadavg_at_end": common.machine_info()["loadavg_1_5_15"]}


def brax_worker(settings_json: str) -> None:
    """Entry point inside the Brax venv: prints `RESULT_TAG + json` on one line."""
    s = json.loads(settings_json)
    out = {"versions": common.versions(), "python": platform.python_version()}
    if not s.get("skip_raw"):
        out["raw"] = common.raw_brax_side(s)
    out["sac"] = brax_sac(s)
    common.print_worker_result(out)


# ----- output ------------------------------------------------------------------------------
def format_table(res: dict) -> str:
    """Markdown table (one row per part), followed by details, machine and versions."""
    fmt, s = common.fmt, res["settings"]
    brax = (res.get("brax") or {}).get("sac") or {}
    head = ("| row | num_envs | batch | UTD | actor / critic | SPS | grad steps/s | "
            "SPS vs Brax |\n| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
    common_cols = f"{s['num_envs']} | {s['batch_size']} | {s['grad_updates_per_step']}"
    rows = [head]
    if res.get("raw"):
        rows.append(f"| raw MJX stepping | {s['num_envs']} | - | - | - | "
                    f"{fmt(res['raw']['sps'])} | - | - |")
    hid = "x".join(map(str, s["brax_hidden"]))
    if brax:
        rows.append(f"| Brax SAC | {common_cols} | {hid} / {hid} | {fmt(brax['sps'])} | "
                    f"{fmt(brax['updates_per_s'])} | 1.00 |")
    for row, o in (res.get("ours") or {}).items():
        if "error" in o:
            rows.append(f"| ours `{row}` | {common_cols} | - | failed | - | - |")
            continue
        ratio = f"{o['sps'] / brax['sps']:.2f}" if brax else "-"
        arch = f"{_arch(o, 'actor_hidden')} / {_arch(o, 'critic_hidden')}"
        rows.append(f"| ours `{row}` | {common_cols} | {arch} | {fmt(o['sps'])} | "
                    f"{fmt(o['updates_per_s'])} | {ratio} |")
    return "\n".join(rows + [""] + details(res))


def _arch(o: dict, key: str) -> str:
    """`256x256` for an MLP; `enc 128 + 2 blocks` for a normalized (FlashSAC) encoder, whose
    blocks are `h -> 4h -> h` inverted residuals."""
    if o.get("normalized_nets"):
        return f"enc {o[key][0]} + {o.get('num_blocks', 2)} blocks"
    return "x".join(map(str, o[key]))


def details(res: dict) -> list[str]:
    """Settings and secondary numbers as bullet lines (parts run only)."""
    fmt, s, b = common.fmt, res["settings"], res.get("brax") or {}
    out = [f"- settings: env {s['env']} (impl {s['impl']}), num_envs {s['num_envs']}, batch "
           f"{s['batch_size']}, grad_updates_per_step / utd_ratio {s['grad_updates_per_step']}, "
           f"min_replay_size / learning_starts {s['min_replay_size']:,}, max_replay_size / "
           f"buffer_size {s['max_replay_size']:,}, total_env_steps {s['total_env_steps']:,}, "
           f"chunks/epochs {s['num_chunks']}, observation normalization on, no evaluation"]
    for row, o in (res.get("ours") or {}).items():
        if "error" in o:
            out.append(f"- ours `{row}` failed: {o['error'].splitlines()[0]}")
            continue
        out.append(f"- ours `{row}` (preset `{o['preset']}`; normalized_nets "
                   f"{o['normalized_nets']}, num_q "
                   f"{o['num_q']}, critic {o['critic_type']}, policy_delay {o['policy_delay']}):"
                   f" {fmt(o['steady_env_steps'])} steps in {o['steady_seconds']:.1f} s over "
                   f"chunks {o['steady_chunks'][0]}-{o['steady_chunks'][-1]}; all chunks "
                   f"incl. prefill {fmt(o['sps_all_chunks'])} SPS; compile "
                   f"{o['compile_seconds']:.1f} s (excluded); num_updates {o['num_updates']:,}"
                   f" (expected {o['num_updates_expected']:,}); load average at end "
                   f"{o.get('loadavg_at_end', '-')}")
    return out + common.brax_lines(b, b.get("sac")) + common.machine_lines(res)


def main(argv=None) -> None:
    """Runs the parts not skipped, prints the table, optionally writes JSON."""
    args = parse_args(argv)
    if args.brax_worker is not None:
        return brax_worker(args.brax_worker)
    if args.ours_worker is not None:
        return ours_worker(args.ours_worker)
    if args.setup_brax_venv:
        return common.setup_brax_venv(args.brax_venv, "brax.training.agents.sac.train")
    if args.from_json:
        with open(args.from_json) as f:
            return print(format_table(json.load(f)))
    skip = set(filter(None, args.skip.split(",")))
    s = settings_from_args(args)
    res = {"settings": s, "machine": common.machine_info(), "versions": common.versions(),
           "command": " ".join(sys.argv), "ours": {}}
    log = common.start_quiet_log(NAME, args.verbose)
    if "raw" not in skip:
        with common.quiet(log):
            res["raw"] = common.raw_ours(s)
        print(f"raw: {res['raw']['sps']:,.0f} SPS", flush=True)
    for row in s["agents"] if "ours" not in skip else ():
        res["ours"][row] = o = run_ours_subprocess(s, row, args.ours_timeout, log)
        print(f"ours {row}: " + (o["error"] if "error" in o else f"{o['sps']:,.0f} SPS, "
              f"{o['updates_per_s']:,.0f} grad steps/s (compile {o['compile_seconds']:.0f} s)"),
              flush=True)
        common.write_json(args.json_path, res)  # keep what is done if a later part fails
    if "brax" not in skip:
        print(f"Brax worker running in {args.brax_venv} (stderr: "
              f"{common.worker_log_path(NAME)})", flush=True)
        res["brax"] = common.run_brax_subprocess(__file__, s, args.brax_venv, args.brax_timeout,
                                                 "raw" in skip, NAME)
        print(f"brax: {res['brax']['sac']['sps']:,.0f} SPS", flush=True)
    print(format_table(res))
    common.write_json(args.json_path, res)


if __name__ == "__main__":
    main()
