"""The sweep's progress bar: chunks done, total SPS, and where the members stand (rich).

One line for the whole sweep (members advance together) with the member count, the mean
evaluation return over members and the best and worst member by name, e.g.

    sweep ━━━━━━━━━━━━━━━━━━━━━━  3/10 chunks  12 members  84,210 SPS  return mean 412.3 |
    best m007 (880.1) | worst m002 (120.5)  0:01:12 0:02:48
"""

from __future__ import annotations

import math

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


def _standing(members, last_records) -> str:
    scored = []
    for m, r in zip(members, last_records, strict=True):
        v = r.get("eval/episode_return", r.get("episode/return"))
        if isinstance(v, (int, float)) and math.isfinite(v):
            scored.append((v, m.name.split("_")[0]))
    if not scored:
        return "-"
    best, worst = max(scored), min(scored)
    mean = sum(v for v, _ in scored) / len(scored)
    return f"mean {mean:.1f} | best {best[1]} ({best[0]:.1f}) | worst {worst[1]} ({worst[0]:.1f})"


class SweepProgress:
    """Console output of a sweep (stderr); `enabled=False` prints messages only."""

    def __init__(self, members, num_chunks: int, enabled: bool = True):
        self.members = members
        self.console = Console(stderr=True)
        self._progress = None
        if enabled:
            self._progress = Progress(
                TextColumn("[bold]sweep"), BarColumn(bar_width=16),
                TextColumn(f"{{task.completed:.0f}}/{{task.total:.0f}} chunks x {len(members)} "
                           "members"), TextColumn("{task.fields[sps]} SPS"),
                TextColumn("return {task.fields[standing]}"), TimeElapsedColumn(),
                TimeRemainingColumn(), console=self.console)
            self._task = self._progress.add_task("sweep", total=num_chunks, sps="-",
                                                 standing="-")
            self._progress.start()

    def message(self, text: str) -> None:
        self.console.print(text, soft_wrap=True, markup=False, highlight=False)

    def update(self, chunk: int, last_records: list[dict], sps: float) -> None:
        """After `chunk` chunks: `last_records[i]` is member i's latest record."""
        if self._progress is not None:
            self._progress.update(self._task, completed=chunk, sps=f"{sps:,.0f}",
                                  standing=_standing(self.members, last_records))

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
