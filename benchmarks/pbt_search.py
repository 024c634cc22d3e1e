"""Population-based training against grid and random search at equal env steps, each one
`jaxrl sweep` (one program), on a task where the learning rate and the entropy cost matter.

    .venv/bin/python benchmarks/pbt_search.py --out benchmarks/pbt_search.json

Task: PPO with its CPU preset `ppo-dmc-cpu` (256 envs, lr annealed) on DM Control's
`CartpoleSwingup` (MJX `impl=jax`), `--steps` env steps per member, 8 members per search:
- grid: learning_rate {3e-4, 1e-3, 3e-3, 1e-2} x entropy_cost {1e-3, 3e-2};
- random: 8 log-uniform draws of learning_rate in [1e-4, 3e-2] and entropy_cost in
  [1e-4, 1e-1] (`--sample-seed r`);
- pbt: the same 8 draws (so it starts where random search starts) with `--pbt`: a round every
  `--interval` chunks, the sweep's PBT defaults otherwise (bottom quarter copies the top
  quarter, x0.8 / x1.25, resample probability 0.25).
Repeat r (0 .. `--repeats` - 1) uses seed `100 r` (grid and random members all train with it,
as a plain sweep gives every point the same seeds; PBT member i gets `100 r + i`) and sample
seed r. The score of a
search is what it hands its user: the final evaluation return (64 deterministic episodes) of
its best member at the end; the population's mean final return is listed too. Each sweep runs
in its own process, one after another (the machine otherwise idle), so the sweeps' training
throughput (`total_sps`: env steps of all members over training seconds) compares PBT with a
grid of the same size. Writes the JSON `--out`, a PNG beside it and prints the table for
`benchmarks/RESULTS.md`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import _common
import numpy as np

PRESET = "ppo-dmc-cpu"
ENV = "CartpoleSwingup"
GRID = ("ppo.learning_rate=3e-4,1e-3,3e-3,1e-2", "ppo.entropy_cost=1e-3,3e-2")
RANDOM = ("ppo.learning_rate=loguniform:1e-4:3e-2", "ppo.entropy_cost=loguniform:1e-4:1e-1")
METHODS = ("grid", "random", "pbt")
JAXRL = os.path.join(os.path.dirname(sys.executable), "jaxrl")


def sweep_argv(method: str, repeat: int, steps: int, chunks: int, interval: int,
               sweep_dir: str) -> list[str]:
    """`jaxrl sweep` arguments of one search (see the module docstring)."""
    base = ["sweep", "--preset", PRESET, "--env", ENV, "--total-env-steps", str(steps),
            "--num-chunks", str(chunks), "--seed", str(100 * repeat), "--sweep-dir", sweep_dir,
            "--checkpoint-every", str(chunks), "--no-progress"]
    if method == "grid":
        return base + ["--grid", *GRID]
    search = ["--random", *RANDOM, "--num-samples", "8", "--sample-seed", str(repeat)]
    if method == "pbt":
        search += ["--pbt", "--pbt-interval", str(interval)]
    return base + search


def run_search(method: str, repeat: int, args) -> dict:
    """One sweep in a subprocess; its summary condensed to the numbers compared here."""
    sweep_dir = os.path.join(args.runs, f"{method}-{repeat}")
    shutil.rmtree(sweep_dir, ignore_errors=True)
    argv = sweep_argv(method, repeat, args.steps, args.chunks, args.interval, sweep_dir)
    t = time.time()
    proc = subprocess.run([JAXRL, *argv], capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"jaxrl {' '.join(argv)} failed:\n{proc.stderr[-3000:]}")
    with open(os.path.join(sweep_dir, "summary.json")) as f:
        summary = json.load(f)
    members = summary["members"]
    finals = np.asarray([m["final"] for m in members], np.float64)
    best = int(np.nanargmax(finals))
    out = {"method": method, "repeat": repeat, "wall_seconds": time.time() - t,
           "train_seconds": summary["train_seconds"], "compile_seconds": summary["compile_seconds"],
           "total_env_steps": summary["total_env_steps"], "total_sps": summary["total_sps"],
           "best_final": float(finals[best]), "best_member": members[best]["name"],
           "mean_final": float(np.nanmean(finals)), "finals": finals.tolist(),
           "best_curve": _curve(sweep_dir, members[best]["name"])}
    if "pbt" in summary:
        out["schedule"] = summary["pbt"]["schedule"]
    print(f"{method} repeat {repeat}: best {out['best_final']:.1f} ({out['best_member']}), "
          f"mean {out['mean_final']:.1f}, {out['total_sps']:,.0f} SPS", flush=True)
    return out


def _curve(sweep_dir: str, name: str) -> list[tuple[int, float]]:
    with open(os.path.join(sweep_dir, "members", name, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [(r["env_steps"], r["eval/episode_return"]) for r in rows
            if "eval/episode_return" in r]


def table(results: list[dict]) -> str:
    """Markdown: per method the best member's final return and the population mean (mean +-
    std over repeats, and each repeat), and training SPS."""
    lines = ["| search (8 members) | best member's final return | each repeat | population "
             "mean final | training SPS (all members) |", "| --- | --- | --- | --- | --- |"]
    for method in METHODS:
        rows = [r for r in results if r["method"] == method]
        if not rows:
            continue
        best = np.asarray([r["best_final"] for r in rows])
        mean = np.asarray([r["mean_final"] for r in rows])
        sps = np.asarray([r["total_sps"] for r in rows])
        lines.append(f"| {method} | {best.mean():.1f} +- {best.std():.1f} | "
                     f"{', '.join(f'{b:.1f}' for b in best)} | {mean.mean():.1f} +- "
                     f"{mean.std():.1f} | {sps.mean():,.0f} +- {sps.std():,.0f} |")
    return "\n".join(lines)


def figure(results: list[dict], path: str) -> None:
    """Left: best member's final return per search (one dot per repeat, bar at the mean);
    right: the best member's eval return vs env steps, one line per repeat."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.2), layout="constrained")
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [2, 3]})
    for j, method in enumerate(METHODS):
        rows = [r for r in results if r["method"] == method]
        if not rows:
            continue
        best = [r["best_final"] for r in rows]
        left.bar(j, np.mean(best), color=f"C{j}", alpha=0.35)
        left.scatter([j] * len(best), best, color=f"C{j}", s=18, zorder=3)
        for k, r in enumerate(rows):
            x, y = zip(*r["best_curve"], strict=True)
            right.plot(x, y, color=f"C{j}", alpha=0.8, linewidth=1.2,
                       label=method if k == 0 else None)
    left.set_xticks(range(len(METHODS)))
    left.set_xticklabels(METHODS)
    left.set(ylabel="best member's final eval return", title="8 members each; dots: repeats")
    right.set(xlabel="env steps per member", ylabel="eval return (best member)",
              title=f"PPO on {ENV}: learning_rate x entropy_cost")
    right.legend(loc="best")
    for ax in (left, right):
        ax.grid(alpha=0.3)
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=600_000, help="env steps per member")
    parser.add_argument("--chunks", type=int, default=12)
    parser.add_argument("--interval", type=int, default=2, help="chunks between PBT rounds")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--runs", default="runs/pbt_search")
    parser.add_argument("--out", default="benchmarks/pbt_search.json")
    args = parser.parse_args()
    results = []
    for repeat in range(args.repeats):
        for method in args.methods.split(","):
            results.append(run_search(method, repeat, args))
            with open(args.out, "w") as f:  # partial results survive an interruption
                json.dump({"settings": vars(args), "results": results}, f, indent=1)
    report = {"settings": vars(args), "machine": _common.machine_info(),
              "versions": _common.versions(), "results": results}
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    figure(results, os.path.splitext(args.out)[0] + ".png")
    print(table(results))


if __name__ == "__main__":
    main()
