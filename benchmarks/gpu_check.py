"""GPU check: one command that measures simulator and training throughput on one GPU machine.

    .venv/bin/python benchmarks/gpu_check.py              # about 9 minutes on one H100/H200
    .venv/bin/python benchmarks/gpu_check.py --quick      # tiny sizes: a smoke test, also on CPU
    .venv/bin/python benchmarks/gpu_check.py --only ppo-cartpole seeds-4 --out /tmp/x.json

It installs nothing: on a bare GPU machine, install with `device_kit.py`'s command. It prints one
markdown table and writes every number to `--out` (default `benchmarks/gpu_check.json`),
rewritten after each row so a killed run keeps the rows done. Rows (`--only`; `ROWS` gives the
order, `ppo-go1` first):

- `raw-cartpole`, `raw-go1`: raw simulator SPS of `jaxrl.envs.make(name)` at the GPU presets'
  `num_envs` (2048, 8192): `jit(scan(vmap(step)))`, uniform random actions, timed after two
  warm-up calls (`_common.time_random_rollout`); "compile s" is the first reset and warm-ups.
- `env-cartpole`, `env-go1`: the same stepping through the preset's training env
  (`loop.make_env`: auto-reset, episode statistics, the preset's domain randomization); "ratio"
  is its SPS over the raw row's.
- `ppo-cartpole` (`ppo-dmc-gpu`), `sac-cartpole` (`sac-dmc-gpu`), `fastdsac-go1`: training
  SPS of `runner.train` with the preset, no evaluation, a few chunks (`TRAIN_ROWS`): the median
  `perf/sps` of the chunks after the first; compile apart.
- `seeds-1`, `seeds-4`, `seeds-16`: `ppo-cartpole` with 1, 4 and 16 vmapped seeds; "ratio" is
  total SPS over one seed's (`seeds-1` is the `ppo-cartpole` run).
- `ppo-go1`: `ppo-go1-flat-gpu` trained for `--go1-train-s` with evaluation after every 2nd
  chunk (the reward curve), then exported to ONNX (parity check) and run closed loop in
  onnxruntime against the JAX policy; `--artifacts` receives its metrics.jsonl, model, sidecar.
- `data-parallel`: `ppo-cartpole` over every visible device; skipped on one device.

Each row runs in a try/except (its error goes into the row). Rows start only while the elapsed
time is under `--budget-s` (or `--end-s` minus 45 s); training rows stop after the chunk at which
training passes `--max-train-s`. The JSON also records the GPU, versions, the command line,
`JAX_COMPILATION_CACHE_DIR` (warm compiles) and, when run from the kit, its manifest.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import _common as common

DEFAULT_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_check.json")

ENVS = ("CartpoleBalance", "Go1JoystickFlatTerrain")
"""Every env a row builds (`device_kit.py` packs the Menagerie folders these read)."""
RAW_ROWS = {"raw-cartpole": ("CartpoleBalance", "ppo-dmc-gpu"),
            "raw-go1": ("Go1JoystickFlatTerrain", "ppo-go1-flat-gpu")}
"""Row -> (env, preset whose num_envs is used)."""
STACK_ROWS = {"env-cartpole": "raw-cartpole", "env-go1": "raw-go1"}
"""Row -> the raw row of the same env and size (the training env stack of its preset)."""
TRAIN_ROWS = {"ppo-cartpole": ("ppo-dmc-gpu", 4, 1), "sac-cartpole": ("sac-dmc-gpu", 5, 64),
              "fastdsac-go1": ("fastdsac-go1-flat-gpu", 5, 32)}
"""Row -> (preset, chunks, iterations per chunk at least; off-policy: at least up to the
iteration where learning starts, so chunks 2.. all learn)."""
SEED_ROWS = {"seeds-1": 1, "seeds-4": 4, "seeds-16": 16}
ROWS = ("ppo-go1", "raw-cartpole", "env-cartpole", "ppo-cartpole", *SEED_ROWS, "raw-go1",
        "env-go1", "fastdsac-go1", "sac-cartpole", "data-parallel")
"""Default order: the rows not yet measured on a GPU first (`ppo-go1`'s curve and export lost
to the TF32 parity failure on the H200, 2026-12-04), then the cheap ones, so a command cut short
loses the least."""
GO1_PRESET, GO1_ITERS, GO1_CHUNKS = "ppo-go1-flat-gpu", 24, 200
"""`ppo-go1`: chunks of 24 iterations (3.9M env steps at 8192 envs), evaluated every 2nd."""
GO1_RESERVE_S = 140.0
"""`--end-s`: seconds kept for the Go1 compile, export and closed-loop check."""

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
    p.add_argument("--go1-train-s", type=float, default=240.0,
                   help="training seconds of the ppo-go1 row (reward curve, then export)")
    p.add_argument("--end-s", type=float, default=None,
                   help="plan to end by then: no row starts after END-45 s, and ppo-go1 trains "
                        f"at most (END - elapsed - {GO1_RESERVE_S:.0f}) / 1.15 s")
    p.add_argument("--artifacts", default=None,
                   help="folder for ppo-go1's metrics.jsonl, ONNX model and sidecar, and the "
                        "simulator/compiler output (simulator.log)")
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


def stack_row(env_name: str, preset_name: str, num_envs: int, steps: int, repeats: int,
              quick: bool = False) -> dict:
    """The training env of `preset_name` (`loop.make_env`: auto-reset, episode statistics and
    the preset's domain randomization) at `num_envs`, stepped with uniform random actions as
    `raw_row`, so `sps_vs_raw` is what the training stack costs over the bare simulator."""
    import jax

    from jaxrl.engine import loop
    from jaxrl.run.assemble import build

    preset, cfg, agent_cfg = train_configs(preset_name, 1, 1, quick)
    cfg = dataclasses.replace(cfg, num_envs=num_envs)
    env = build(preset.agent, env_name, cfg, agent_cfg)[1]
    venv = loop.make_env(env, cfg)
    t0 = time.perf_counter()
    state = jax.block_until_ready(jax.jit(venv.reset)(jax.random.PRNGKey(0)))
    reset_s = time.perf_counter() - t0
    r = common.time_random_rollout(venv.step, state, env.action_size, num_envs, steps, repeats,
                                   1, batched=True)
    return {"kind": "stack", "env": env_name, "preset": preset_name, "impl": _default_impl(),
            "num_envs": num_envs, "num_seeds": 1, "num_devices": 1, "sps": r["sps"],
            "env_steps": r["env_steps"], "compile_seconds": reset_s + r["warmup_seconds"],
            "seconds": r["seconds"], "scan_length": steps, "repeats": repeats,
            "domain_randomization": cfg.domain_randomization}


def go1_row(args, elapsed: float) -> dict:
    """`ppo-go1-flat-gpu` trained for `--go1-train-s` (less under `--end-s`) with evaluation
    after every 2nd chunk, then `jaxrl export` (ONNX parity) and the closed-loop check
    (`jaxrl eval --policy onnx`) on the saved run; `--artifacts` gets its metrics and model."""
    import jaxrl
    from jaxrl.engine.loop import RunConfig
    from jaxrl.run import runner

    train_s = args.go1_train_s
    if args.end_s:
        train_s = min(train_s, (args.end_s - elapsed - GO1_RESERVE_S) / 1.15)
    if train_s < 20:
        return {"kind": "train", "skipped": f"{train_s:.0f} s of training left before --end-s"}
    chunks, iters = (3, 1) if args.quick else (GO1_CHUNKS, GO1_ITERS)
    preset, cfg, agent_cfg = train_configs(GO1_PRESET, chunks, iters, args.quick)
    run = RunConfig(max_train_seconds=train_s, eval_every=1 if args.quick else 2)
    if args.quick:
        cfg = dataclasses.replace(cfg, num_eval_envs=4, episode_length=100)
    else:
        cfg = dataclasses.replace(cfg, num_eval_envs=preset.train.num_eval_envs)
    run_dir = tempfile.mkdtemp(prefix="gpu_check_go1_")
    result = runner.train(preset.agent, preset.env, cfg, agent_cfg, run_dir=run_dir,
                          progress=False, resolved={"preset": GO1_PRESET}, run=run)
    out = _train_summary(GO1_PRESET, preset, cfg, result)
    out["curve"] = [{k: r.get(k) for k in ("env_steps", "perf/sps", "episode/return",
                                           "eval/episode_return", "eval/episode_return_std")}
                    for r in result.records]
    out["max_train_seconds"] = train_s
    copies = [(os.path.join(run_dir, "metrics.jsonl"), "go1_metrics.jsonl")]
    try:  # a failed export keeps the curve: the error goes into the row
        t0 = time.perf_counter()
        ex = jaxrl.export(run_dir)
        out["export"] = {"seconds": time.perf_counter() - t0, "max_abs_error": ex.max_abs_error}
        copies += [(ex.path, "go1_policy.onnx"), (ex.sidecar_path, "go1_policy.json")]
        t0 = time.perf_counter()
        res = jaxrl.closed_loop(run_dir, num_episodes=4 if args.quick else 16)[0]
        out["closed_loop"] = dict(res.summary(), seconds=time.perf_counter() - t0,
                                  num_episodes=int(res.onnx_return.shape[0]))
    except Exception as e:  # noqa: BLE001
        out["export_error"] = f"{type(e).__name__}: {e}"[:2000]
    for src, name in copies if args.artifacts else ():
        os.makedirs(args.artifacts, exist_ok=True)
        shutil.copyfile(src, os.path.join(args.artifacts, name))
    shutil.rmtree(run_dir, ignore_errors=True)
    return out


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
    from jaxrl.engine.loop import RunConfig
    from jaxrl.run import runner

    preset, cfg, agent_cfg = train_configs(preset_name, chunks, min_iters, quick, **train_kw)
    result = runner.train(preset.agent, preset.env, cfg, agent_cfg, run_dir=None,
                          progress=False, run=RunConfig(max_train_seconds=max_train_s))
    out = _train_summary(preset_name, preset, cfg, result)
    del result
    return out


def _train_summary(preset_name: str, preset, cfg, result) -> dict:
    """A training row's numbers from a `RunResult`."""
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
    return out


def _default_impl() -> str:
    """The MJX implementation `envs.make` picks when none is named."""
    from jaxrl.envs.registry import default_impl

    return default_impl()


def run_row(name: str, args, done: dict, elapsed: float = 0.0) -> dict:
    """Measures row `name` (`done`: rows measured so far, for `seeds-1` and ratios)."""
    import jax

    steps = args.raw_steps or (10 if args.quick else 100)
    repeats = args.raw_repeats or (2 if args.quick else 5)
    if name in RAW_ROWS:
        from jaxrl import configs

        env_name, preset = RAW_ROWS[name]
        n = QUICK_RAW_ENVS[env_name] if args.quick else configs.get(preset).train.num_envs
        return raw_row(env_name, n, steps, repeats)
    if name in STACK_ROWS:
        from jaxrl import configs

        env_name, preset = RAW_ROWS[STACK_ROWS[name]]
        n = QUICK_RAW_ENVS[env_name] if args.quick else configs.get(preset).train.num_envs
        return stack_row(env_name, preset, n, steps, repeats, args.quick)
    if name == "ppo-go1":
        return go1_row(args, elapsed)
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
    """total / 1-seed total for the seed rows; data-parallel SPS over ppo-cartpole's; the env
    stack's SPS over the raw simulator's."""
    one = (rows.get("seeds-1") or rows.get("ppo-cartpole") or {}).get("sps")
    for name in (*SEED_ROWS, "data-parallel"):
        r = rows.get(name) or {}
        if one and r.get("sps"):
            r["sps_vs_1_seed"] = r["sps"] / one
    for name, raw in STACK_ROWS.items():
        r, base = rows.get(name) or {}, (rows.get(raw) or {}).get("sps")
        if base and r.get("sps"):
            r["sps_vs_raw"] = r["sps"] / base


def run_all(args, res: dict) -> None:
    """Runs the selected rows in order, each in a try/except, writing the JSON after each."""
    t_start = time.perf_counter()
    if args.artifacts:
        os.makedirs(args.artifacts, exist_ok=True)
    log = common.start_quiet_log("simulator", args.verbose, args.artifacts)
    budget = min(args.budget_s, args.end_s - 45) if args.end_s else args.budget_s
    for name in args.only or ROWS:
        elapsed = time.perf_counter() - t_start
        if elapsed > budget:
            res["rows"][name] = {"skipped": f"time budget: {elapsed:.0f} s elapsed > "
                                            f"{budget:.0f} s"}
            continue
        print(f"[{elapsed:6.0f} s] {name} ...", flush=True)
        t0 = time.perf_counter()
        try:
            with common.quiet(log):
                row = run_row(name, args, res["rows"], elapsed)
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
            "ratio | compile s | timed s | note |\n"
            "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    lines = [head]
    for name, r in res["rows"].items():
        if "error" in r or "skipped" in r:
            why = r.get("error") or r.get("skipped")
            text = why.splitlines()[0][:160].replace("|", "/")
            lines.append(f"| {name} | - | - | - | - | - | - | - | - | - | - | "
                         f"{'FAILED: ' if 'error' in r else 'skipped: '}{text} |")
            continue
        what = {"raw": f"raw {r['env']}", "stack": f"env stack of `{r.get('preset')}` "
                f"({r['env']})"}.get(r["kind"], f"`{r.get('preset')}` ({r['env']})")
        per = r.get("sps_per_seed")
        vs1 = r.get("sps_vs_1_seed", r.get("sps_vs_raw"))
        lines.append(
            f"| {name} | {what} | {r['impl']} | {r['num_envs']} | {r['num_seeds']} | "
            f"{r['num_devices']} | {common.fmt(r['sps'])} | {common.fmt(per)} | "
            f"{'-' if vs1 is None else f'{vs1:.2f}'} | {r['compile_seconds']:.1f} | "
            f"{r['seconds']:.1f} | {r.get('note', '')} |")
    lines += go1_lines(res["rows"].get("ppo-go1") or {})
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


def go1_lines(r: dict) -> list[str]:
    """The Go1 run's curve (every few chunks), export parity and closed-loop lines."""
    if "curve" not in r:
        return []
    evals = [p for p in r["curve"] if p.get("eval/episode_return") is not None]
    pts = evals[:: max(1, len(evals) // 8)] + evals[-1:]
    curve = ", ".join(f"{p['env_steps'] / 1e6:.0f}M: {p['eval/episode_return']:.1f}"
                      for p in pts)
    lines = ["", f"- ppo-go1 eval return by env steps: {curve}"]
    if "closed_loop" not in r:
        return lines + [f"- ppo-go1 export FAILED: {r.get('export_error')}"]
    cl, ex = r["closed_loop"], r["export"]
    return lines + [
        f"- ppo-go1 export: ONNX parity max |error| {ex['max_abs_error']:.2e} "
        f"({ex['seconds']:.0f} s); closed loop over {cl['num_episodes']} episodes: ONNX "
        f"return {cl['onnx_return_mean']:.2f} vs JAX {cl['jax_return_mean']:.2f}, max "
        f"action diff {cl['max_action_diff']:.2e} ({cl['seconds']:.0f} s)"]


def kit_manifest() -> dict | None:
    """`.kit/manifest.json` (`device_kit.py`) when the run uses the kit, else None."""
    path = os.path.join(common.REPO, ".kit", "manifest.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        m = json.load(f)
    return {k: m.get(k) for k in ("commit", "packages", "kit_bytes", "tree_bytes")}


def main(argv=None) -> None:
    args = parse_args(argv)
    t0 = time.perf_counter()
    res = {"command": " ".join([os.path.basename(sys.executable), *sys.argv]),
           "quick": args.quick, "machine": common.machine_info(), "gpu": gpu_info(),
           "versions": common.versions(),
           "compilation_cache_dir": os.environ.get("JAX_COMPILATION_CACHE_DIR"),
           "kit": kit_manifest(),
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
