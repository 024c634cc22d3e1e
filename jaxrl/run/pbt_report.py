"""A PBT sweep's report: the best final member, the schedule its state trained under, and
`pbt.png` (the ranking metric per member, then each searched hyperparameter per member over env
steps, the best member's lineage drawn on top). `jaxrl.run.sweep_report` adds it to the
sweep's summary files.
"""

from __future__ import annotations

import math

import numpy as np

from jaxrl.run.pbt import latest, schedule

FIGURE = "pbt.png"


def summarize(members, records, lineage: list[dict], metric: str) -> dict:
    """`{"metric", "best" (member name), "best_index", "score", "schedule", "rounds"}`: the
    member with the highest final `metric` and its lineage (`pbt.schedule`)."""
    scores = [latest(r, metric) for r in records]
    finite = [i for i, v in enumerate(scores) if math.isfinite(v)]
    best = max(finite, key=lambda i: scores[i]) if finite else 0
    rounds = sorted({r["chunk"] for r in lineage} - {0})
    return {"metric": metric, "best": members[best].name, "best_index": best,
            "score": scores[best] if finite else None, "rounds": len(rounds),
            "schedule": schedule(lineage, best) if lineage else []}


def _fmt(v: float) -> str:
    return f"{v:.4g}"


def markdown(info: dict) -> str:
    """One paragraph: the best member, its run dir and its schedule."""
    score = "n/a" if info["score"] is None else f"{info['score']:.2f}"
    lines = [f"PBT: best final member {info['best']} ({info['metric']} {score}) after "
             f"{info['rounds']} round(s); its run dir is members/{info['best']}. Schedule:"]
    for seg in info["schedule"]:
        values = ", ".join(f"{k}={_fmt(v)}" for k, v in sorted(seg["hp"].items()))
        lines.append(f"- from chunk {seg['chunk']}: {values} (trained as {seg['member']})")
    lines.append("\nThe tables below list each member's starting values; pbt.jsonl has every "
                 "round (parents, scores, values) and pbt.png draws them.")
    return "\n".join(lines) + "\n"


def figure(members, records, lineage: list[dict], info: dict, final_steps: int):
    """The metric per member, then one panel per searched hyperparameter (step lines per
    member; the best member's schedule in black)."""
    from matplotlib.figure import Figure

    names = sorted(lineage[0]["hp"]) if lineage else []
    fig = Figure(figsize=(7, 2.6 * (1 + len(names))), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1 + len(names), 1, sharex=True))
    metric = info["metric"]
    for i, recs in enumerate(records):
        pts = [(r["env_steps"], r[metric]) for r in recs
               if isinstance(r.get(metric), (int, float)) and math.isfinite(r[metric])]
        if pts:
            x, y = zip(*pts, strict=True)
            axes[0].plot(x, y, color=f"C{i % 10}", linewidth=1.0, alpha=0.8,
                         label=members[i].name.split("_")[0])
    axes[0].set(ylabel=metric, title=f"PBT: {len(members)} members; best final "
                f"{info['best'].split('_')[0]}, its schedule in black")
    axes[0].legend(loc="best", fontsize="x-small", ncol=max(1, len(members) // 8))
    segs = info["schedule"]
    for ax, name in zip(axes[1:], names, strict=True):
        for i in range(len(members)):
            rows = [r for r in lineage if r["member"] == i]
            x = [r["env_steps"] for r in rows] + [final_steps]
            y = [r["hp"][name] for r in rows]
            ax.step(x, y + y[-1:], where="post", color=f"C{i % 10}", linewidth=0.8, alpha=0.6)
        if segs:
            starts = [_chunk_steps(lineage, s["chunk"]) for s in segs] + [final_steps]
            ys = [s["hp"][name] for s in segs]
            ax.step(starts, ys + ys[-1:], where="post", color="black", linewidth=2.0,
                    label=f"best ({info['best'].split('_')[0]})")
            ax.legend(loc="best", fontsize="small")
        ax.set(ylabel=name)
        if all(r["hp"][name] > 0 for r in lineage):
            ax.set_yscale("log")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[-1].set(xlabel="env steps (per member)")
    return fig


def _chunk_steps(lineage: list[dict], chunk: int) -> int:
    return next(r["env_steps"] for r in lineage if r["chunk"] == chunk)
