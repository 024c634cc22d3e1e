"""GPU check: one command that measures raw simulator and training throughput on one GPU machine.

    .venv/bin/python benchmarks/gpu_check.py              # about 10 minutes on one H100/H200
    .venv/bin/python benchmarks/gpu_check.py --quick      # tiny sizes: a smoke test, also on CPU
    .venv/bin/python benchmarks/gpu_check.py --only ppo-cartpole seeds-4 --out /tmp/x.json

It installs nothing: run it with the project's venv on the GPU machine. It prints one markdown
table and writes every number to `benchmarks/gpu_check.json` (`--out`), rewritten after each row
so a killed run keeps the rows done. Rows (`--only` takes these names):

- `raw-cartpole`, `raw-go1`: raw simulator SPS (env steps/s) of `jaxrl.envs.make(name)` with the
  default MJX implementation of the backend (`warp` on GPU, `jax` on CPU), at the GPU presets'
  `num_envs` (`ppo-dmc-gpu`: 2048, `ppo-go1-flat-gpu`: 8192): `jit(vmap(reset))` once (its first
  call, compile included, is the "compile s" column with the rollout's warm-up), then
  `jit(scan(vmap(step)))` with uniform random actions, timed after two warm-up calls
  (`_common.time_random_rollout`; nominal model, no auto-reset, no domain randomization).
- `ppo-cartpole` (`ppo-dmc-gpu`), `ppo-go1` (`ppo-go1-flat-gpu`), `sac-cartpole`
  (`sac-dmc-gpu`), `fastdsac-go1` (`fastdsac-go1-flat-gpu`): training SPS of
  `jaxrl.run.runner.train` with the preset's settings, no evaluation, and a short budget
  (`TRAIN_ROWS`: a few chunks; an off-policy row's first chunk ends where learning starts).
  "SPS" is the median of `perf/sps` over the chunks after the first (all seeds together);
  compile (`RunResult.compile_seconds`: init plus the ahead-of-time compile of the chunk
  program) is reported apart and excluded.
- `seeds-1`, `seeds-4`, `seeds-16`: `ppo-cartpole` with 1, 4 and 16 vmapped seeds
  (`TrainConfig.num_seeds`): total SPS, per-seed SPS and total / 1-seed total. `seeds-1` is the
  `ppo-cartpole` run itself when both are selected.
- `data-parallel`: `ppo-cartpole` with `num_devices` = every visible device (jit shardings);
  skipped, with a note, when only one device is visible.

Each row runs in a try/except (its error goes into the row). Rows start only while the elapsed
time is under `--budget-s` (default 570 s), and every training row stops after the first chunk
at which its training time passes `--max-train-s`, so the whole command stays under 10 minutes;
compile dominates (every row compiles its own program). Set `JAX_COMPILATION_CACHE_DIR` to reuse
compiled programs in a second run (the JSON records whether it was set: compile seconds are then
warm). The JSON also records the GPU (`jax.devices()[0].device_kind`, `nvidia-smi` when present),
jax/jaxlib/mujoco versions and the command line.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import statistics
import subprocess
import sys
import time

import _common as common

NAME = "gpu_check"
DEFAULT_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_check.json")

RAW_ROWS = {"raw-cartpole": ("CartpoleBalance", "ppo-dmc-gpu"),
            "raw-go1": ("Go1JoystickFlatTerrain", "ppo-go1-flat-gpu")}
"""Row -> (env, preset whose num_envs is used)."""
TRAIN_ROWS = {"ppo-cartpole": ("ppo-dmc-gpu", 4, 1), "ppo-go1": ("ppo-go1-flat-gpu", 4, 2),
              "sac-cartpole": ("sac-dmc-gpu", 5, 64),
              "fastdsac-go1": ("fastdsac-go1-flat-gpu", 5, 32)}
"""Row -> (preset, chunks, iterations per chunk at least; off-policy: at least up to the
iteration where learning starts, so chunks 2.. all learn)."""
SEED_ROWS = {"seeds-1": 1, "seeds-4": 4, "seeds-16": 16}
ROWS = tuple(RAW_ROWS) + tuple(TRAIN_ROWS) + tuple(SEED_ROWS) + ("data-parallel",)

QUICK_TRAIN = {  # --quick: (TrainConfig fields, agent config fields)
    "ppo-dmc-gpu": ({"num_envs": 64, "unrolls_per_update": 2},
                    {"num_minibatches": 4, "num_epochs": 2}),
    "ppo-go1-flat-gpu": ({"num_envs": 32}, {"num_minibatches": 4, "num_epochs": 2}),
    "sac-dmc-gpu": ({"num_envs": 16}, {"batch_size": 64, "buffer_size": 10_000,
                                       "learning_starts": 256, "utd_ratio": 2.0}),
    "fastdsac-go1-flat-gpu": ({"num_envs": 16}, {"batch_size": 128, "buffer_size": 10_000,
                                                 "learning_starts": 256}),
}
QUICK_RAW_ENVS = {"CartpoleBalance": 64, "Go1JoystickFlatTerrain": 16}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="tiny sizes (smoke test, CPU too)")
    p.add_argument("--only", nargs="+", default=None, choices=ROWS, metavar="ROW",
                   help=f"rows to run: {', '.join(ROWS)}")
    p.add_argument("--out", default=DEFAULT_OUT, help="JSON output path")
    p.add_argument("--budget-s", type=float, default=570.0,
                   help="start no further row after this many seconds")
    p.add_argument("--max-train-s", type=float, default=60.0,
                   help="training seconds per row (TrainConfig.max_train_seconds)")
    p.add_argument("--raw-steps", type=int, default=None, help="scan length (default 100)")
    p.add_argument("--raw-repeats", type=int, default=None, help="timed calls (default 5)")
    p.add_argument("--verbose", action="store_true", help="show simulator/compiler output")
    return p.parse_args(argv)


# ----- machine -----------------------------------------------------------------------------
def gpu_info() -> dict:
    """jax's devices (kind, count, backend) and, when `nvidia-smi` exists, its GPU lines."""
    import jax

    devs = jax.devices()
    out = {"backend": jax.default_backend(), "device_count": len(devs),
           "device_kind": devs[0].device_kind, "devices": [str(d) for d in devs]}
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                            "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        out["nvidia_smi"] = q.stdout.strip().splitlines() if q.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        out["nvidia_smi"] = None
    return out


