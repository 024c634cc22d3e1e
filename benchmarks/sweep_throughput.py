"""Sweep throughput: training SPS of 1, 2, 4, 8 vmapped members, and first-compile times of ours
vs Brax's trainers at equal settings.

    .venv/bin/python benchmarks/sweep_throughput.py                    # full run
    .venv/bin/python benchmarks/sweep_throughput.py --quick            # tiny sizes, smoke test
    .venv/bin/python benchmarks/sweep_throughput.py --members 1 4 --agents ppo --skip-brax
    .venv/bin/python benchmarks/sweep_throughput.py --members 1 4 --skip-brax --agents ppo sac \
        fastdsac warpsac pql flow_sac fpo policyflow crl cppo          # every agent

What is measured (every measurement in a fresh process of its own, with a fresh, empty
`JAX_COMPILATION_CACHE_DIR`, so compile caches and memory do not carry over and every compile
is cold):

- members: `jaxrl.run.runner.train(agent, env, cfg, agent_config)` with the agent's CPU preset
  (`PRESETS`; `ppo`: `ppo-dmc-cpu`, `sac`: `sac-dmc-cpu`, both on CartpoleBalance), `num_seeds = M`
  vmapped members (one program, as `jaxrl sweep` runs grid points x seeds), `num_eval_envs=0`,
  `--steps-per-member` env steps per member (default: PPO 1,310,720 in 10 chunks, SAC 64,000
  in 8 chunks; rounded up to whole chunks). Total SPS = median of the runner's `perf/sps` (env
  steps of all members over the chunk's wall time) over the chunks after the first (for SAC,
  after the chunk in which learning starts); per-member SPS = total / M; "total / 1-member
  total" compares with the M = 1 row. "compile s" is `RunResult.compile_seconds` (init and the
  ahead-of-time compile of the chunk program, cold); the JSON also has the wall time covered
  by jax's tracing/lowering/compile log events during the run (`_common.CompileClock`).
  Devices (`--devices`): `member` (default) first gives the CPU backend one device per member,
  as `jaxrl train` / `jaxrl sweep` do (`jaxrl.run.process.provide_cpu_devices`), so the runner
  places the members on a `seed` mesh; `one` keeps every member on one device (vmapped only).
- Brax (unless `--skip-brax`): `brax.training.agents.ppo.train` / `sac.train` in the Brax venv
  (`.venv-brax`, created with `--setup-brax-venv`, as `ppo_throughput.py` does), with the
  keyword arguments of `ppo_throughput.brax_train_kwargs` / `offpolicy_throughput
  .brax_train_kwargs` at our preset's sizes (PPO: num_envs, unroll_length, batch_size =
  num_envs * unrolls_per_update / num_minibatches, num_minibatches, num_updates_per_batch =
  num_epochs, policy/value MLP widths; SAC: num_envs, batch_size, grad_updates_per_step =
  utd_ratio, min/max_replay_size = learning_starts/buffer_size, 256x2 MLPs; no evaluation) and
  three short epochs. Brax compiles inside its first epoch, so its first compile is the wall
  time covered by jax's compile log events from the `train` call to the end of epoch 1 (init,
  SAC's prefill and the training epoch); later compiles (Brax PPO compiles its epoch again in
  epoch 2) are reported apart. Ours in the compile table is the 1-member row.

Brax's trainers need jax 0.8.3 (`_common.py`); this file imports nothing from jaxrl at module
level, so its Brax worker runs in that venv. `--out` (default `benchmarks/sweep_throughput.json`)
gets every number, rewritten after each measurement; `--from-json PATH` reprints the tables.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import _common as common

NAME = "sweep_throughput"
HERE = os.path.dirname(os.path.abspath(__file__))
PRESETS = {"ppo": "ppo-dmc-cpu", "sac": "sac-dmc-cpu", "fastdsac": "fastdsac-dmc-cpu",
           "warpsac": "warpsac-l", "pql": "pql-cartpole-cpu", "flow_sac": "flow-sac-dmc-cpu",
           "fpo": "fpo-dmc-cpu", "policyflow": "policyflow-dmc-cpu",
           "crl": "crl-pointmaze-cpu", "cppo": "cppo-pointmaze-cpu"}
"""Every agent's CPU preset (WarpSAC: its `-L` variant)."""
STEPS = {"ppo": 1_310_720, "sac": 64_000, "fastdsac": 32_768, "warpsac": 32_768,
         "pql": 32_768, "flow_sac": 32_768, "fpo": 819_200, "policyflow": 819_200,
         "crl": 64_000, "cppo": 160_000}
