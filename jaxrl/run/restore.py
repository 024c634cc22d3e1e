"""What `runner.resume` needs around a checkpoint: the newest readable one, a larger budget to
train on to, and the stored compiled programs of the run.

- `newest_readable`: a checkpoint that cannot be read (a file truncated by a full disk, a
  half-copied folder) is moved aside to `<run_dir>/checkpoints-broken/` (never deleted) and
  the next older one is tried, as orbax's own `CheckpointManager` never does by itself.
- `train_on`: `jaxrl train --resume RUN --total-env-steps N` continues a finished or stopped
  run past its saved budget (Stable-Baselines3's `learn(reset_num_timesteps=False)` and
  rl_games' `--checkpoint` with a larger `max_epochs` offer the same), in whole chunks of the
  saved size.
- `stored_programs`: a resume whose config is the one a `jaxrl train` run stored programs for
  (`jaxrl.run.warm_start`) loads them instead of compiling.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil

import jax

from jaxrl.engine import loop
from jaxrl.run import checkpoint, warm_start
from jaxrl.run.run_config import CheckpointError

BROKEN_DIR = "checkpoints-broken"


def newest_readable(run_dir: str, restore, note) -> tuple[int, dict, object]:
    """(chunk, meta, `restore(reader, chunk, meta)`) of the newest checkpoint that reads.

    Checkpoints are tried newest first; `restore` raises `CheckpointError` for one that
    cannot be read. Once one reads, each newer one that did not is moved aside (`move_aside`)
    and said through `note(text)`. When none reads, nothing is moved and the error names
    every checkpoint and why (a config that no longer fits the code fails them all alike).
    """
    failures = []
    reader = checkpoint.Checkpointer(run_dir, read_only=True)
    try:
        for chunk in reversed(reader.steps()):
            try:
                meta = reader.restore_meta(chunk)
                out = restore(reader, chunk, meta)
            except CheckpointError as err:
                failures.append((chunk, err))
                continue
            break
        else:
            raise CheckpointError(
                f"no checkpoint in {run_dir!r} can be read: "
                + " ".join(_reason(err) for _, err in failures))
    finally:
        reader.close()
    for bad, err in failures:  # process 0 moves (a run dir shared by every process)
        where = move_aside(run_dir, bad) if jax.process_index() == 0 else "checkpoints-broken/"
        note(f"warning: {_reason(err)} Moved it to {where}; resuming from chunk {chunk}.")
    return chunk, meta, out


def _reason(err: CheckpointError) -> str:
    return getattr(err, "reason", str(err))


def move_aside(run_dir: str, chunk: int) -> str:
    """Moves `checkpoints/<chunk>` to `checkpoints-broken/<chunk>` (`-2`, `-3`... when taken);
    returns the new path."""
    folder = os.path.join(run_dir, BROKEN_DIR)
    os.makedirs(folder, exist_ok=True)
    dest, n = os.path.join(folder, str(chunk)), 1
    while os.path.exists(dest):
        n += 1
        dest = os.path.join(folder, f"{chunk}-{n}")
    os.rename(os.path.join(run_dir, checkpoint.CHECKPOINT_DIR, str(chunk)), dest)
    return dest


def train_on(resolved: dict, cfg: loop.TrainConfig, run: loop.RunConfig,
             total_env_steps: int | None = None, max_train_seconds: float | None = None
             ) -> tuple[loop.TrainConfig, loop.RunConfig, dict]:
    """(program config, host config, resolved config) of a resume that trains to
    `total_env_steps` per seed and/or with a new time budget.

    The chunk size stays the saved one (`iterations_per_chunk`), so chunks already done stay
    valid: the new budget is rounded up to whole chunks, and `num_chunks` grows to hold it.
    Schedules over the run's length (PPO's `anneal_lr`, the cosine `lr_schedule` of the SAC
    family and CRL) read the new length: they stretch over the new budget from the update the
    run reached, so an annealed learning rate that reached zero starts again at
    `lr * (1 - done / new total)`. `max_train_seconds` replaces the saved time budget (which
    counts the training time of the whole run, chunks before the resume included).

    Raises:
        ValueError: a budget not above the saved one (before anything is built).
    """
    if total_env_steps is None and max_train_seconds is None:
        return cfg, run, resolved
    new = cfg
    if total_env_steps is not None:
        if total_env_steps <= cfg.real_total_env_steps:
            raise ValueError(
                f"--total-env-steps {total_env_steps:,} does not train on: the run's budget is "
                f"already {cfg.real_total_env_steps:,} env steps per seed. Give a larger one.")
        per_chunk = cfg.iterations_per_chunk * cfg.env_steps_per_iteration
        chunks = math.ceil(total_env_steps / per_chunk)
        new = dataclasses.replace(new, total_env_steps=chunks * per_chunk, num_chunks=chunks)
        assert new.iterations_per_chunk == cfg.iterations_per_chunk
    new_run = run
    if max_train_seconds is not None:
        new_run = dataclasses.replace(run, max_train_seconds=max_train_seconds)
    new.validate()
    new_run.validate()
    history = list(resolved.get("trained_on", [])) + [{
        "total_env_steps": cfg.total_env_steps, "num_chunks": cfg.num_chunks,
        "max_train_seconds": run.max_train_seconds}]
    return new, new_run, dict(resolved, train=dataclasses.asdict(new),
                              run=dataclasses.asdict(new_run), trained_on=history)


def stored_programs(folder: str | None, agent_name: str, env_name: str, cfg, agent_config,
                    hp: dict) -> warm_start.WarmStart:
    """The store's view of a resumed run (`warm_start.lookup`), loading when found. A
    `jaxrl train` run stores its programs under the agent's default hyperparameters (`hp`
    None), an API run under the ones it was given: both keys are tried. The hyperparameters
    are arguments of the programs (the resumed values come from the checkpoint)."""
    warm = warm_start.lookup(folder, agent_name, env_name, cfg, agent_config, hp)
    if warm.meta is None:
        default = warm_start.lookup(folder, agent_name, env_name, cfg, agent_config, None)
        warm = default if default.meta is not None else warm
    return warm


def load_stored(warm: warm_start.WarmStart, note):
    """(init, chunk, evaluator or None) loaded from the store, or None when nothing is stored
    or an entry does not load (said through `note` and deleted: the resume compiles and
    stores it again)."""
    if warm.meta is None:
        return None
    try:
        init, chunk = warm.loading["init"].result(), warm.loading["chunk"].result()
        evaluator = warm.loading["evaluator"].result()
    except Exception as err:  # noqa: BLE001  (a broken or foreign entry: compile)
        note(f"the stored programs did not load ({type(err).__name__}: {err}); compiling")
        shutil.rmtree(warm.where, ignore_errors=True)
        return None
    return init, chunk, evaluator


def stored_target(init, keys, hps):
    """(abstract runner, `fresh()`, shardings) from a loaded init program: its output's
    shapes and placement, without running it (a fresh runner is made only to fill a replay
    buffer that was not saved)."""
    shardings = init.output_shardings
    abstract = jax.tree.map(lambda o, s: jax.ShapeDtypeStruct(o.shape, o.dtype, sharding=s),
                            init.out_info, shardings)
    return abstract, lambda: init(keys, hps), shardings


def read_runner(reader, step: int, meta: dict, agent, abstract, fresh, shardings):
    """`restore.newest_readable`'s restore: the runner of checkpoint `step`; a checkpoint
    whose metrics records do not match its chunk count is unreadable too."""
    # Checkpoints written before the meta was snapshotted at save time could hold the next
    # chunk's record too: those are dropped and computed again.
    if len(list(meta["records"])[:step]) != step:
        raise checkpoint.CheckpointError(
            f"checkpoint {step} holds {len(meta['records'])} metrics records for {step} "
            "chunks: it is inconsistent.")
    return checkpoint.restore_into(reader, step, meta, agent, abstract, fresh, shardings)


def read_built(reader, step: int, meta: dict, agent, env, hp, shardings, init=None):
    """`read_runner` for a run whose env is built: the structure comes from tracing its init
    (`init`, the run's own, else made here)."""
    abstract, fresh = checkpoint.restore_target(agent, env, hp, shardings, init)
    return read_runner(reader, step, meta, agent, abstract, fresh, shardings)