# ----- rows --------------------------------------------------------------------------------
def raw_row(env_name: str, num_envs: int, steps: int, repeats: int) -> dict:
    """Batched reset (first call: compile) and the random-action step scan of one env."""
    import jax

    from jaxrl import envs

    env = envs.make(env_name)  # the backend's default impl, as training rows use
    keys = jax.random.split(jax.random.PRNGKey(0), num_envs)
    reset = jax.jit(jax.vmap(env.reset))
    t0 = time.perf_counter()
    state = jax.block_until_ready(reset(keys))
    reset_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    jax.block_until_ready(reset(jax.random.split(jax.random.PRNGKey(1), num_envs)))
    reset_s = time.perf_counter() - t0
    r = common.time_random_rollout(env.step, state, env.action_size, num_envs, steps, repeats, 0)
    return {"kind": "raw", "env": env_name, "impl": _default_impl(), "num_envs": num_envs,
            "num_seeds": 1, "num_devices": 1, "sps": r["sps"], "env_steps": r["env_steps"],
            "compile_seconds": reset_first + r["warmup_seconds"], "seconds": r["seconds"],
            "reset_first_call_seconds": reset_first, "reset_seconds": reset_s,
            "reset_env_per_s": num_envs / reset_s, "scan_length": steps, "repeats": repeats}


def train_configs(preset_name: str, chunks: int, min_iters: int, quick: bool, **train_kw):
    """(preset, TrainConfig, agent config) of a training row: the preset with evaluation off,
    `train_kw` and the --quick sizes applied, and `chunks` chunks of at least `min_iters`
    iterations (off-policy: at least up to the iteration where learning starts)."""
    import jaxrl.agents  # noqa: F401  (registers the agents)
    from jaxrl import configs
    from jaxrl.engine.contract import lookup

    preset = configs.get(preset_name)
    t_over, a_over = QUICK_TRAIN[preset_name] if quick else ({}, {})
    agent_cfg = lookup(preset.agent)[1](**dict(preset.agent_overrides, **a_over))
    cfg = dataclasses.replace(preset.train, num_eval_envs=0, num_chunks=chunks, **t_over,
                              **train_kw)
    iters = 1 if quick else min_iters
    starts = getattr(agent_cfg, "learning_starts", 0)
    iters = max(iters, math.ceil(starts / (cfg.num_envs * cfg.unroll_length
                                           * cfg.unrolls_per_update)))
    cfg = dataclasses.replace(cfg, total_env_steps=chunks * iters * cfg.env_steps_per_iteration)
    return preset, cfg, agent_cfg


