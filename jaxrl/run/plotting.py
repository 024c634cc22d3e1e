"""Learning curves from run logs: `jaxrl plot RUN_DIR [RUN_DIR ...]`, `plot_runs(...)`.

Reads each run's `metrics.jsonl` (one record per chunk, written by `jaxrl.run.logging.Logger`) and
draws the metric against env steps (left panel) and training wall time (right panel, compile
excluded), one labeled curve per run: the mean over seeds, with the min-max band over seeds when
the record holds a per-seed list (`<metric>_per_seed`, e.g. `eval/episode_return_per_seed`).
Figures are built with `matplotlib.figure.Figure` and saved through the Agg canvas, so no
display and no pyplot state are involved.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
from collections.abc import Sequence

import numpy as np

from jaxrl.run.logging import read_jsonl

DEFAULT_METRIC = "eval/episode_return"


class PlotError(ValueError):
    """A run dir without logs, or a metric that no record holds."""


@dataclasses.dataclass(frozen=True)
class Curve:
    """One run's curve; arrays are float64 `[K]` over the K records that hold the metric.

    Attributes:
        label: legend label.
        env_steps: real env steps (all seeds) at each record.
        wall_time: training seconds at each record (compile excluded).
        mean: the metric (mean over seeds).
        low, high: min and max over seeds (equal to `mean` when there is no per-seed list).
        num_seeds: seeds in the per-seed list (1 when absent).
    """

    label: str
    env_steps: np.ndarray
    wall_time: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    num_seeds: int


def _number(value) -> float:
    """Float from a JSONL value (the logger writes NaN and inf as strings)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def load_curve(run_dir: str, metric: str = DEFAULT_METRIC, label: str | None = None) -> Curve:
    """Reads `run_dir/metrics.jsonl` into a `Curve` for `metric`.

    Records without the metric, or with a NaN value (no episode ended in that chunk), are
    skipped.

    Raises:
        PlotError: no `metrics.jsonl` in `run_dir`, or no record holds `metric` (the message
            lists close metric names).
    """
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.isfile(path):
        raise PlotError(f"{run_dir!r} has no metrics.jsonl: not a jaxrl run dir, or it has not "
                        "logged a chunk yet.")
    records = read_jsonl(path)
    rows = [r for r in records if metric in r and math.isfinite(_number(r[metric]))]
    if not rows:
        known = sorted({k for r in records for k in r if "/" in k})
        close = difflib.get_close_matches(metric, known, n=3, cutoff=0.4)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise PlotError(f"no record in {path} holds a finite {metric!r}.{hint}")
    mean = np.array([_number(r[metric]) for r in rows])
    per_seed = [r.get(metric + "_per_seed") for r in rows]
    if all(isinstance(p, list) and p for p in per_seed):
        seeds = np.array([[_number(x) for x in p] for p in per_seed])
        low, high, num_seeds = np.nanmin(seeds, 1), np.nanmax(seeds, 1), seeds.shape[1]
    else:
        low, high, num_seeds = mean, mean, 1
    return Curve(label=label or _default_label(run_dir),
                 env_steps=np.array([_number(r["env_steps"]) for r in rows]),
                 wall_time=np.array([_number(r.get("wall_time")) for r in rows]),
                 mean=mean, low=low, high=high, num_seeds=num_seeds)


def _default_label(run_dir: str) -> str:
    """`<folder> (<agent> on <env>)` when the run's config.json names them."""
    name = os.path.basename(os.path.normpath(run_dir))
    try:
        with open(os.path.join(run_dir, "config.json")) as f:
            cfg = json.load(f)
        return f"{name} ({cfg['agent']} on {cfg['env']})"
    except (OSError, ValueError, KeyError, TypeError):
        return name


def make_figure(run_dirs: Sequence[str], metric: str = DEFAULT_METRIC,
                labels: Sequence[str] | None = None):
    """A two-panel `matplotlib.figure.Figure`: metric vs env steps and vs wall time.

    Each run adds one line (the seed mean, labeled) per panel and, with several seeds, a
    shaded min-max band.

    Raises:
        PlotError: no run given, mismatched labels, or see `load_curve`.
    """
    from matplotlib.figure import Figure

    if not run_dirs:
        raise PlotError("give at least one run dir.")
    if labels is not None and len(labels) != len(run_dirs):
        raise PlotError(f"{len(labels)} labels for {len(run_dirs)} runs.")
    curves = [load_curve(d, metric, labels[i] if labels else None) for i, d in
              enumerate(run_dirs)]
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    for i, c in enumerate(curves):
        color = f"C{i % 10}"
        for ax, x in zip(axes, (c.env_steps, c.wall_time), strict=True):
            ax.plot(x, c.mean, color=color, marker="o", markersize=3, label=c.label)
            if c.num_seeds > 1:
                ax.fill_between(x, c.low, c.high, color=color, alpha=0.2, linewidth=0)
    spread = " (mean; band: min-max over seeds)" if any(c.num_seeds > 1 for c in curves) else ""
    axes[0].set(xlabel="env steps", ylabel=metric + spread)
    axes[1].set(xlabel="training wall time (s, compile excluded)")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(loc="best", fontsize="small")
    fig.suptitle(metric)
    return fig


def plot_runs(run_dirs: Sequence[str], out: str, metric: str = DEFAULT_METRIC,
              labels: Sequence[str] | None = None, dpi: int = 120) -> str:
    """Draws `make_figure(run_dirs, metric, labels)` to `out` (PNG; any matplotlib format by
    extension) and returns `out`."""
    ext = os.path.splitext(out)[1].lower().lstrip(".")
    supported = ("png", "pdf", "svg", "jpg", "jpeg", "eps", "ps", "tif", "tiff", "webp")
    if ext not in supported:
        raise PlotError(f"unsupported image extension {ext or '(none)'!r} for {out!r}: use "
                        ".png (or .pdf, .svg, .jpg).")
    fig = make_figure(run_dirs, metric, labels)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    fig.savefig(out, dpi=dpi)
    return out
