"""PQL's headline claim measured here: return versus wall-clock time (and env steps) for `pql`,
`ppo` and `sac` with their CPU presets, on `CartpoleBalance` and a locomotion task (Brax
`halfcheetah` by default; `--envs CheetahRun` for MJX's, ~12x slower to step here), each run given
the same training-time budget (`max_train_seconds`; compile and evaluation excluded), one after
the other on the same machine.

    .venv/bin/python benchmarks/pql_wallclock.py --budget 180 --out benchmarks/pql_wallclock.json

Writes one run dir per (agent, env) under `--runs` (default `runs/pql_wallclock/`, gitignored),
a PNG per env drawn by `jaxrl.run.plotting.make_figure` (left: env steps on a log axis, right:
training seconds)
next to `--out`, and prints a table for `benchmarks/RESULTS.md`. Every run evaluates 16
deterministic full episodes after each chunk. PPO keeps its preset's step budget and schedule
(learning rate annealed over it): if it finishes its steps before the time budget, its curve
ends there (the table says so). `--keep` adds runs to an existing `--out` (other rows kept).

The reference implementation (`Improbable-AI/pql`) needs Isaac Gym, which cannot be installed on
this machine, so no peer runs here.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import time

import _common

from jaxrl import configs
from jaxrl.engine.loop import RunConfig
from jaxrl.run import plotting, runner

AGENTS = {"pql": "pql-cartpole-cpu", "ppo": "ppo-dmc-cpu", "sac": "sac-dmc-cpu"}
ENVS = ("CartpoleBalance", "halfcheetah")
OFF_POLICY_CHUNKS = 400  # chunks of the preset's size; the time budget ends the run first
# PPO's preset chunk (62 iterations, 508k env steps) takes minutes on the slower locomotion envs:
# there its schedule is cut into more chunks (5 and 1 iterations), so the budget can stop it and
# it is evaluated as often as the others. Same steps, learning-rate schedule and updates.
PPO_CHUNKS = {"halfcheetah": 124, "CheetahRun": 620}


def run_one(agent: str, env: str, budget: float, runs: str, eval_envs: int) -> dict:
    preset = configs.get(AGENTS[agent])
    train = dataclasses.replace(preset.train, num_eval_envs=eval_envs)
    run = RunConfig(max_train_seconds=budget, checkpoint_every=10**6)
    if agent != "ppo":  # no schedule over the run: extend it, the budget stops it
        per_chunk = train.real_total_env_steps // train.num_chunks
        train = dataclasses.replace(train, num_chunks=OFF_POLICY_CHUNKS,
                                    total_env_steps=per_chunk * OFF_POLICY_CHUNKS)
    elif env in PPO_CHUNKS:
        train = dataclasses.replace(train, num_chunks=PPO_CHUNKS[env])
    run_dir = os.path.join(runs, f"{agent}-{env}")
    if os.path.exists(run_dir):
        shutil.rmtree(run_dir)
    agent_cfg = preset.agent_config
    t0 = time.time()
    res = runner.train(agent, env, train, agent_cfg, run_dir=run_dir, progress=False,
                       resolved={"preset": preset.name}, run=run)
    evals = [(r["env_steps"], r["wall_time"], r["eval/episode_return"]) for r in res.records]
    best = max(evals, key=lambda e: e[2])
    return {"agent": agent, "preset": preset.name, "env": env, "run_dir": run_dir,
            "compile_s": res.compile_seconds, "train_s": res.train_seconds,
            "env_steps": res.env_steps, "final_return": evals[-1][2], "best_return": best[2],
            "best_at_steps": best[0], "best_at_s": best[1], "curve": evals,
            "schedule_done": len(res.records) == train.num_chunks,
            "sps": res.env_steps / max(res.train_seconds, 1e-9),
            "layout": res.records[-1]["layout"],
            "total_s": time.time() - t0}


def table(results: list[dict], budget: float) -> list[str]:
    lines = [f"| env | agent (preset) | final eval return | best (env steps / s) | "
             f"first >= 950 (env steps / s) | return at {budget / 3:.0f} s / "
             f"{2 * budget / 3:.0f} s | env steps | SPS | compile |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        marks = [_at(r["curve"], budget / 3), _at(r["curve"], 2 * budget / 3)]
        done = " (schedule done)" if r["schedule_done"] else ""
        lines.append(
            f"| {r['env']} | `{r['agent']}` (`{r['preset']}`) | {r['final_return']:.1f}{done} | "
            f"{r['best_return']:.1f} ({r['best_at_steps']:,} / {r['best_at_s']:.0f} s) | "
            f"{_first(r['curve'], 950.0)} | {marks[0]} / {marks[1]} | {r['env_steps']:,} | "
            f"{r['sps']:,.0f} | "
            f"{r['compile_s']:.0f} s |")
    return lines


def _first(curve, level: float) -> str:
    """Env steps and training seconds of the first evaluation at or above `level`."""
    hit = next(((n, sec) for n, sec, ret in curve if ret >= level), None)
    return f"{hit[0]:,} / {hit[1]:.0f} s" if hit else "not reached"


def _at(curve, seconds: float) -> str:
    """Eval return of the last evaluation at or before `seconds` of training."""
    before = [ret for _, s, ret in curve if s <= seconds]
    return f"{before[-1]:.1f}" if before else "-"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--budget", type=float, default=180.0, help="training seconds per run")
    p.add_argument("--agents", nargs="+", default=list(AGENTS), choices=list(AGENTS))
    p.add_argument("--envs", nargs="+", default=list(ENVS))
    p.add_argument("--eval-envs", type=int, default=16)
    p.add_argument("--runs", default=os.path.join(_common.REPO, "runs", "pql_wallclock"))
    p.add_argument("--out", default=None, help="JSON results (PNGs are written beside it)")
    p.add_argument("--keep", action="store_true",
                   help="keep the other (agent, env) runs already in --out (add or redo these)")
    p.add_argument("--replot", action="store_true",
                   help="no training: redraw the PNGs and the table from --out and its run dirs")
    args = p.parse_args(argv)
    if args.replot:
        with open(args.out) as f:
            res = json.load(f)
        report(res, args.out, res["budget_s"])
        return
    res = {"command": " ".join([os.path.basename(sys.argv[0])] + (argv or sys.argv[1:])),
           "layout": "single (one CPU device)", "budget_s": args.budget,
           "machine": _common.machine_info(), "versions": _common.versions(), "runs": []}
    if args.keep and args.out and os.path.exists(args.out):
        with open(args.out) as f:
            old = json.load(f)
        redo = {(a, e) for a in args.agents for e in args.envs}
        res["runs"] = [r for r in old["runs"] if (r["agent"], r["env"]) not in redo]
        res["earlier"] = {k: old[k] for k in ("command", "machine", "versions") if k in old}
    for env in args.envs:
        for agent in args.agents:
            print(f"== {agent} on {env} ({args.budget:g} s budget)", flush=True)
            res["runs"].append(run_one(agent, env, args.budget, args.runs, args.eval_envs))
            _common.write_json(args.out, res)
    res["machine"]["loadavg_after"] = _common.machine_info()["loadavg_1_5_15"]
    report(res, args.out, args.budget)


def report(res: dict, out: str | None, budget: float) -> None:
    """PNG per env (beside `out`) and the table, from `res` and its run dirs."""
    out_dir = os.path.dirname(os.path.abspath(out)) if out else os.path.dirname(
        res["runs"][0]["run_dir"])
    for env in dict.fromkeys(r["env"] for r in res["runs"]):
        runs = [r for r in res["runs"] if r["env"] == env]
        png = os.path.join(out_dir, f"pql_wallclock_{env}.png")
        if not all(os.path.exists(os.path.join(r["run_dir"], "metrics.jsonl")) for r in runs):
            print(f"(run dirs of {env} are not on this machine: {png} left as it is)")
            continue
        fig = plotting.make_figure([r["run_dir"] for r in runs],
                                   labels=[f"{r['agent']} ({r['preset']})" for r in runs])
        fig.axes[0].set_xscale("log")  # PPO takes ~50x the env steps of the off-policy agents
        fig.savefig(png, dpi=120)
        res.setdefault("pngs", [])
        if png not in res["pngs"]:
            res["pngs"].append(png)
    _common.write_json(out, res)
    print("\n".join(_common.machine_lines(res) + table(res["runs"], budget)))


if __name__ == "__main__":
    main()