def train_row(preset_name: str, chunks: int, min_iters: int, quick: bool, max_train_s: float,
              **train_kw) -> dict:
    """One `runner.train` run; SPS = median `perf/sps` of the chunks after the first."""
    from jaxrl.run import runner

    preset, cfg, agent_cfg = train_configs(preset_name, chunks, min_iters, quick,
                                           max_train_seconds=max_train_s, **train_kw)
    result = runner.train(preset.agent, preset.env, cfg, agent_cfg, run_dir=None,
                          progress=False)
    chunk_sps = [r["perf/sps"] for r in result.records]
    sps = statistics.median(chunk_sps[1:] if len(chunk_sps) > 1 else chunk_sps)
    out = {"kind": "train", "preset": preset_name, "agent": preset.agent, "env": preset.env,
           "impl": cfg.env_impl or _default_impl(), "num_envs": cfg.num_envs,
           "num_seeds": cfg.num_seeds, "num_devices": cfg.num_devices, "sps": sps,
           "sps_per_seed": sps / cfg.num_seeds, "chunk_sps": chunk_sps,
           "sps_all_chunks": result.env_steps / result.train_seconds,  # all seeds
           "env_steps": result.env_steps, "compile_seconds":
           result.compile_seconds, "seconds": result.train_seconds,
           "chunks_run": len(chunk_sps), "chunks_planned": cfg.num_chunks,
           "env_steps_per_iteration": cfg.env_steps_per_iteration,
           "iterations_per_chunk": cfg.iterations_per_chunk,
           "layout": result.records[-1].get("layout")}
    if len(chunk_sps) < 2:
        out["note"] = "one chunk only: SPS includes that chunk"
    del result
    return out


def _default_impl() -> str:
    """The MJX implementation `envs.make` picks when none is named."""
    from jaxrl.envs.registry import default_impl

    return default_impl()


def run_row(name: str, args, done: dict) -> dict:
    """Measures row `name` (`done`: rows measured so far, for `seeds-1` and ratios)."""
    import jax

    steps = args.raw_steps or (10 if args.quick else 100)
    repeats = args.raw_repeats or (2 if args.quick else 5)
    if name in RAW_ROWS:
        from jaxrl import configs

        env_name, preset = RAW_ROWS[name]
        n = QUICK_RAW_ENVS[env_name] if args.quick else configs.get(preset).train.num_envs
        return raw_row(env_name, n, steps, repeats)
    if name in TRAIN_ROWS:
        return train_row(*TRAIN_ROWS[name], args.quick, args.max_train_s)
    base = TRAIN_ROWS["ppo-cartpole"]
    if name in SEED_ROWS:
        seeds = SEED_ROWS[name]
        prev = done.get("ppo-cartpole", {})
        if seeds == 1 and "sps" in prev:
            return dict(prev, note="the ppo-cartpole run (1 seed)")
        return train_row(*base, args.quick, args.max_train_s, num_seeds=seeds)
    n = jax.device_count()
    if n < 2:
        return {"kind": "train", "skipped": f"only {n} device visible ({jax.devices()[0]}); "
                                           "data parallelism needs 2 or more"}
    out = train_row(*base, args.quick, args.max_train_s, num_devices=n)
    return out


def add_ratios(rows: dict) -> None:
    """total / 1-seed total for the seed rows; data-parallel SPS over ppo-cartpole's."""
    one = (rows.get("seeds-1") or rows.get("ppo-cartpole") or {}).get("sps")
    for name in (*SEED_ROWS, "data-parallel"):
        r = rows.get(name) or {}
        if one and r.get("sps"):
            r["sps_vs_1_seed"] = r["sps"] / one


