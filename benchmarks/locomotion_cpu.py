"""Locomotion learns on CPU: our best off-policy agent and PPO, each given the same wall-clock
training budget, one after the other on MuJoCo Playground's DM Control `CheetahRun` (MJX
`impl=jax`) on this machine, trained by `jaxrl train` itself; eval return against training
seconds and env steps.

    .venv/bin/python benchmarks/locomotion_cpu.py --budget 600 --out benchmarks/locomotion_cpu.json
    .venv/bin/python benchmarks/locomotion_cpu.py --budget 1800 --agents pql --keep

The agents: `pql` with its preset `pql-cheetah-cpu` (chosen with short probes: PQL reached 300
first among the settings tried) and `ppo` with `ppo-dmc-cpu`, its CPU preset. Each run is the
command a user types, `jaxrl train --preset P --env CheetahRun --max-train-seconds BUDGET ...`
in a subprocess (compile and evaluation excluded from the budget, as in `pql_wallclock.py`);
the off-policy agent's schedule is extended so that the budget ends it, and PPO keeps its
preset's step budget (`--ppo-steps`) and learning-rate schedule, cut into chunks so the budget
can stop it and it is evaluated about as often. 16 deterministic full 1000-step episodes per
evaluation; after training, `jaxrl eval RUN --episodes 32` gives the final return on fresh
starts. Every episode starts from Playground's own `reset` (random joint angles, 200 settle
steps), drawn fresh for each episode by our auto-reset, which computes resets only for the envs
that are done (`engine.wrappers.reset_done`). Writes a run dir per agent under `--runs`
(default `runs/locomotion_cpu/`, gitignored), the JSON `--out` (curves: wall time, env steps,
eval return per evaluation) and a PNG beside it (`<out stem>.png`: return vs env steps, log
axis, and vs training seconds), and prints a table for `benchmarks/RESULTS.md`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

import _common

from jaxrl import configs
from jaxrl.run import plotting

ENV = "CheetahRun"
AGENTS = {"pql": "pql-cheetah-cpu", "ppo": "ppo-dmc-cpu"}
OFF_POLICY_CHUNKS = 1000  # chunks of the preset's size; the time budget ends the run first
PPO_CHUNK_ITERATIONS = 16  # PPO iterations per chunk (preset: 62): the budget stops it, ~25 s
JAXRL = os.path.join(os.path.dirname(sys.executable), "jaxrl")


# ----- training runs -----------------------------------------------------------------------
def train_flags(agent: str, budget: float, eval_envs: int, ppo_steps: int) -> list[str]:
    """`jaxrl train` flags: the preset, the budget and the chunking described above."""
    train = configs.get(AGENTS[agent]).train
    if agent == "ppo":  # its schedule (lr annealing) over `ppo_steps`, in short chunks
        per_chunk = PPO_CHUNK_ITERATIONS * train.env_steps_per_iteration
        chunks = -(-ppo_steps // per_chunk)
    else:  # no schedule: the budget stops it
        per_chunk = train.real_total_env_steps // train.num_chunks
        chunks = OFF_POLICY_CHUNKS
    return ["--preset", AGENTS[agent], "--env", ENV, "--max-train-seconds", f"{budget:g}",
            "--num-eval-envs", str(eval_envs), "--checkpoint-every", str(10**6),
            "--eval-every", "1", "--num-chunks", str(chunks),
            "--total-env-steps", str(chunks * per_chunk)]


def _records(run_dir: str) -> list[dict]:
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r for r in rows if "eval/episode_return" in r]


def final_eval(run_dir: str, episodes: int) -> dict:
    """`jaxrl eval RUN --episodes N`: mean, std and count from its printed line."""
    out = subprocess.run([JAXRL, "eval", run_dir, "--episodes", str(episodes), "--seed", "777"],
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r"return ([-\d.]+) \+- ([\d.]+) \(mean \+- std over (\d+) episodes", out)
    if m is None:
        raise RuntimeError(f"jaxrl eval printed no return line: {out!r}")
    return {"return_mean": float(m[1]), "return_std": float(m[2]), "num_episodes": int(m[3])}


def run_one(agent: str, budget: float, runs: str, eval_envs: int, ppo_steps: int,
            final_eval_envs: int) -> dict:
    run_dir = os.path.join(runs, f"{agent}-{ENV}")
    if os.path.exists(run_dir):
        shutil.rmtree(run_dir)
    flags = train_flags(agent, budget, eval_envs, ppo_steps)
    cmd = [JAXRL, "train", *flags, "--run-dir", run_dir, "--no-progress"]
    t0 = time.time()
    load0 = os.getloadavg()
    subprocess.run(cmd, check=True)
    load1 = os.getloadavg()
    with open(os.path.join(run_dir, "summary.json")) as f:
        summary = json.load(f)
    records = _records(run_dir)
    curve = [(r["wall_time"], r["env_steps"], r["eval/episode_return"]) for r in records]
    best = max(curve, key=lambda e: e[2])
    return {"agent": agent, "preset": AGENTS[agent], "env": ENV, "run_dir": run_dir,
            "budget_s": budget, "command": " ".join(["jaxrl", "train", *flags]),
            "compile_s": summary["compile_seconds"], "train_s": summary["train_seconds"],
            "env_steps": summary["env_steps"], "final_return": curve[-1][2],
            "best_return": best[2], "best_at_s": best[0], "best_at_steps": best[1],
            "first_300": next(([s, n] for s, n, ret in curve if ret >= 300.0), None),
            "final_on_cheetahrun": final_eval(run_dir, final_eval_envs),
            "curve_columns": ["wall_time_s", "env_steps", "eval_return"], "curve": curve,
            "schedule_done": summary["final"].get("chunk") == int(flags[flags.index(
                "--num-chunks") + 1]),
            "sps": summary["env_steps"] / max(summary["train_seconds"], 1e-9),
            "loadavg_start_end": [round(x, 2) for x in load0 + load1],
            "layout": summary["layout"], "total_s": time.time() - t0}


# ----- report ------------------------------------------------------------------------------
def table(results: list[dict], default_budget: float) -> list[str]:
    lines = ["| agent (preset) | training env | best eval return (at s / env steps) | "
             "final eval return | final `jaxrl eval` (mean +- std, n) | "
             "first >= 300 (s / env steps) | "
             "return at 1/3 / 2/3 of the budget | budget s | env steps | "
             "training s | SPS | compile |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        budget = r.get("budget_s", default_budget)
        f = r["final_on_cheetahrun"]
        hit = r["first_300"]
        done = " (schedule done)" if r["schedule_done"] else ""
        lines.append(
            f"| `{r['agent']}` (`{r['preset']}`) | {r['env']} | {r['best_return']:.1f} "
            f"({r['best_at_s']:.0f} s / {r['best_at_steps']:,}) | {r['final_return']:.1f}{done} | "
            f"{f['return_mean']:.1f} +- {f['return_std']:.1f} ({f['num_episodes']:.0f}) | "
            f"{f'{hit[0]:.0f} s / {hit[1]:,}' if hit else 'not reached'} | "
            f"{_at(r['curve'], budget / 3)} / {_at(r['curve'], 2 * budget / 3)} | {budget:g} | "
            f"{r['env_steps']:,} | {r['train_s']:.0f} | {r['sps']:,.0f} | {r['compile_s']:.0f} s |")
    return lines


def _at(curve, seconds: float) -> str:
    before = [ret for s, _, ret in curve if s <= seconds]
    return f"{before[-1]:.1f}" if before else "-"


def report(res: dict, out: str) -> None:
    """PNG beside `out` and the table, from `res` and its run dirs."""
    png = os.path.splitext(out)[0] + ".png"
    runs = res["runs"]
    if runs and all(os.path.exists(os.path.join(r["run_dir"], "metrics.jsonl")) for r in runs):
        fig = plotting.make_figure([r["run_dir"] for r in runs], labels=[
            f"{r['agent']} ({r['preset']}) on {r['env']}" for r in runs])
        for ax in fig.axes:
            ax.axhline(300.0, color="gray", linestyle="--", linewidth=1)
            ax.set_ylim(bottom=0)
        fig.axes[0].set_xscale("log")  # PPO takes many more env steps than the off-policy agent
        fig.axes[0].set_ylabel("eval return (16 episodes, deterministic)")
        fig.axes[0].get_legend().remove()  # the lower right of the time panel stays empty
        fig.axes[1].legend(loc="lower right", fontsize="small")
        budgets = "/".join(f"{b:g}" for b in dict.fromkeys(r.get("budget_s", res["budget_s"])
                                                           for r in runs))
        fig.suptitle(f"{ENV} (MJX impl=jax), {budgets} s training budget per run, "
                     f"{res['machine']['cpu_count']} CPU cores; dashed: 300")
        fig.savefig(png, dpi=120)
        res["png"] = png
    else:
        print(f"(run dirs are not on this machine: {png} left as it is)")
    _common.write_json(out, res)
    lines = _common.machine_lines(res)
    print("\n".join(lines + table(runs, res["budget_s"])))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--budget", type=float, default=600.0, help="training seconds per run")
    p.add_argument("--agents", nargs="+", default=list(AGENTS), choices=list(AGENTS))
    p.add_argument("--ppo-steps", type=int, default=9_000_000,
                   help="PPO's env-step schedule (learning rate annealed over it)")
    p.add_argument("--eval-envs", type=int, default=16)
    p.add_argument("--final-eval-envs", type=int, default=32,
                   help="episodes of the final evaluation (`jaxrl eval`)")
    p.add_argument("--runs", default=os.path.join(_common.REPO, "runs", "locomotion_cpu"))
    p.add_argument("--out", default=os.path.join(_common.REPO, "benchmarks",
                                                 "locomotion_cpu.json"))
    p.add_argument("--keep", action="store_true", help="keep the other agents' runs in --out")
    p.add_argument("--replot", action="store_true",
                   help="no training: redraw the PNG and the table from --out and its run dirs")
    args = p.parse_args(argv)
    old = {}
    if args.out and os.path.exists(args.out):
        with open(args.out) as f:
            old = json.load(f)
    if args.replot:
        report(old, args.out)
        return
    command = " ".join(["benchmarks/" + os.path.basename(sys.argv[0])] + (argv or sys.argv[1:]))
    res = {"commands": [command], "layout": "single (one CPU device)", "budget_s": args.budget,
           "env": ENV, "machine": _common.machine_info(), "versions": _common.versions(),
           "runs": []}
    if args.keep and old:  # the other agents' runs stay; machine info of both kept
        res["runs"] = [r for r in old.get("runs", []) if r["agent"] not in args.agents]
        res["commands"] = old.get("commands", []) + [command]
        res["earlier"] = old.get("earlier", []) + [{k: old.get(k) for k in ("machine",
                                                                            "versions")}]
    for agent in args.agents:
        print(f"== {agent} on {ENV} ({args.budget:g} s budget)", flush=True)
        res["runs"].append(run_one(agent, args.budget, args.runs, args.eval_envs,
                                   args.ppo_steps, args.final_eval_envs))
        res["runs"][-1]["loadavg_after"] = _common.machine_info()["loadavg_1_5_15"]
        _common.write_json(args.out, res)
    report(res, args.out)


if __name__ == "__main__":
    main()
