"""PPO throughput: raw MJX stepping vs jaxrl PPO vs Brax's own PPO trainer, same env and batch.

Prints one table row (env, impl, num_envs, raw SPS, ours SPS, brax SPS, ours/brax) plus the
machine and the package versions of each side; `--json PATH` also writes every number.

(a) raw: random actions, `jax.jit(lax.scan(vmap(env.step)))` over `jaxrl.envs.make(name,
    impl=impl)`, timed after two warm-up calls with `block_until_ready` (no auto-reset).
(b) ours: `jaxrl.run.runner.train("ppo", ...)` without evaluation; SPS is
    `result.env_steps / result.train_seconds` (compile excluded).
(c) brax: `brax.training.agents.ppo.train` on the same Playground env
    (`registry.load(name, config_overrides={"impl": impl})`, wrapped by Playground's
    `wrapper.wrap_for_brax_training` as Playground's learning scripts do), `run_evals=False`.
    SPS is measured here from the `progress_fn` wall clock over the epochs after the first
    in which jax compiled for under 1% of the epoch (with jax 0.8.3 Brax 0.14.2 compiles its
    training epoch in epoch 1 and again, about as long, in epoch 2); Brax's own
    `training/sps` over the same epochs is reported as well.

Settings are Brax's names; ours follow: `unrolls_per_update = batch_size * num_minibatches /
num_envs` (TrainConfig), `num_minibatches` (PPOConfig) = Brax `num_minibatches`, `num_epochs`
(PPOConfig) = Brax `num_updates_per_batch`. Both use the same MLP sizes, observation
normalization, `num_chunks` = Brax `num_evals - 1` epochs, and no periodic resets
(Playground's DM Control config uses `num_resets_per_eval=10`; here it is 0).

Brax's trainers do not run on our jax (0.10 removed `jax.device_put_replicated`), so part (c)
runs in a separate virtual environment, by default `.venv-brax` at the repository root
(gitignored by `.venv-*/`; the venv, worker, raw-stepping and timing helpers live in
`benchmarks/_common.py`). Create it once with

    .venv/bin/python benchmarks/ppo_throughput.py --setup-brax-venv

which runs `python -m venv .venv-brax` and
`.venv-brax/bin/pip install "jax==0.8.3" "jaxlib==0.8.3" brax playground`
(a jax that still has `jax.device_put_replicated`). The benchmark then re-invokes this file
with that venv's Python and `--brax-worker`; the worker prints one JSON line. Example (about
6 minutes on 2 CPU cores shared with another job):

    .venv/bin/python benchmarks/ppo_throughput.py --num-envs 256 --unroll-length 16 \\
        --batch-size 256 --num-minibatches 8 --num-epochs 4 --total-env-steps 300000

This file imports nothing from jaxrl at module level, so the worker runs without jaxrl.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import _common as common


def parse_args(argv=None) -> argparse.Namespace:
    """Command-line settings (Brax names for the PPO batch layout)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="CartpoleBalance", help="Playground env name")
    p.add_argument("--impl", default="jax", choices=("jax", "warp"), help="MJX implementation")
    p.add_argument("--num-envs", type=int, default=256)
    p.add_argument("--unroll-length", type=int, default=16)
    p.add_argument("--batch-size", type=int, default=256, help="Brax batch_size (trajectories "
                   "per minibatch)")
    p.add_argument("--num-minibatches", type=int, default=8)
    p.add_argument("--num-epochs", type=int, default=4, help="Brax num_updates_per_batch")
    p.add_argument("--total-env-steps", type=int, default=300_000)
    p.add_argument("--num-chunks", type=int, default=10, help="our chunks = Brax epochs "
                   "(num_evals - 1); at least 3: Brax's first two epochs compile")
    p.add_argument("--policy-hidden", default="32,32,32,32")
    p.add_argument("--value-hidden", default="256,256,256,256,256")
    p.add_argument("--raw-steps", type=int, default=100, help="scan length of one raw call")
    p.add_argument("--raw-repeats", type=int, default=3, help="timed raw calls after warm-up")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--skip", default="", help="comma list of parts to skip: raw,ours,brax")
    p.add_argument("--brax-venv", default=common.DEFAULT_BRAX_VENV)
    p.add_argument("--brax-timeout", type=int, default=1800, help="seconds for the Brax worker")
    p.add_argument("--verbose", action="store_true", help="show simulator/compiler output")
    p.add_argument("--json", dest="json_path", default=None, help="write all numbers here")
    p.add_argument("--setup-brax-venv", action="store_true", help="create the Brax venv, exit")
    p.add_argument("--brax-worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.num_chunks < 3:
        p.error("--num-chunks must be at least 3 (Brax's first two epochs compile).")
    if (args.batch_size * args.num_minibatches) % args.num_envs:
        p.error("batch_size * num_minibatches must be a multiple of num_envs.")
    return args


def settings_from_args(args: argparse.Namespace) -> dict:
    """The JSON-able settings shared by every part (and sent to the Brax worker)."""
    hidden = lambda s: [int(x) for x in s.split(",") if x]
    return {"env": args.env, "impl": args.impl, "num_envs": args.num_envs,
            "unroll_length": args.unroll_length, "batch_size": args.batch_size,
            "num_minibatches": args.num_minibatches, "num_epochs": args.num_epochs,
            "total_env_steps": args.total_env_steps, "num_chunks": args.num_chunks,
            "policy_hidden": hidden(args.policy_hidden), "value_hidden": hidden(args.value_hidden),
            "raw_steps": args.raw_steps, "raw_repeats": args.raw_repeats, "seed": args.seed,
            "unrolls_per_update": args.batch_size * args.num_minibatches // args.num_envs}


def ppo_ours(s: dict) -> dict:
    """Part (b): jaxrl PPO at Brax-equal settings, no evaluation, compile excluded."""
    from jaxrl.agents.ppo import PPOConfig
    from jaxrl.engine.loop import TrainConfig
    from jaxrl.run import runner

    cfg = TrainConfig(num_envs=s["num_envs"], unroll_length=s["unroll_length"],
                      unrolls_per_update=s["unrolls_per_update"],
                      total_env_steps=s["total_env_steps"], num_chunks=s["num_chunks"],
                      num_eval_envs=0, seed=s["seed"], env_impl=s["impl"])
    agent_cfg = PPOConfig(policy_hidden=tuple(s["policy_hidden"]),
                          value_hidden=tuple(s["value_hidden"]),
                          num_minibatches=s["num_minibatches"], num_epochs=s["num_epochs"],
                          normalize_observations=True, gae_mode="brax")
    result = runner.train("ppo", s["env"], cfg, agent_cfg, run_dir=None, progress=False)
    recs = result.records
    per_chunk = result.env_steps / len(recs)
    steady_s = recs[-1]["wall_time"] - recs[0]["wall_time"]
    return {"sps": result.env_steps / result.train_seconds, "env_steps": result.env_steps,
            "train_seconds": result.train_seconds, "compile_seconds": result.compile_seconds,
            "sps_excl_first_chunk": per_chunk * (len(recs) - 1) / steady_s,
            "chunk_sps": [r["perf/sps"] for r in recs]}


def brax_train_kwargs(s: dict) -> dict:
    """Keyword arguments for `brax.training.agents.ppo.train` matching our settings."""
    import functools

    from brax.training.agents.ppo import networks as ppo_networks
    from mujoco_playground import wrapper

    factory = functools.partial(ppo_networks.make_ppo_networks,
                                policy_hidden_layer_sizes=tuple(s["policy_hidden"]),
                                value_hidden_layer_sizes=tuple(s["value_hidden"]))
    pc = {"learning_rate": 1e-3, "discounting": 0.995, "entropy_cost": 1e-2,
          "clipping_epsilon": 0.3, "reward_scaling": 10.0, "gae_lambda": 0.95}  # PPOConfig
    return dict(num_timesteps=s["total_env_steps"], num_evals=s["num_chunks"] + 1,
                run_evals=False, num_eval_envs=16, num_envs=s["num_envs"],
                episode_length=s["episode_length"], action_repeat=1,
                unroll_length=s["unroll_length"], batch_size=s["batch_size"],
                num_minibatches=s["num_minibatches"], num_updates_per_batch=s["num_epochs"],
                num_resets_per_eval=0, normalize_observations=True, max_grad_norm=None,
                network_factory=factory, wrap_env_fn=wrapper.wrap_for_brax_training,
                seed=s["seed"], **pc)


def brax_ppo(s: dict) -> dict:
    """Part (c), inside the Brax venv: Brax's PPO trainer.

    SPS counts the epochs after the first whose jax compile time is under 1% of the epoch
    (Brax 0.14.2 on jax 0.8.3 recompiles its training epoch once more in epoch 2).
    """
    from brax.training.agents.ppo import train as ppo_train

    env, cfg = common.load_playground(s["env"], s["impl"])
    s = dict(s, episode_length=int(cfg.get("episode_length", 1000)))
    stamps, metrics, clock = [], [], common.CompileClock().install()

    def progress(step, m):
        stamps.append((time.perf_counter(), int(step)))
        metrics.append({k: float(v) for k, v in m.items() if k.startswith("training/")})

    t0 = time.perf_counter()
    ppo_train.train(environment=env, progress_fn=progress, **brax_train_kwargs(s))
    epochs = common.brax_epochs(t0, stamps, metrics, clock)
    steady = common.steady_epochs(epochs)
    steps = sum(epochs[i]["env_steps"] for i in steady)
    secs = sum(epochs[i]["seconds"] for i in steady)
    own = [epochs[i]["brax_training_sps"] for i in steady]
    return {"sps": steps / secs, "env_steps": stamps[-1][1], "steady_env_steps": steps,
            "steady_seconds": secs, "steady_epochs": [i + 1 for i in steady],
            "total_seconds": time.perf_counter() - t0, "epochs": epochs,
            "brax_training_sps_mean_steady": sum(own) / len(own)}


def brax_worker(settings_json: str) -> None:
    """Entry point inside the Brax venv: prints `RESULT_TAG + json` on one line."""
    s = json.loads(settings_json)
    out = {"versions": common.versions(), "python": platform.python_version()}
    if not s.get("skip_raw"):
        out["raw"] = common.raw_brax_side(s)
    out["ppo"] = brax_ppo(s)
    common.print_worker_result(out)


def format_table(res: dict) -> str:
    """Markdown table of the headline numbers, followed by details and versions."""
    fmt = common.fmt
    s, ours, brax = res["settings"], res.get("ours") or {}, (res.get("brax") or {}).get("ppo", {})
    ratio = ours["sps"] / brax["sps"] if ours.get("sps") and brax.get("sps") else None
    rows = ["| env | impl | num_envs | raw SPS | ours SPS | brax SPS | ours/brax |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
            f"| {s['env']} | {s['impl']} | {s['num_envs']} | {fmt(res.get('raw', {}).get('sps'))}"
            f" | {fmt(ours.get('sps'))} | {fmt(brax.get('sps'))} | "
            f"{'-' if ratio is None else f'{ratio:.2f}'} |", ""]
    rows += details(res)
    return "\n".join(rows)


def details(res: dict) -> list[str]:
    """Secondary numbers, settings, machine and versions as bullet lines (parts run only)."""
    fmt, s = common.fmt, res["settings"]
    ours, b = res.get("ours"), res.get("brax") or {}
    bp = b.get("ppo")
    out = [f"- settings: unroll_length {s['unroll_length']}, batch_size {s['batch_size']}, "
           f"num_minibatches {s['num_minibatches']}, num_epochs {s['num_epochs']} "
           f"(ours: unrolls_per_update {s['unrolls_per_update']}), total_env_steps "
           f"{s['total_env_steps']:,}, chunks/epochs {s['num_chunks']}, policy "
           f"{s['policy_hidden']}, value {s['value_hidden']}, normalize_observations on"]
    if ours:
        out.append(f"- ours: {fmt(ours['env_steps'])} steps in {ours['train_seconds']:.1f} s "
                   f"(compile {ours['compile_seconds']:.1f} s, excluded); excluding chunk 1: "
                   f"{fmt(ours['sps_excl_first_chunk'])} SPS")
    return out + common.brax_lines(b, bp) + common.machine_lines(res)


def main(argv=None) -> None:
    """Runs the parts not skipped, prints the table, optionally writes JSON."""
    args = parse_args(argv)
    if args.brax_worker is not None:
        return brax_worker(args.brax_worker)
    if args.setup_brax_venv:
        return common.setup_brax_venv(args.brax_venv)
    skip = set(filter(None, args.skip.split(",")))
    s = settings_from_args(args)
    res = {"settings": s, "machine": common.machine_info(), "versions": common.versions(),
           "command": " ".join(sys.argv)}
    log = common.start_quiet_log("ppo_throughput", args.verbose)
    if "raw" not in skip:
        with common.quiet(log):
            res["raw"] = common.raw_ours(s)
        print(f"raw: {res['raw']['sps']:,.0f} SPS", flush=True)
    if "ours" not in skip:
        with common.quiet(log):
            res["ours"] = ppo_ours(s)
        print(f"ours: {res['ours']['sps']:,.0f} SPS", flush=True)
    if "brax" not in skip:
        print(f"Brax worker running in {args.brax_venv} (stderr: "
              f"{common.worker_log_path('ppo_throughput')})", flush=True)
        res["brax"] = common.run_brax_subprocess(__file__, s, args.brax_venv, args.brax_timeout,
                                                 "raw" in skip, "ppo_throughput")
        print(f"brax: {res['brax']['ppo']['sps']:,.0f} SPS", flush=True)
    print(format_table(res))
    common.write_json(args.json_path, res)


if __name__ == "__main__":
    main()
