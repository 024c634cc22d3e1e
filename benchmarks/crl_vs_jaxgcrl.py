"""Our `crl` against JaxGCRL's CRL over seeds: success and steps near the goal at equal env and
gradient steps, in our setting and in JaxGCRL's, with learning curves (one PNG per task).

    .venv/bin/python benchmarks/crl_vs_jaxgcrl.py --task reacher --side ours --seeds 0 1 2
    .venv/bin/python benchmarks/crl_vs_jaxgcrl.py --task pusher --side jaxgcrl --seeds 0
    .venv/bin/python benchmarks/crl_vs_jaxgcrl.py --ingest OLD.json ...   # earlier runs
    .venv/bin/python benchmarks/crl_vs_jaxgcrl.py --replot                # table and PNGs

Every run is one `benchmarks/crl_throughput.py` process (see its docstring for how the work is
matched: same envs, unroll, batch, networks, learning rates, and `utd_ratio` = JaxGCRL's
gradient steps per collected env step) with `--skip raw` and one side:

- `ours`: our `crl` as a user runs it (a fresh goal at every reset, pairs sampled from the whole
  buffer; `CRLConfig` defaults otherwise, actor init scale 1/3).
- `ours-fixed-starts`: our `crl` unchanged in JaxGCRL's task setting (`--fixed-starts`: every
  episode of an env slot restarts from the slot's first state, so each training env keeps one
  goal, as JaxGCRL's under Brax's cached auto-reset); batches stay independent pairs.
- `ours-jaxgcrl-setting`: ours with `--fixed-starts --sampling windows`: the task setting of
  `ours-fixed-starts`, and batches are JaxGCRL's relabeled whole windows.
- `ours-exact-task` and `ours-exact`: `ours-fixed-starts` and `ours-jaxgcrl-setting` on
  JaxGCRL's exact task (`EXACT_ENVS`): `ReacherGoalJaxGCRL`, JaxGCRL's observation (tip xyz
  and velocity instead of joint velocities) and 3-D goal; `PusherGoalJaxGCRL`, JaxGCRL's
  reset rule for close starts.
- `ours-exact-eps`: `ours-exact` with JaxGCRL's tanh log-det in the actor loss,
  `log(1 - tanh(u)^2 + 1e-6)` (`--log-det-epsilon 1e-6`; ours is exact otherwise).
- `jaxgcrl`: JaxGCRL's CRL (jaxgcrl 0.2.8 in `.venv-jaxgcrl`, `crl_throughput.py
  --setup-jaxgcrl-venv`).

Tasks (`TASKS`): `reacher` is `ReacherGoal` / JaxGCRL `reacher` with `crl_throughput.py`'s
defaults (128 envs, episodes of 51 steps, unroll 4, 299,520 env steps, 14,000 gradient steps);
`pusher` is `PusherGoal` / JaxGCRL `pusher_easy` (success: object within 0.1 m of the goal on
both) at a budget that fits one CPU run: 128 envs, episodes of 101 steps, unroll 16, 593,920 env
steps and 13,750 gradient steps (50 per collect of 2,048 env steps; a prefill of 240 rows = 15
collects makes the 290 collects a multiple of the 5 evaluations, so ours runs the same steps).
Metrics of each evaluation (deterministic actor, 128 fresh episodes): `success_any` (fraction
of episodes that reach the goal) and `near goal` (steps within the threshold, of the episode
length), the same definitions on both sides. Results go to `--out` (default
`benchmarks/crl_vs_jaxgcrl.json`, one entry per task, side and seed with its curve) and
`<out stem>_<task>.png`; the table printed is the one in `benchmarks/RESULTS.md` (mean, and
min-max over seeds).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import _common

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "crl_throughput.py")
TASKS = {"reacher": {"env": "ReacherGoal", "flags": []},
         "pusher": {"env": "PusherGoal",
                    "flags": ["--peer-env", "pusher_easy",
                              "--episode-length", "101", "--unroll-length", "16",
                              "--total-env-steps", "600000", "--min-replay-size", "240"]}}
SIDES = {"ours": ["--skip", "raw,peer"],
         "ours-fixed-starts": ["--skip", "raw,peer", "--fixed-starts"],
         "ours-jaxgcrl-setting": ["--skip", "raw,peer", "--fixed-starts", "--sampling", "windows"],
         "ours-exact-task": ["--skip", "raw,peer", "--fixed-starts"],
         "ours-exact": ["--skip", "raw,peer", "--fixed-starts", "--sampling", "windows"],
         "ours-exact-eps": ["--skip", "raw,peer", "--fixed-starts", "--sampling", "windows",
                            "--log-det-epsilon", "1e-6"],
         "jaxgcrl": ["--skip", "raw,ours"]}
EXACT_ENVS = {"reacher": "ReacherGoalJaxGCRL", "pusher": "PusherGoalJaxGCRL"}
"""Task -> our env as JaxGCRL builds the task (the `ours-exact*` sides)."""
LABELS = {"ours": "ours (fresh goal per episode, pair batches)",
          "ours-fixed-starts": "ours in JaxGCRL's setting (goal kept per env, pair batches)",
          "ours-jaxgcrl-setting": "ours in JaxGCRL's setting (goal kept per env, window batches)",
          "ours-exact-task": "ours in JaxGCRL's setting and exact task (pair batches)",
          "ours-exact": "ours in JaxGCRL's setting and exact task (window batches)",
          "ours-exact-eps": "ours-exact with JaxGCRL's tanh log-det (+1e-6)",
          "jaxgcrl": "JaxGCRL (jaxgcrl 0.2.8)"}


def side_of(settings: dict, part: str) -> str:
    """Which side a `crl_throughput.py` result part (`ours` or `peer`) belongs to.

    Raises:
        ValueError: ours with window batches but fresh goals (an attribution run).
    """
    if part == "peer":
        return "jaxgcrl"
    fixed, windows = bool(settings.get("fixed_starts")), settings.get("sampling") == "windows"
    if settings["env"] in EXACT_ENVS.values():
        if not fixed:
            raise ValueError("JaxGCRL's exact task is a side only with fixed starts "
                             "(ours-exact-task, ours-exact).")
        if settings.get("log_det_epsilon"):
            if not windows:
                raise ValueError("JaxGCRL's log-det epsilon is a side only with window "
                                 "batches (ours-exact-eps).")
            return "ours-exact-eps"
        return "ours-exact" if windows else "ours-exact-task"
    if windows and not fixed:
        raise ValueError("window batches with a fresh goal per episode are an attribution run, "
                         "not a side of this comparison.")
    if fixed:
        return "ours-jaxgcrl-setting" if windows else "ours-fixed-starts"
    return "ours"


def task_of(settings: dict) -> str:
    for task, spec in TASKS.items():
        if settings["env"] in (spec["env"], EXACT_ENVS.get(task)):
            return task
    raise ValueError(f"no task for env {settings['env']!r}")


def entries(result: dict, source: str) -> list[dict]:
    """One entry per side in a `crl_throughput.py` JSON (curves: env steps, success_any,
    steps near the goal)."""
    s, out = result["settings"], []
    for part in ("ours", "peer"):
        crl = (result.get(part) or {}).get("crl")
        if not crl or "evals" not in crl:
            continue
        curve = [(e["env_steps"], e["eval/episode_success_any"], e["eval/episode_success"])
                 for e in crl["evals"] if "eval/episode_success_any" in e]
        init = (crl.get("agent_config") or {}).get("actor_init_scale")
        out.append({"task": task_of(s), "side": side_of(s, part), "seed": s["seed"],
                    "env_steps": crl["env_steps"], "grad_steps": crl["grad_steps"],
                    "train_seconds": crl["train_seconds"], "success_any": curve[-1][1],
                    "near_goal": curve[-1][2], "episode_steps": s["episode_length"], "curve": curve,
                    "actor_init_scale": init, "source": source})
    return out


def merge(res: dict, new: list[dict]) -> dict:
    """`res` with `new` entries replacing those of the same task, side and seed."""
    keys = {(e["task"], e["side"], e["seed"]) for e in new}
    kept = [e for e in res.get("runs", []) if (e["task"], e["side"], e["seed"]) not in keys]
    runs = sorted(kept + new, key=lambda e: (e["task"], list(SIDES).index(e["side"]), e["seed"]))
    return dict(res, runs=runs)


def run_one(task: str, side: str, seed: int, folder: str) -> list[dict]:
    """Runs `crl_throughput.py` for one task, side and seed; its entries."""
    path = os.path.join(folder, f"{task}_{side}_s{seed}.json")
    env = EXACT_ENVS[task] if side.startswith("ours-exact") else TASKS[task]["env"]
    cmd = [sys.executable, SCRIPT, "--env", env, *TASKS[task]["flags"], *SIDES[side], "--seed",
           str(seed), "--json", path]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    with open(path) as f:
        return entries(json.load(f), os.path.relpath(path, _common.REPO))


def _spread(values: list[float], digits: int) -> str:
    mean = sum(values) / len(values)
    if len(values) == 1:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def table(runs: list[dict]) -> list[str]:
    """Markdown rows: per task and side, seeds, steps, and the final metrics over seeds."""
    lines = ["| task | side | seeds | env steps | gradient steps | success_any | near goal "
             "(steps) | training s |", "| --- | --- | --- | ---: | ---: | --- | --- | --- |"]
    for task in TASKS:
        for side in SIDES:
            rs = [r for r in runs if r["task"] == task and r["side"] == side]
            if not rs:
                continue
            lines.append(
                f"| {task} | {side} | {', '.join(str(r['seed']) for r in rs)} | "
                f"{rs[0]['env_steps']:,} | {rs[0]['grad_steps']:,} | "
                f"{_spread([r['success_any'] for r in rs], 3)} | "
                f"{_spread([r['near_goal'] for r in rs], 1)} of {rs[0]['episode_steps']} | "
                f"{_spread([r['train_seconds'] for r in rs], 0)} |")
    return lines


def figure(runs: list[dict], task: str, path: str) -> None:
    """Success_any and steps near the goal vs env steps: per side the seed mean and the min-max
    band over seeds."""
    import numpy as np
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.2), layout="constrained")
    axes = fig.subplots(1, 2)
    for i, side in enumerate(SIDES):
        rs = [r for r in runs if r["task"] == task and r["side"] == side]
        if not rs:
            continue
        n = min(len(r["curve"]) for r in rs)
        arr = np.array([r["curve"][:n] for r in rs], dtype=float)  # [seeds, evals, 3]
        x = arr[0, :, 0]
        for ax, k in zip(axes, (1, 2), strict=True):
            ax.plot(x, arr[:, :, k].mean(0), color=f"C{i}", marker="o", markersize=3,
                    label=f"{LABELS[side]}, {len(rs)} seed{'s' * (len(rs) > 1)}")
            if len(rs) > 1:
                ax.fill_between(x, arr[:, :, k].min(0), arr[:, :, k].max(0), color=f"C{i}",
                                alpha=0.2, linewidth=0)
    steps = next(r["episode_steps"] for r in runs if r["task"] == task)
    axes[0].set(xlabel="env steps", ylabel="success_any (mean; band: min-max over seeds)",
                ylim=(0.0, 1.02))
    axes[1].set(xlabel="env steps", ylabel=f"steps near the goal, of {steps}", ylim=(0, steps))
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(loc="lower right", fontsize="small")
    fig.suptitle(f"CRL on {TASKS[task]['env']}: ours vs JaxGCRL at equal env and gradient steps "
                 "(deterministic evaluation, 128 episodes)")
    fig.savefig(path, dpi=110)


def report(res: dict, out: str) -> None:
    stem = os.path.splitext(out)[0]
    res["png"] = []
    for task in TASKS:
        if any(r["task"] == task for r in res["runs"]):
            figure(res["runs"], task, f"{stem}_{task}.png")
            res["png"].append(os.path.relpath(f"{stem}_{task}.png", _common.REPO))
    _common.write_json(out, res)
    print("\n".join(_common.machine_lines(res) + table(res["runs"])))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", choices=tuple(TASKS), default="reacher")
    p.add_argument("--side", choices=tuple(SIDES), default="ours")
    p.add_argument("--seeds", nargs="+", type=int, default=[0])
    p.add_argument("--ingest", nargs="+", default=None,
                   help="no training: add the runs of these crl_throughput.py JSONs")
    p.add_argument("--replot", action="store_true", help="no training: table and PNGs")
    p.add_argument("--runs", default=os.path.join(_common.REPO, "runs", "crl_vs_jaxgcrl"),
                   help="folder for each run's crl_throughput.py JSON")
    p.add_argument("--out", default=os.path.join(HERE, "crl_vs_jaxgcrl.json"))
    args = p.parse_args(argv)
    res = {"runs": []}
    if os.path.exists(args.out):
        with open(args.out) as f:
            res = json.load(f)
    if not args.replot:
        command = " ".join(["benchmarks/crl_vs_jaxgcrl.py"] + (argv or sys.argv[1:]))
        res.update(commands=res.get("commands", []) + [command],
                   machine=_common.machine_info(), versions=_common.versions())
        os.makedirs(args.runs, exist_ok=True)
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        for item in args.ingest or args.seeds:
            if args.ingest:
                with open(item) as f:
                    new = entries(json.load(f), os.path.relpath(item, _common.REPO))
            else:
                new = run_one(args.task, args.side, item, args.runs)
            res = merge(res, new)
            _common.write_json(args.out, res)
    report(res, args.out)


if __name__ == "__main__":
    main()
