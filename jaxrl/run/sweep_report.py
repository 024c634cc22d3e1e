"""A sweep's summary: final and best evaluation per member, mean and spread over seeds per point.

`write` puts four files in the sweep dir: `summary.json` (everything), `summary.md` (the two
tables, points ranked by final return), `summary.csv` (one row per member) and `summary.png`
(eval return vs env steps per point, seed mean with a min-max band; final return per point with
one dot per seed). "Final" is the last evaluation, "best" the highest evaluation of any chunk;
the spread is the population standard deviation over a point's seeds.
"""

from __future__ import annotations

import csv
import json
import math
import os

import numpy as np

from jaxrl.run import pbt_report

METRIC = "eval/episode_return"


def _evals(records: list[dict], metric: str = METRIC) -> list[tuple[int, int, float]]:
    """(chunk, env steps, value) of every record holding a finite `metric`."""
    out = []
    for r in records:
        v = r.get(metric)
        if isinstance(v, (int, float)) and math.isfinite(v):
            out.append((int(r["chunk"]), int(r["env_steps"]), float(v)))
    return out


def member_rows(members, records) -> list[dict]:
    """One dict per member: name, seed, point, swept values, final / best eval (NaN without
    evaluation), chunk of the best, final training episode return."""
    rows = []
    for m, recs in zip(members, records, strict=True):
        ev = _evals(recs)
        best = max(ev, key=lambda e: e[2]) if ev else (0, 0, math.nan)
        train = _evals(recs, "episode/return")
        rows.append({"name": m.name, "seed": m.seed, "point": m.point, **m.values,
                     "final": ev[-1][2] if ev else math.nan, "best": best[2],
                     "best_chunk": best[0], "train_return": train[-1][2] if train else math.nan,
                     "env_steps": int(recs[-1]["env_steps"]) if recs else 0})
    return rows


def point_rows(members, rows) -> list[dict]:
    """One dict per point: swept values, seeds, mean and std over seeds of final and best;
    sorted by final mean, best first."""
    out = []
    for p in sorted({m.point for m in members}):
        mine = [r for m, r in zip(members, rows, strict=True) if m.point == p]
        values = next(m.values for m in members if m.point == p)
        final = np.asarray([r["final"] for r in mine], np.float64)
        best = np.asarray([r["best"] for r in mine], np.float64)
        out.append({"point": p, **values, "num_seeds": len(mine),
                    "final_mean": float(final.mean()), "final_std": float(final.std()),
                    "best_mean": float(best.mean()), "best_std": float(best.std())})
    return sorted(out, key=lambda r: -r["final_mean"] if math.isfinite(r["final_mean"]) else 0)


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def markdown(points, rows, names) -> str:
    """The two tables as GitHub markdown."""
    head = [*names, "seeds", "final (mean +- std)", "best (mean +- std)"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for p in points:
        lines.append("| " + " | ".join([_fmt(p[n]) for n in names] + [
            str(p["num_seeds"]), f"{p['final_mean']:.2f} +- {p['final_std']:.2f}",
            f"{p['best_mean']:.2f} +- {p['best_std']:.2f}"]) + " |")
    cols = ["name", "seed", *names, "final", "best", "best_chunk", "train_return"]
    lines += ["", "| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
    lines += ["| " + " | ".join(_fmt(r[c]) for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def figure(members, records, points, names):
    """Left: eval return vs env steps per point (seed mean, min-max band); right: final eval
    return per point (one dot per seed, a bar at the mean)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 4.4), layout="constrained")
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    for j, p in enumerate(points):
        color = f"C{j % 10}"
        label = ", ".join(f"{n}={_fmt(p[n])}" for n in names) or "base config"
        curves = [_evals(r) for m, r in zip(members, records, strict=True)
                  if m.point == p["point"]]
        n = min(len(c) for c in curves)
        if n:
            x = np.asarray([e[1] for e in curves[0][:n]])
            y = np.asarray([[e[2] for e in c[:n]] for c in curves])
            left.plot(x, y.mean(0), color=color, marker="o", markersize=3, label=label)
            if len(curves) > 1:
                left.fill_between(x, y.min(0), y.max(0), color=color, alpha=0.2, linewidth=0)
        finals = [e[-1][2] for e in curves if e]
        right.bar(j, p["final_mean"], color=color, alpha=0.35)
        right.scatter([j] * len(finals), finals, color=color, s=14, zorder=3)
    left.set(xlabel="env steps (per member)", ylabel=f"{METRIC} (mean; band: min-max over seeds)")
    right.set(xlabel="point (ranked by final mean); dots: seeds", ylabel="final eval return")
    right.set_xticks(range(len(points)))
    right.set_xticklabels(["\n".join(f"{n}={_fmt(p[n])}" for n in names) or "base"
                           for p in points], fontsize="small")
    for ax in (left, right):
        ax.grid(alpha=0.3)
    left.legend(loc="best", fontsize="small")
    fig.suptitle(f"sweep: {len(members)} members, {len(points)} point(s)")
    return fig


def write(sweep_dir: str, members, records, compile_s: float, train_s: float,
          lineage: list[dict] | None = None, pbt_metric: str | None = None) -> dict:
    """Writes summary.{json,md,csv,png} to `sweep_dir` and returns the summary dict. A PBT
    sweep (`pbt_metric` set, `lineage` its `pbt.jsonl` rows) also gets `summary["pbt"]`
    (`pbt_report.summarize`), that paragraph first in summary.md, and `pbt.png`; its points are
    the members' starting values."""
    names = list(members[0].values) if members else []
    rows = member_rows(members, records)
    points = point_rows(members, rows)
    steps = sum(r["env_steps"] for r in rows)
    summary = {"points": points, "members": rows, "swept": names,
               "compile_seconds": compile_s, "train_seconds": train_s,
               "total_env_steps": steps, "total_sps": steps / max(train_s, 1e-9)}
    head = ""
    if pbt_metric is not None:
        summary["pbt"] = pbt_report.summarize(members, records, lineage or [], pbt_metric)
        head = pbt_report.markdown(summary["pbt"]) + "\n"
        pbt_report.figure(members, records, lineage or [], summary["pbt"],
                          max((r["env_steps"] for r in rows), default=0)).savefig(
            os.path.join(sweep_dir, pbt_report.FIGURE), dpi=110)
    with open(os.path.join(sweep_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2, default=str)
    with open(os.path.join(sweep_dir, "summary.md"), "w") as f:
        f.write(head + markdown(points, rows, names))
    with open(os.path.join(sweep_dir, "summary.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    if any(_evals(r) for r in records):
        figure(members, records, points, names).savefig(
            os.path.join(sweep_dir, "summary.png"), dpi=110)
    return summary
