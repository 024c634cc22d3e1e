"""Run guards of the host driver: the NaN guard after every chunk and the signal handling that
saves the current chunk before stopping (`session.run_chunks` uses both)."""

from __future__ import annotations

import os
import signal
import sys
import threading

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.engine import parallel


class NonFiniteError(ValueError):
    """A loss metric or a parameter became NaN or infinite; the run stopped before saving it."""


class TrainingInterrupted(Exception):
    """SIGINT/SIGTERM stopped training after a chunk; that chunk was checkpointed.

    Attributes:
        run_dir: the run dir (None when the run had none and nothing was saved).
        chunk: chunks completed and saved.
        signum: the signal received.
    """

    def __init__(self, message: str, run_dir: str | None, chunk: int, signum: int):
        super().__init__(message)
        self.run_dir, self.chunk, self.signum = run_dir, chunk, signum


def interrupted(saver, chunk: int, cfg, signum: int) -> TrainingInterrupted:
    name = signal.Signals(signum).name
    if saver is None:
        return TrainingInterrupted(
            f"interrupted by {name} after chunk {chunk} of "
            f"{cfg.num_chunks} (no run dir: nothing saved).",
            None,
            chunk,
            signum,
        )
    saver.wait()
    return TrainingInterrupted(
        f"interrupted by {name} after chunk {chunk} of {cfg.num_chunks}; checkpoint saved in "
        f"{os.path.join(saver.directory, str(chunk))}. Resume with: jaxrl train --resume "
        f"{saver.run_dir}",
        saver.run_dir,
        chunk,
        signum,
    )


@jax.jit
def _finite_leaves(tree):
    """Per-leaf `[S]` booleans: every entry of seed s is finite (float leaves only)."""

    def ok(x):
        if not jnp.issubdtype(x.dtype, jnp.inexact):
            return jnp.ones(x.shape[:1], bool)
        return jnp.isfinite(x).reshape(x.shape[0], -1).all(axis=1)

    return jax.tree.map(ok, tree)


def check_finite(metrics: dict, params, chunk: int, cfg, steps_per_chunk: int, saver) -> None:
    """Raises NonFiniteError naming the first non-finite loss metric or param leaf (and seed)."""
    bad = None
    for name in sorted(metrics):
        values = np.asarray(metrics[name]).reshape(-1)
        if "loss" in name and not np.isfinite(values).all():
            bad = f"loss metric {name!r} (seed index {int(np.argmin(np.isfinite(values)))})"
            break
    if bad is None:
        flags, _ = jax.tree_util.tree_flatten_with_path(parallel.fetch(_finite_leaves(params)))
        for path, ok in flags:
            if not ok.all():
                bad = (
                    f"parameter params{jax.tree_util.keystr(path)} "
                    f"(seed index {int(np.argmin(ok))})"
                )
                break
    if bad is None:
        return
    if saver is not None:
        saver.wait()
    latest = saver.latest() if saver is not None else None
    where = (
        f"the latest good checkpoint is chunk {latest} in {saver.directory}"
        if latest is not None
        else "no checkpoint was saved"
    )
    raise NonFiniteError(
        f"non-finite {bad} in chunk {chunk} of {cfg.num_chunks} (env steps "
        f"{steps_per_chunk * (chunk - 1):,}-{steps_per_chunk * chunk:,}); the run stopped "
        f"without logging or saving this chunk; {where}."
    )


class StopOnSignal:
    """Within the block, the first SIGINT/SIGTERM only sets `signum` (the chunk loop saves and
    stops after the current chunk); a second one raises KeyboardInterrupt at once. Handlers
    are installed from the main thread only and restored on exit."""

    def __enter__(self):
        self.signum = None
        self._old = {}
        if threading.current_thread() is threading.main_thread():
            for s in (signal.SIGINT, signal.SIGTERM):
                self._old[s] = signal.signal(s, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.signum is not None:
            raise KeyboardInterrupt
        self.signum = signum
        sys.stderr.write(
            f"\n{signal.Signals(signum).name}: saving after the current chunk, then "
            "stopping (send it again to stop at once without saving)\n"
        )

    def __exit__(self, *exc):
        for s, old in self._old.items():
            signal.signal(s, old)
        return False