def run_all(args, res: dict) -> None:
    """Runs the selected rows in order, each in a try/except, writing the JSON after each."""
    t_start = time.perf_counter()
    log = common.start_quiet_log(NAME, args.verbose)
    for name in args.only or ROWS:
        elapsed = time.perf_counter() - t_start
        if elapsed > args.budget_s:
            res["rows"][name] = {"skipped": f"time budget: {elapsed:.0f} s elapsed > "
                                            f"--budget-s {args.budget_s:.0f}"}
            continue
        print(f"[{elapsed:6.0f} s] {name} ...", flush=True)
        t0 = time.perf_counter()
        try:
            with common.quiet(log):
                row = run_row(name, args, res["rows"])
        except Exception as e:  # noqa: BLE001 (one row's failure must not lose the table)
            row = {"error": f"{type(e).__name__}: {e}"[:2000]}
            if type(e).__name__ == "TrainingInterrupted":  # SIGINT/SIGTERM: stop the command
                res["rows"][name] = row
                common.write_json(args.out, res)
                raise
        row["wall_seconds"] = time.perf_counter() - t0
        res["rows"][name] = row
        add_ratios(res["rows"])
        print(f"  {name}: {_row_summary(row)}", flush=True)
        res["total_seconds"] = time.perf_counter() - t_start
        common.write_json(args.out, res)


def _row_summary(r: dict) -> str:
    if "error" in r:
        return "FAILED " + r["error"].splitlines()[0][:300]
    if "skipped" in r:
        return "skipped: " + r["skipped"]
    return (f"{common.fmt(r['sps'])} SPS, compile {r['compile_seconds']:.1f} s, "
            f"wall {r['wall_seconds']:.0f} s")


# ----- output ------------------------------------------------------------------------------
def format_table(res: dict) -> str:
    """One markdown table of every row, then machine and version lines."""
    head = ("| row | what | impl | num_envs | seeds | devices | SPS (total) | SPS per seed | "
            "vs 1 seed | compile s | timed s | note |\n"
            "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    lines = [head]
    for name, r in res["rows"].items():
        if "error" in r or "skipped" in r:
            why = r.get("error") or r.get("skipped")
            text = why.splitlines()[0][:160].replace("|", "/")
            lines.append(f"| {name} | - | - | - | - | - | - | - | - | - | - | "
                         f"{'FAILED: ' if 'error' in r else 'skipped: '}{text} |")
            continue
        what = (f"raw {r['env']}" if r["kind"] == "raw" else f"`{r['preset']}` ({r['env']})")
        per = r.get("sps_per_seed")
        vs1 = r.get("sps_vs_1_seed")
        lines.append(
            f"| {name} | {what} | {r['impl']} | {r['num_envs']} | {r['num_seeds']} | "
            f"{r['num_devices']} | {common.fmt(r['sps'])} | {common.fmt(per)} | "
            f"{'-' if vs1 is None else f'{vs1:.2f}'} | {r['compile_seconds']:.1f} | "
            f"{r['seconds']:.1f} | {r.get('note', '')} |")
    m, g, v = res["machine"], res["gpu"], res["versions"]
    lines += ["", f"- device: {g['device_kind']} x {g['device_count']} (jax backend "
              f"{g['backend']}); nvidia-smi: {g.get('nvidia_smi')}",
              f"- host: {m['cpu_model']}, {m['cpu_count']} cores, load average at start "
              f"{m['loadavg_1_5_15']}, Python {m['python']}",
              f"- versions: {common.vers(v)}",
              f"- command: `{res['command']}`; JAX_COMPILATION_CACHE_DIR "
              f"{res['compilation_cache_dir'] or 'unset (cold compiles)'}; total "
              f"{res.get('total_seconds', 0):.0f} s"]
    return "\n".join(lines)


def main(argv=None) -> None:
    args = parse_args(argv)
    t0 = time.perf_counter()
    res = {"command": " ".join([os.path.basename(sys.executable), *sys.argv]),
           "quick": args.quick, "machine": common.machine_info(), "gpu": gpu_info(),
           "versions": common.versions(),
           "compilation_cache_dir": os.environ.get("JAX_COMPILATION_CACHE_DIR"),
           "settings": {"train_rows": TRAIN_ROWS, "raw_rows": RAW_ROWS,
                        "seed_rows": SEED_ROWS, "budget_s": args.budget_s,
                        "max_train_s": args.max_train_s}, "rows": {}}
    print(f"device: {res['gpu']['device_kind']} x {res['gpu']['device_count']}", flush=True)
    run_all(args, res)
    res["total_seconds"] = time.perf_counter() - t0
    common.write_json(args.out, res)
    print(format_table(res))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