"""Default env steps per member (PPO: the earlier `jaxrl train` measurement's budget)."""
CHUNKS = {"ppo": 10, "sac": 8, "fastdsac": 8, "warpsac": 8, "pql": 8, "flow_sac": 8,
          "fpo": 5, "policyflow": 5, "crl": 5, "cppo": 5}
QUICK_STEPS = {"ppo": 3 * 8192, "sac": 3 * 1024, "fastdsac": 3 * 1024, "warpsac": 3 * 1024,
               "pql": 3 * 1024, "flow_sac": 3 * 1024, "fpo": 3 * 8192,
               "policyflow": 3 * 8192, "crl": 3 * 1280, "cppo": 3 * 3200}
_QUICK_REPLAY = {"learning_starts": 512, "buffer_size": 10_000}
QUICK_AGENT = {"ppo": {}, "fpo": {}, "policyflow": {}, "cppo": {},
               "crl": {"learning_starts": 640, "buffer_size": 10_000},
               **{a: _QUICK_REPLAY for a in ("sac", "fastdsac", "warpsac", "pql", "flow_sac")}}
"""--quick overrides of the agent config (applied to Brax's equal settings too)."""
BRAX_AGENTS = ("ppo", "sac")
"""Agents with a Brax trainer to compare compile times with."""
BRAX_EPOCHS = 3


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--members", type=int, nargs="+", default=None,
                   help="vmapped member counts (default 1 2 4 8; --quick: 1 2)")
    p.add_argument("--agents", nargs="+", default=["ppo", "sac"], choices=list(PRESETS),
                   help="agents to measure (default ppo sac; every agent: " +
                        " ".join(PRESETS) + ")")
    p.add_argument("--devices", choices=("member", "one"), default="member",
                   help="CPU devices: one per member as the CLI gives them "
                        "(`process.provide_cpu_devices`), or all members on one device")
    p.add_argument("--steps-per-member", type=int, default=None,
                   help=f"env steps per member (default {STEPS}; --quick {QUICK_STEPS})")
    p.add_argument("--num-chunks", type=int, default=None,
                   help=f"chunks per run (default {CHUNKS}; --quick 3)")
    p.add_argument("--env", default=None, help="env name (default: the preset's)")
    p.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    p.add_argument("--skip-brax", action="store_true", help="no Brax compile measurement")
    p.add_argument("--skip-ours", action="store_true", help="Brax compile measurement only")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per measurement")
    p.add_argument("--brax-venv", default=common.DEFAULT_BRAX_VENV)
    p.add_argument("--setup-brax-venv", action="store_true", help="create the Brax venv, exit")
    p.add_argument("--out", default=os.path.join(HERE, f"{NAME}.json"), help="JSON output")
    p.add_argument("--from-json", default=None, help="print the tables of a saved --out, exit")
    p.add_argument("--verbose", action="store_true", help="show simulator/compiler output")
    p.add_argument("--ours-worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--brax-worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.members = args.members or ([1, 2] if args.quick else [1, 2, 4, 8])
    if min(args.members) < 1:
        p.error("--members must be positive.")
    return args


def settings(args: argparse.Namespace, agent: str) -> dict:
    """The JSON-able settings of one agent's measurements."""
    quick = args.quick
    return {"agent": agent, "preset": PRESETS[agent], "env": args.env,
            "steps_per_member": args.steps_per_member or (QUICK_STEPS if quick else STEPS)[agent],
            "num_chunks": args.num_chunks or (3 if quick else CHUNKS[agent]),
            "agent_overrides": QUICK_AGENT[agent] if quick else {}, "quick": quick,
            "devices": args.devices}


# ----- ours (one process per measurement) --------------------------------------------------
def ours_configs(s: dict, members: int):
    """(preset, env name, TrainConfig, agent config) of one measurement."""
    import dataclasses

    import jaxrl.agents  # noqa: F401  (registers the agents)
    from jaxrl import configs
    from jaxrl.engine.contract import lookup

    preset = configs.get(s["preset"])
    agent_cfg = lookup(preset.agent)[1](**dict(preset.agent_overrides, **s["agent_overrides"]))
    cfg = dataclasses.replace(preset.train, num_seeds=members, num_eval_envs=0,
                              total_env_steps=s["steps_per_member"], num_chunks=s["num_chunks"])
    return preset, s["env"] or preset.env, cfg, agent_cfg


def first_steady_chunk(cfg, agent_cfg) -> int:
    """0-based index of the first chunk counted: after chunk 1, and after the chunk holding
    the first gradient step of an off-policy agent (`learning_starts` transitions collected)."""
    per_iter = cfg.num_envs * cfg.unroll_length * cfg.unrolls_per_update
    first_update_iter = max(1, -(-getattr(agent_cfg, "learning_starts", 0) // per_iter))
    learn_chunk = (first_update_iter - 1) // cfg.iterations_per_chunk + 1
    return max(1, learn_chunk)


def run_ours(s: dict, members: int) -> dict:
    """One cold run with `members` vmapped members; steady total SPS and compile seconds."""
    import jax

    from jaxrl.run import process, runner

    if s.get("devices", "member") == "member":
        process.provide_cpu_devices(members)  # before the backend starts, as the CLI does
    preset, env, cfg, agent_cfg = ours_configs(s, members)
    first = first_steady_chunk(cfg, agent_cfg)
    if first >= cfg.num_chunks:
        raise ValueError(f"no chunk after learning starts (chunk {first} of {cfg.num_chunks}): "
                         "raise --steps-per-member or --num-chunks")
    clock = common.CompileClock().install()
    t0 = time.perf_counter()
    result = runner.train(preset.agent, env, cfg, agent_cfg, run_dir=None, progress=False)
    t1 = time.perf_counter()
    chunk_sps = [r["perf/sps"] for r in result.records]
    total = statistics.median(chunk_sps[first:])
    return {"members": members, "agent": preset.agent, "preset": preset.name, "env": env,
            "num_envs": cfg.num_envs, "unroll_length": cfg.unroll_length,
            "unrolls_per_update": cfg.unrolls_per_update, "num_chunks": cfg.num_chunks,
            "iterations_per_chunk": cfg.iterations_per_chunk,
            "env_steps_per_member": cfg.real_total_env_steps, "total_sps": total,
            "per_member_sps": total / members, "chunk_sps": chunk_sps,
            "devices": jax.device_count(), "backend": jax.default_backend(),
            "steady_chunks": list(range(first + 1, cfg.num_chunks + 1)),
            "compile_seconds": result.compile_seconds, "train_seconds": result.train_seconds,
            "jax_compile_wall_seconds": clock.wall_seconds_between(t0, t1),
            "call_seconds": t1 - t0, "jax_cache_dir": os.environ.get("JAX_COMPILATION_CACHE_DIR"),
            "loadavg_at_end": common.machine_info()["loadavg_1_5_15"]}


def ours_worker(payload_json: str) -> None:
    """Entry point of one measurement's process: prints `RESULT_TAG + json` on one line."""
    p = json.loads(payload_json)
    with common.quiet(p["quiet_log"]):
        out = run_ours(p["settings"], p["members"])
    common.print_worker_result(out)


@contextlib.contextmanager
def cold_cache():
    """A fresh, empty `JAX_COMPILATION_CACHE_DIR` for the subprocesses started inside (and no
    `JAXRL_COMPILE_CACHE`); removed afterwards."""
    keys = ("JAX_COMPILATION_CACHE_DIR", "JAXRL_COMPILE_CACHE")
    saved = {k: os.environ.get(k) for k in keys}
    folder = tempfile.mkdtemp(prefix=f"{NAME}_cache_")
    os.environ.pop("JAXRL_COMPILE_CACHE", None)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = folder
    try:
        yield folder
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(folder, ignore_errors=True)


def measure(python: str, flag: str, payload: dict, timeout: int, kind: str) -> dict:
    """Runs one worker with a cold cache; `{"error": ...}` when it fails or times out."""
    log = common.worker_log_path(NAME, kind)
    try:
        with cold_cache():
            return common.run_worker(python, __file__, flag, payload, timeout, log)
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {timeout} s; killed. Worker stderr: {log}"}
    except RuntimeError as e:
        return {"error": str(e)[-1500:]}


# ----- Brax (in the Brax venv) -------------------------------------------------------------
def brax_settings(s: dict) -> dict:
    """Brax's equal settings for one agent, from our preset (computed in our venv)."""
    from jaxrl.envs.registry import default_impl

    preset, env, cfg, a = ours_configs(s, 1)
    impl = cfg.env_impl or default_impl()  # the MJX implementation our runs use
    out = {"agent": s["agent"], "env": env, "impl": impl, "seed": 0, "num_envs": cfg.num_envs,
           "num_chunks": BRAX_EPOCHS}
    if s["agent"] == "ppo":
        per_epoch = cfg.num_envs * cfg.unrolls_per_update * cfg.unroll_length
        return dict(out, unroll_length=cfg.unroll_length, num_minibatches=a.num_minibatches,
                    batch_size=cfg.num_envs * cfg.unrolls_per_update // a.num_minibatches,
                    num_epochs=a.num_epochs, policy_hidden=list(a.policy_hidden),
                    value_hidden=list(a.value_hidden), total_env_steps=BRAX_EPOCHS * per_epoch)
    return dict(out, batch_size=a.batch_size, grad_updates_per_step=int(round(a.utd_ratio)),
                min_replay_size=a.learning_starts, max_replay_size=a.buffer_size,
                brax_hidden=list(a.critic_hidden),
                total_env_steps=a.learning_starts + BRAX_EPOCHS * 16 * cfg.num_envs)


def brax_compile(s: dict) -> dict:
    """Brax's trainer for three short epochs; compile seconds from jax's log events."""
    import offpolicy_throughput
    import ppo_throughput

    clock = common.CompileClock().install()
    env, pg_cfg = common.load_playground(s["env"], s["impl"])
    s = dict(s, episode_length=int(pg_cfg.get("episode_length", 1000)))
    if s["agent"] == "ppo":
        from brax.training.agents.ppo import train as trainer

        kwargs = ppo_throughput.brax_train_kwargs(s)
    else:
        from brax.training.agents.sac import train as trainer

        trainer.acting.Evaluator = offpolicy_throughput.NoEvaluator  # no eval rollouts
        kwargs = offpolicy_throughput.brax_train_kwargs(s)
    stamps = []
    t0 = time.perf_counter()
    trainer.train(environment=env, progress_fn=lambda step, m: stamps.append(
        (time.perf_counter(), int(step))), **kwargs)
    t_end = time.perf_counter()
    ends = [t for t, n in stamps if n > 0]  # drop the call at step 0 (before training)
    bounds = [t0, *ends]
    return {"agent": s["agent"], "settings": s, "epochs": len(ends),
            "first_compile_seconds": clock.wall_seconds_between(t0, ends[0]),
            "first_compile_sum_seconds": clock.seconds_between(t0, ends[0]),
            "compile_after_first_epoch_seconds": clock.wall_seconds_between(ends[0], t_end),
            "epoch_compile_seconds": [clock.wall_seconds_between(a, b)
                                      for a, b in zip(bounds[:-1], bounds[1:], strict=True)],
            "epoch_seconds": [b - a for a, b in zip(bounds[:-1], bounds[1:], strict=True)],
            "total_seconds": t_end - t0, "env_steps": stamps[-1][1] if stamps else 0}


def brax_worker(payload_json: str) -> None:
    """Entry point inside the Brax venv: prints `RESULT_TAG + json` on one line."""
    p = json.loads(payload_json)
    out = brax_compile(p["settings"])
    out.update(versions=common.versions(), python=platform.python_version())
    common.print_worker_result(out)


# ----- output ------------------------------------------------------------------------------
def err_line(error: str) -> str:
    """The most telling line of a worker error: its last `...Error`/`Exception` line."""
    lines = [ln.strip() for ln in error.splitlines() if ln.strip()] or ["?"]
    named = [ln for ln in lines if "Error" in ln or "Exception" in ln]
    return (named[-1] if named else lines[0])[:300]


def members_table(res: dict) -> list[str]:
    out = ["| agent | members | devices | total SPS | per-member SPS | total / 1-member total | "
           "compile s (ours) |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for agent, rows in res.get("ours", {}).items():
        one = (rows.get("1") or {}).get("total_sps")
        for m, r in rows.items():
            if "error" in r:
                out.append(f"| {agent} | {m} | - | failed | - | - | - |")
                continue
            ratio = f"{r['total_sps'] / one:.2f}" if one else "-"
            out.append(f"| {agent} | {m} | {r.get('devices', 1)} | {common.fmt(r['total_sps'])} | "
                       f"{common.fmt(r['per_member_sps'])} | {ratio} | "
                       f"{r['compile_seconds']:.0f} |")
    return out


def compile_table(res: dict) -> list[str]:
    out = ["| agent | ours compile s (1 member) | ours jax compile events s | "
           "Brax first compile s | Brax compile after epoch 1 s | ours / Brax |",
           "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for agent in res["agents"]:
        rows = res.get("ours", {}).get(agent, {})
        o = next((r for _, r in sorted(rows.items(), key=lambda kv: int(kv[0]))
                  if "error" not in r), None)
        b = res.get("brax", {}).get(agent) or {}
        ours = f"{o['compile_seconds']:.0f}" if o else "-"
        if o and o["members"] != 1:
            ours += f" ({o['members']} members)"
        events = f"{o['jax_compile_wall_seconds']:.0f}" if o else "-"
        first = b.get("first_compile_seconds")
        later = b.get("compile_after_first_epoch_seconds")
        ratio = f"{o['compile_seconds'] / first:.2f}" if o and first else "-"
        out.append(f"| {agent} | {ours} | {events} | "
                   f"{'-' if first is None else f'{first:.0f}'} | "
                   f"{'-' if later is None else f'{later:.0f}'} | {ratio} |")
    return out


def detail_lines(res: dict) -> list[str]:
    out = []
    for agent, rows in res.get("ours", {}).items():
        for m, r in rows.items():
            if "error" in r:
                out.append(f"- ours {agent} x{m} failed: {err_line(r['error'])}")
        r = next((r for r in rows.values() if "error" not in r), None)
        if r:
            out.append(f"- {agent}: preset `{r['preset']}` on {r['env']}, num_envs "
                       f"{r['num_envs']}, unroll {r['unroll_length']} x "
                       f"{r['unrolls_per_update']}, {r['env_steps_per_member']:,} env steps per "
                       f"member in {r['num_chunks']} chunks of {r['iterations_per_chunk']} "
                       f"iterations; SPS = median over chunks {r['steady_chunks'][0]}-"
                       f"{r['steady_chunks'][-1]}; no evaluation")
    for agent, b in (res.get("brax") or {}).items():
        if "error" in b:
            out.append(f"- brax {agent} failed: {err_line(b['error'])}")
            continue
        out.append(f"- brax {agent}: epochs {len(b['epoch_seconds'])}, epoch wall s "
                   f"{[round(x, 1) for x in b['epoch_seconds']]}, compile per epoch "
                   f"{[round(x, 1) for x in b['epoch_compile_seconds']]} (sum of compile "
                   f"events in epoch 1: {b['first_compile_sum_seconds']:.0f} s)")
    brax_v = next((b["versions"] for b in (res.get("brax") or {}).values()
                   if "versions" in b), None)
    out += common.machine_lines(dict(res, brax={"versions": brax_v}))
    return out + [f"- command: `{res['command']}`; total {res.get('total_seconds', 0):.0f} s"]


def format_tables(res: dict) -> str:
    return "\n".join(members_table(res) + [""] + compile_table(res) + [""] + detail_lines(res))


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.ours_worker is not None:
        return ours_worker(args.ours_worker)
    if args.brax_worker is not None:
        return brax_worker(args.brax_worker)
    if args.setup_brax_venv:
        return common.setup_brax_venv(args.brax_venv, "brax.training.agents.sac.train")
    if args.from_json:
        with open(args.from_json) as f:
            return print(format_tables(json.load(f)))
    t_start = time.perf_counter()
    res = {"command": " ".join([os.path.basename(sys.executable), *sys.argv]),
           "agents": args.agents, "members": args.members, "machine": common.machine_info(),
           "versions": common.versions(), "settings": {}, "ours": {}, "brax": {}}
    log = common.start_quiet_log(NAME, args.verbose)
    brax_py = os.path.join(args.brax_venv, "bin", "python")
    brax_wanted = not args.skip_brax and any(a in BRAX_AGENTS for a in args.agents)
    if brax_wanted and not os.path.exists(brax_py):
        raise SystemExit(f"No Brax venv at {args.brax_venv}: create it with --setup-brax-venv "
                         "or pass --skip-brax.")
    for agent in args.agents:
        s = res["settings"][agent] = settings(args, agent)
        for m in [] if args.skip_ours else args.members:
            payload = {"settings": s, "members": m, "quiet_log": log}
            r = measure(sys.executable, "--ours-worker", payload, args.timeout, f"{agent}{m}")
            res["ours"].setdefault(agent, {})[str(m)] = r
            print(f"ours {agent} x{m}: " + (err_line(r["error"]) if "error" in r else
                  f"{r['total_sps']:,.0f} SPS total, compile {r['compile_seconds']:.0f} s"),
                  flush=True)
            common.write_json(args.out, dict(res, total_seconds=time.perf_counter() - t_start))
        if not args.skip_brax and agent in BRAX_AGENTS:
            payload = {"settings": brax_settings(s)}
            b = res["brax"][agent] = measure(brax_py, "--brax-worker", payload, args.timeout,
                                             f"brax_{agent}")
            print(f"brax {agent}: " + (err_line(b["error"]) if "error" in b else
                  f"first compile {b['first_compile_seconds']:.0f} s"), flush=True)
    res["total_seconds"] = time.perf_counter() - t_start
    common.write_json(args.out, res)
    print(format_tables(res))


if __name__ == "__main__":
    main()
