"""The one run session behind `jaxrl train`, `--resume` and `jaxrl sweep`.

`run_session` compiles (or loads) the program through the caller's `prepare`, then runs the
chunks: time each, fetch the metrics, stop on a non-finite value (`guards.check_finite`),
evaluate every `RunConfig.eval_every` chunks, record, let the outputs adapt the state (a PBT
round), checkpoint every `checkpoint_every` chunks, honour `max_train_seconds`, SIGINT/SIGTERM
(`guards.StopOnSignal`) and the watchdog, and finally write what the run keeps. Where results
go is the caller's `Outputs`: one run dir for `jaxrl train` (`runner.RunOutputs`: one record
per chunk, all seeds), one run dir per member for a sweep (`sweep.MemberOutputs`). Compile time
is measured apart from training time; `perf/sps` is one chunk's env steps over its wall time,
evaluation excluded, as Brax's `training/sps`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable
from typing import Any, Protocol

import jax

from jaxrl.engine import loop, parallel
from jaxrl.run import checkpoint, guards, watchdog
from jaxrl.run.logging import read_jsonl


@dataclasses.dataclass
class Program:
    """A run ready to train: the placed member-stacked state, the compiled chunk, the
    evaluator (None: no evaluation), and how it was obtained (`verb`: `compiled` or `loaded
    the compiled programs`; `text`: where the members live, for the ready line)."""

    state: loop.RunState
    chunk: Callable
    evaluator: Callable | None
    text: str = ""
    verb: str = "compiled"


class Outputs(Protocol):
    """Where a session's results go (`runner.RunOutputs`, `sweep.MemberOutputs`)."""

    done: int
    """Chunks already recorded (a resume starts after them)."""
    train_seconds: float
    """Training time of those chunks."""

    def message(self, text: str) -> None: ...
    def placed(self, program: Program, compile_s: float) -> str:
        """Called once the program is ready; returns the line that says so."""
    def eval_keys(self, state: loop.RunState, chunk_index: int) -> Any: ...
    def record(self, chunk_index: int, metrics: dict, ev: dict | None, train_s: float,
               dt: float) -> None: ...
    def adapt(self, chunk: int, state: loop.RunState) -> loop.RunState:
        """The state the next chunk (or a resume) starts from, after chunk `chunk` (1-based)
        was recorded (`jaxrl sweep --pbt`'s exploit and explore); `save` then gets it."""
    def save(self, chunk: int, state: loop.RunState) -> None: ...
    def latest_saver(self): ...
    def interrupted(self, chunk: int, signum: int) -> BaseException: ...
    def close(self, failing: bool) -> None: ...
    def finish(self, state: loop.RunState, compile_s: float, train_s: float) -> Any: ...


def run_session(agent, cfg: loop.TrainConfig, run: loop.RunConfig,
                prepare: Callable[[Callable[[str], None]], Program], outputs: Outputs,
                watch_dir: str | None, wait_text: str = "compiling ...",
                steps_per_chunk: int | None = None):
    """Prepares the program (saying `wait_text` first), runs chunks `outputs.done + 1 ..
    cfg.num_chunks` and returns `outputs.finish(...)`. `steps_per_chunk`: env steps of one
    chunk over every member (the NaN guard's message); default one run of `cfg`."""
    steps = steps_per_chunk or cfg.iterations_per_chunk * cfg.env_steps_per_iteration * \
        cfg.num_seeds
    try:
        with watchdog.Watchdog(run.watchdog_seconds, watch_dir) as dog:
            dog.beat("compiling the training program")
            t0 = time.time()
            if wait_text:
                outputs.message(wait_text)
            program = prepare(outputs.message)
            compile_s = time.time() - t0
            outputs.message(outputs.placed(program, compile_s))
            dog.beat(f"chunk {outputs.done + 1}")
            with guards.StopOnSignal() as stop:
                state, train_s = run_chunks(program, agent, cfg, run, outputs, stop, dog, steps)
    except BaseException:
        outputs.close(failing=True)
        raise
    outputs.close(failing=False)
    return outputs.finish(state, compile_s, train_s)


