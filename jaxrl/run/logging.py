"""The one logger: console progress bar (rich), `metrics.jsonl`, TensorBoard events and,
optionally, Weights & Biases (`jaxrl.run.wandb_sink`, imported only when asked for).

Metric names are `group/name` (`train/`, `episode/`, `eval/`, `perf/`); every record carries
`env_steps` (real env steps so far, all seeds counted once per seed) and `wall_time` (seconds
since training started, compile excluded).
"""

from __future__ import annotations

import json
import math
import os
import time

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


def _jsonable(v):
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


def scalar_metrics(record: dict) -> dict:
    """The plottable part of a record (TensorBoard, W&B): finite int/float `group/name` values.

    NaN marks "no episode ended in this chunk"; strings (`layout`) and bare counters (`chunk`,
    `env_steps`) are no curves.
    """
    return {k: v for k, v in record.items()
            if "/" in k and isinstance(v, (int, float)) and math.isfinite(v)}


class Logger:
    """Writes one record per chunk to every sink.

    Args:
        run_dir: folder for `metrics.jsonl` and `tb/`; None logs to the console only.
        total_env_steps: progress bar length.
        progress: show the progress bar (off in tests and non-interactive runs if wanted).
        wandb: also log to Weights & Biases (needs `run_dir` and `pip install 'jaxrl[wandb]'`):
            the keyword arguments of `jaxrl.run.wandb_sink.WandbSink`, i.e. `name`, `group`
            (shared by a sweep's members), `config` and optionally `project`. Without an
            account it writes offline to `<run_dir>/wandb/offline-run-*`, to upload later with
            `wandb sync <run_dir>/wandb/offline-run-*`. None (default) imports nothing of wandb.
    """

    def __init__(self, run_dir: str | None, total_env_steps: int, progress: bool = True,
                 *, wandb: dict | None = None):
        self.run_dir = run_dir
        self.console = Console(stderr=True)
        self._jsonl = None
        self._tb = None
        self._wandb = None
        if run_dir:
            os.makedirs(run_dir, exist_ok=True)
            if wandb is not None:  # first: a missing package fails before files are opened
                from jaxrl.run.wandb_sink import WandbSink

                self._wandb = WandbSink(run_dir, name=wandb["name"], group=wandb.get("group"),
                                        config=wandb.get("config") or {},
                                        project=wandb.get("project"))
            self._jsonl = open(os.path.join(run_dir, "metrics.jsonl"), "a", buffering=1)
            from tensorboardX import SummaryWriter

            self._tb = SummaryWriter(os.path.join(run_dir, "tb"))
        self._progress = None
        if progress:
            self._progress = Progress(
                TextColumn("[bold]train"), BarColumn(), TextColumn("{task.completed:,.0f} steps"),
                TextColumn("{task.fields[sps]} SPS"), TextColumn("return {task.fields[ret]}"),
                TimeElapsedColumn(), TimeRemainingColumn(), console=self.console)
            self._task = self._progress.add_task("train", total=total_env_steps, sps="-", ret="-")
            self._progress.start()
        self.start = time.time()

    def message(self, text: str) -> None:
        """Prints `text` to stderr as one line (paths and brackets as they are: no wrapping at
        the terminal's width, no rich markup), above the progress bar when it is shown."""
        self.console.print(text, soft_wrap=True, markup=False, highlight=False)

    def log(self, record: dict) -> None:
        """`record` holds `env_steps` and float metrics; writes JSONL, TensorBoard, W&B
        (at step = env steps), progress."""
        step = int(record["env_steps"])
        if self._jsonl:
            self._jsonl.write(json.dumps({k: _jsonable(v) for k, v in record.items()}) + "\n")
        if self._tb:
            for k, v in scalar_metrics(record).items():
                self._tb.add_scalar(k, v, step)
        if self._wandb:
            self._wandb.log(scalar_metrics(record), step=step)
        if self._progress:
            ret = record.get("eval/episode_return", record.get("episode/return"))
            sps = run_sps(record)
            self._progress.update(self._task, completed=step,
                                  sps=f"{sps:,.0f}" if sps is not None else "-",
                                  ret=f"{ret:.1f}" if ret is not None else "-")

    def close(self) -> None:
        if self._progress:
            self._progress.stop()
        if self._jsonl:
            self._jsonl.close()
        if self._tb:
            self._tb.close()
        if self._wandb:
            self._wandb.finish()


def run_sps(record: dict) -> float | None:
    """The run's SPS as the progress bar and `jaxrl train`'s done line say it: env steps (all
    seeds) over training seconds (compile and evaluation excluded) since the run began, from a
    record's `env_steps` and `wall_time`. The record's own `perf/sps` is the same ratio for its
    chunk alone."""
    if "wall_time" not in record or record["wall_time"] <= 0:
        return record.get("perf/sps")
    return record["env_steps"] / record["wall_time"]


def read_jsonl(path: str) -> list[dict]:
    """Records of a `metrics.jsonl` file."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]
