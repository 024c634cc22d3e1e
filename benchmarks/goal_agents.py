"""Goal-reaching agents on CPU: the contrastive presets on `DetourMaze`, and contrastive PPO
(reward-free) against PPO with a dense reward at equal env steps.

    .venv/bin/python benchmarks/goal_agents.py                 # every run, one after the other
    .venv/bin/python benchmarks/goal_agents.py --only 0 2      # some runs; the others are kept
    .venv/bin/python benchmarks/goal_agents.py --replot        # table and PNGs from the JSON

Each run is the command a user types, `jaxrl train --preset P ...`, in a subprocess, one after
the other so runs do not share the 2 cores (`RUNS`):

- `DetourMaze` (every goal at least 5 cells along a serpentine maze; straight-line policy 0.176,
  random 0.002, shortest path 1.0 over 512 episodes, `tests/envs/test_goal_envs.py`):
  `crl-detourmaze-cpu`, `cppo-detourmaze-cpu`, and PPO on `DetourMazeDense`.
- `ReacherGoal`: `cppo-reacher-cpu` and PPO on `ReacherGoalDense`.

The PPO runs (`ppo-goal-dense-cpu`) read the dense reward `-distance to goal` and get the CPPO
preset's env steps, chunks and evaluation episodes; CRL and CPPO never read a reward. The claim
checked: Osman et al. (arXiv 2605.13554, abstract) report contrastive PPO close to dense-reward
PPO.

Metric: `eval/episode_success_any` (fraction of the deterministic evaluation episodes, 256 on
the mazes and 128 on the reacher, that reach the goal once) after every chunk, and
`eval/episode_success` (steps near the goal). Writes run dirs under `--runs` (default
`runs/goal_agents/`, gitignored), the JSON `--out` (default `benchmarks/goal_agents.json`;
curves: env steps, training seconds, success rate, steps near goal), a PNG per task beside it
(`<out stem>_<task>.png`) and prints a table for `benchmarks/RESULTS.md`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import _common

from jaxrl import configs
from jaxrl.run import plotting

JAXRL = os.path.join(os.path.dirname(sys.executable), "jaxrl")
METRIC = "eval/episode_success_any"
# (label, preset, env or None for the preset's, preset whose steps and chunks it gets or None)
RUNS = [("crl", "crl-detourmaze-cpu", None, None),
        ("cppo", "cppo-detourmaze-cpu", None, None),
        ("ppo, dense reward", "ppo-goal-dense-cpu", "DetourMazeDense", "cppo-detourmaze-cpu"),
        ("cppo", "cppo-reacher-cpu", None, None),
        ("ppo, dense reward", "ppo-goal-dense-cpu", "ReacherGoalDense", "cppo-reacher-cpu")]


def train_flags(preset: str, env: str | None, steps_of: str | None, seed: int) -> list[str]:
    """`jaxrl train` flags of one run (the env and step budget of `steps_of` when given)."""
    flags = ["--preset", preset, "--seed", str(seed)]
    if env:
        flags += ["--env", env]
    if steps_of:
        train = configs.get(steps_of).train
        flags += ["--total-env-steps", str(train.total_env_steps),
                  "--num-chunks", str(train.num_chunks),
                  "--num-eval-envs", str(train.num_eval_envs)]
    return flags


def _records(run_dir: str) -> list[dict]:
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r for r in rows if METRIC in r]


def run_one(label: str, preset: str, env: str | None, steps_of: str | None, seed: int,
            runs: str) -> dict:
    env_name = env or configs.get(preset).env
    run_dir = os.path.join(runs, f"{preset}-{env_name}-s{seed}")
    if os.path.exists(run_dir):
        shutil.rmtree(run_dir)
    flags = train_flags(preset, env, steps_of, seed)
    load0 = os.getloadavg()
    subprocess.run([JAXRL, "train", *flags, "--run-dir", run_dir, "--no-progress"], check=True)
    return dict(read_run(label, preset, env_name, seed, run_dir, flags),
                loadavg_start_end=[round(x, 2) for x in load0 + os.getloadavg()])


def read_run(label: str, preset: str, env: str, seed: int, run_dir: str,
             flags: list[str]) -> dict:
    """The JSON record of a finished `jaxrl train <flags>` run in `run_dir`."""
    with open(os.path.join(run_dir, "summary.json")) as f:
        summary = json.load(f)
    curve = [(r["env_steps"], round(r["wall_time"], 1), r[METRIC], r["eval/episode_success"])
             for r in _records(run_dir)]
    return {"label": label, "preset": preset, "env": env, "seed": seed, "run_dir": run_dir,
            "command": " ".join(["jaxrl", "train", *flags]),
            "compile_s": summary["compile_seconds"], "train_s": summary["train_seconds"],
            "env_steps": summary["env_steps"], "final_success": curve[-1][2],
            "best_success": max(c[2] for c in curve), "final_near_goal": curve[-1][3],
            "curve_columns": ["env_steps", "wall_time_s", "success_any", "near_goal_steps"],
            "curve": curve}


def table(runs: list[dict]) -> list[str]:
    lines = ["| env | agent (preset) | reward read | env steps | success_any per chunk | "
             "final near goal | training s | compile s |",
             "| --- | --- | --- | ---: | --- | ---: | ---: | ---: |"]
    for r in runs:
        reward = "dense `-distance`" if r["env"].endswith("Dense") else "none (reward-free)"
        curve = " ".join(f"{c[2]:.2f}" for c in r["curve"])
        lines.append(f"| {r['env']} | {r['label']} (`{r['preset']}`) | {reward} | "
                     f"{r['env_steps']:,} | {curve} | {r['final_near_goal']:.1f} | "
                     f"{r['train_s']:.0f} | {r['compile_s']:.0f} |")
    return lines


def _order(run: dict) -> tuple:
    """Table order: as in `RUNS`, then by seed."""
    keys = [(preset, env or configs.get(preset).env) for _, preset, env, _ in RUNS]
    key = (run["preset"], run["env"])
    return (keys.index(key) if key in keys else len(keys), run["seed"])


def _task(env: str) -> str:
    return env.removesuffix("Dense")


def _curve_dir(run: dict, folder: str) -> str:
    """The run's dir, or (gone from this machine) `folder` holding a `metrics.jsonl` of the
    curve recorded in the JSON (env steps, training seconds, success rate)."""
    if os.path.exists(os.path.join(run["run_dir"], "metrics.jsonl")):
        return run["run_dir"]
    os.makedirs(folder)
    with open(os.path.join(folder, "metrics.jsonl"), "w") as f:
        for row in run["curve"]:
            v = dict(zip(run["curve_columns"], row, strict=True))
            f.write(json.dumps({"env_steps": v["env_steps"], "wall_time": v["wall_time_s"],
                                METRIC: v["success_any"]}) + "\n")
    return folder


def report(res: dict, out: str) -> None:
    """A PNG per task beside `out` and the table, from `res` (and its run dirs, or the curves
    recorded in `res` for runs whose dirs are gone)."""
    runs, stem = res["runs"], os.path.splitext(out)[0]
    res["png"] = []
    for task in dict.fromkeys(_task(r["env"]) for r in runs):
        mine = [r for r in runs if _task(r["env"]) == task]
        with tempfile.TemporaryDirectory() as tmp:
            dirs = [_curve_dir(r, os.path.join(tmp, str(i))) for i, r in enumerate(mine)]
            fig = plotting.make_figure(dirs, metric=METRIC, labels=[
                f"{r['label']} ({r['preset']}) on {r['env']}" for r in mine])
        fig.axes[0].set_ylim(0.0, 1.02)
        fig.suptitle(f"{task}: goal reached in deterministic evaluation episodes, "
                     f"{res['machine']['cpu_count']} CPU cores, runs one after the other")
        png = f"{stem}_{task}.png"
        fig.savefig(png, dpi=110)
        res["png"].append(png)
    _common.write_json(out, res)
    print("\n".join(_common.machine_lines(res) + table(runs)))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--only", nargs="+", type=int, default=None,
                   help="indices into RUNS of the runs to do (default: all)")
    p.add_argument("--runs", default=os.path.join(_common.REPO, "runs", "goal_agents"))
    p.add_argument("--out", default=os.path.join(_common.REPO, "benchmarks", "goal_agents.json"))
    p.add_argument("--replot", action="store_true",
                   help="no training: redraw the PNGs and the table from --out and its run dirs")
    args = p.parse_args(argv)
    out = args.out
    old = {}
    if os.path.exists(out):
        with open(out) as f:
            old = json.load(f)
    if args.replot:
        report(old, out)
        return
    command = " ".join(["benchmarks/" + os.path.basename(sys.argv[0])] + (argv or sys.argv[1:]))
    res = {"commands": old.get("commands", []) + [command],
           "machine": _common.machine_info(), "versions": _common.versions(),
           "runs": old.get("runs", [])}
    todo = [RUNS[i] for i in (args.only if args.only is not None else range(len(RUNS)))]
    for label, preset, env, steps_of in todo:
        print(f"== {label}: {preset} on {env or configs.get(preset).env}", flush=True)
        t0 = time.time()
        run = run_one(label, preset, env, steps_of, args.seed, args.runs)
        run["total_s"] = round(time.time() - t0, 1)
        res["runs"] = sorted([r for r in res["runs"] if r["run_dir"] != run["run_dir"]] + [run],
                             key=_order)
        _common.write_json(out, res)
    report(res, out)


if __name__ == "__main__":
    main()