def run_chunks(program: Program, agent, cfg: loop.TrainConfig, run: loop.RunConfig, outputs,
               stop=None, dog=None, steps_per_chunk: int = 0):
    """The chunk loop of `run_session`; returns (final state, training seconds)."""
    state, train_s = program.state, outputs.train_seconds
    for i in range(outputs.done, cfg.num_chunks):
        t = time.time()
        new, metrics = program.chunk(state)
        metrics = parallel.fetch(metrics)
        dt = time.time() - t
        guards.check_finite(metrics, agent.params_of(new.agent_state), i + 1, cfg,
                            steps_per_chunk, outputs.latest_saver())
        state, train_s = new, train_s + dt
        out_of_time = run.max_train_seconds is not None and train_s >= run.max_train_seconds
        last = i + 1 == cfg.num_chunks or out_of_time
        ev = None
        if program.evaluator is not None and ((i + 1) % run.eval_every == 0 or last):
            ev = parallel.fetch(program.evaluator(state.agent_state, outputs.eval_keys(state, i)))
        outputs.record(i, metrics, ev, train_s, dt)
        t = time.time()  # a sweep's population-based training round (never after the last)
        state = outputs.adapt(i + 1, state)
        train_s += time.time() - t
        interrupted = stop is not None and stop.signum is not None and not last
        if (i + 1) % run.checkpoint_every == 0 or last or interrupted:
            outputs.save(i + 1, state)
        if dog is not None:
            dog.beat(f"chunk {i + 2}")
        if interrupted:
            raise outputs.interrupted(i + 1, stop.signum)
        if out_of_time:
            outputs.message(f"max_train_seconds ({run.max_train_seconds:g} s) reached after "
                            f"chunk {i + 1} of {cfg.num_chunks}.")
            break
    return state, train_s


# --- what every run dir gets ------------------------------------------------------------------


def layout_name(agent, cfg: loop.TrainConfig | None = None) -> str:
    """How the run is laid out over devices, as every record and summary names it: `single`
    (one device per seed), `data:D` (`TrainConfig.num_devices`, or an agent's own `data`
    layout) or `role:D` (`jaxrl.engine.layouts`, D devices)."""
    if cfg is not None and cfg.num_devices > 1 and agent.layout[0] == "single":
        return f"data:{cfg.num_devices}"
    kind, devices = agent.layout
    return kind if kind == "single" else f"{kind}:{devices}"


def logger_options(run: loop.RunConfig, run_dir: str | None, resolved: dict | None) -> dict:
    """Keyword arguments of `Logger` for the extra sinks `run.logger` names."""
    if run.logger != "wandb" or not run_dir:
        return {}
    name = os.path.basename(os.path.abspath(run_dir))
    return {"wandb": {"name": name, "group": (resolved or {}).get("sweep"),
                      "config": resolved or {}, "project": None}}


def rewrite_metrics(run_dir: str, records: list[dict]) -> None:
    """Keeps the first `len(records)` lines of metrics.jsonl (atomically): a resumed run
    computes the records after its checkpoint again."""
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.exists(path) or len(read_jsonl(path)) == len(records):
        return
    with open(path) as f:
        lines = [line for line in f if line.strip()][: len(records)]
    with open(path + ".tmp", "w") as f:
        f.writelines(lines)
    os.replace(path + ".tmp", path)


def write_final(run_dir: str, params, primary: bool, summary: dict) -> None:
    """final_params (every process takes part in the orbax write) and summary.json."""
    save_params(os.path.join(run_dir, "final_params"), parallel.fetch(params))
    if primary:
        with open(os.path.join(run_dir, "summary.json"), "w") as f:
            json.dump(summary, f, indent=2)


def close_saver(saver, failing: bool) -> None:
    """Waits for a `Checkpointer`'s pending writes and closes it; a write error is raised
    unless another exception is already on its way out (`failing`)."""
    try:
        saver.wait()
    except checkpoint.CheckpointError:
        if not failing:
            raise
    finally:
        saver.close()


def save_params(path: str, params) -> None:
    """Saves a params pytree with orbax (overwrites `path`)."""
    import orbax.checkpoint as ocp

    ckpt = ocp.StandardCheckpointer()
    ckpt.save(os.path.abspath(path), jax.device_get(params), force=True)
    ckpt.wait_until_finished()


def load_params(path: str):
    """Loads a params pytree saved by `save_params`."""
    import orbax.checkpoint as ocp

    return ocp.StandardCheckpointer().restore(os.path.abspath(path))
