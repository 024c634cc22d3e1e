"""Checkpoints of whole runs (orbax) and loading them back: `Checkpointer`, `load_run`.

A run dir holds:

```
config.json                  resolved config: agent, env, train, agent_config, hp, spec
checkpoints/<chunk>/state    the `loop.RunState` (leading seed axis S): agent state (params,
                             optimizer state, normalizer, hp, target nets, replay buffer),
                             env state, RNG key, iteration counter
checkpoints/<chunk>/meta     JSON: chunk index, the metrics records so far, resolved config,
                             whether the replay buffer is included
```

Writes are atomic: orbax writes `<chunk>.orbax-checkpoint-tmp` and renames it to `<chunk>` only
once every file is written (`commit_success.txt` last), so a write killed half-way never becomes
a step and the previous checkpoint stays the latest. With `checkpoint_replay=False` the replay
buffer of an agent that declares `has_replay` is left out and re-initialised empty on resume,
so such a resume is not bit-identical to an uninterrupted run.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
import os
from typing import Any

import jax
import numpy as np

from jaxrl.engine import loop, parallel
from jaxrl.engine.types import EnvSpec
from jaxrl.run import assemble
from jaxrl.run.run_config import (  # noqa: F401 (re-exported: the checkpoint API reads configs)
    CONFIG_FILE,
    CheckpointError,
    config_from_dict,
    jsonify,
    parse_config,
    parse_run,
    read_config,
    resolved_config,
    write_config,
)

CHECKPOINT_DIR = "checkpoints"
FORMAT_VERSION = 2  # 2: leaves packed by `pack` (size-0 MJX leaves left out)


@dataclasses.dataclass
class LoadedRun:
    """A run rebuilt from its run dir (see `load_run`).

    Attributes:
        agent: the agent object (`jaxrl.engine.contract.Agent`), built from the saved config.
        env: the single (unbatched) env, `env_name`'s.
        spec: its `EnvSpec`.
        cfg: the run's `TrainConfig`.
        agent_name: registered agent name.
        env_name: the env loaded (the training env unless overridden).
        agent_config: the agent's config dataclass.
        runner: the restored `loop.RunState`, every leaf with a leading seed axis S.
        run_dir: the run dir.
        chunk: the chunk index of the checkpoint loaded (1-based: chunks completed).
        run: the run's host settings (`RunConfig`: first seed, checkpoints, logger, ...).
    """

    agent: Any
    env: Any
    spec: EnvSpec
    cfg: loop.TrainConfig
    agent_name: str
    env_name: str
    agent_config: Any
    runner: loop.RunState
    run_dir: str
    chunk: int
    run: loop.RunConfig = dataclasses.field(default_factory=loop.RunConfig)


# --- replay buffer ------------------------------------------------------------------------------


def strip_replay(agent, run: loop.RunState) -> loop.RunState:
    """`run` with the agent's replay buffer left out (None, no leaves); unchanged for agents that
    do not declare `has_replay`."""
    if not agent.has_replay:
        return run
    return run.replace(agent_state=agent.with_replay(run.agent_state, None))


def fill_replay(agent, run: loop.RunState, buffer) -> loop.RunState:
    """Puts `buffer` (for example a fresh empty one) back into a stripped run state."""
    return run.replace(agent_state=agent.with_replay(run.agent_state, buffer))


# --- packing: zero-size leaves --------------------------------------------------------------------


def pack(tree) -> dict:
    """`{"leaf_00000": array, ...}` of the non-empty leaves in flatten order.

    MJX states hold size-0 arrays (e.g. `data.act` of an env without actuator activations), which
    orbax refuses to save; they carry no data, so `unpack` rebuilds them from the structure.
    """
    return {f"leaf_{i:05d}": x for i, x in enumerate(jax.tree.leaves(tree))
            if math.prod(x.shape) > 0}


def unpack(packed: dict, like):
    """Inverse of `pack`: `like` (arrays or `jax.ShapeDtypeStruct`s) gives the structure and
    the shapes of the empty leaves."""
    leaves, treedef = jax.tree.flatten(like)
    out = [packed[f"leaf_{i:05d}"] if math.prod(x.shape) > 0 else np.zeros(x.shape, x.dtype)
           for i, x in enumerate(leaves)]
    return jax.tree.unflatten(treedef, out)


# --- the checkpoint manager ---------------------------------------------------------------------


def _quiet_local_saves() -> None:
    """Drops orbax's "Skipping merge of OCDBT checkpoints" warning, which every save made by one
    process alone in a multi-process run logs (its files need no merge)."""
    logger = logging.getLogger("absl")
    if not any(isinstance(f, _NoLocalMergeWarning) for f in logger.filters):
        logger.addFilter(_NoLocalMergeWarning())


class _NoLocalMergeWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "Skipping merge of OCDBT" not in record.getMessage()


class Checkpointer:
    """Saves and restores run states under `<run_dir>/checkpoints/<chunk>` (orbax).

    Args:
        run_dir: the run dir.
        keep: checkpoints kept (`RunConfig.keep_checkpoints`); older ones are deleted on save.
        replay: include the agent state's replay buffer (`RunConfig.checkpoint_replay`).
        read_only: open for reading only (never creates, deletes or cleans anything).
        agent: the run's agent; needed to save or restore without the replay buffer of an
            agent that declares `has_replay`.
        local: this process alone saves and restores (host-local NumPy states): the other
            processes of a multi-process run never join its barriers. A sweep member's
            checkpoints are written so, by the process that holds the member.
    """

    def __init__(self, run_dir: str, keep: int = 3, replay: bool = True, read_only: bool = False,
                 agent=None, local: bool = False):
        import orbax.checkpoint as ocp

        self.run_dir = run_dir
        self.directory = os.path.abspath(os.path.join(run_dir, CHECKPOINT_DIR))
        self.replay = replay
        self.agent = agent
        self.read_only = read_only
        # Not orbax's `read_only` option, which logs warnings on every open: a reader here never
        # calls `save` (guarded below), keeps every step and cleans nothing up.
        alone = local and jax.process_count() > 1
        if alone:
            _quiet_local_saves()
        if alone and not read_only:  # orbax creates no root folder for a subset of processes
            os.makedirs(self.directory, exist_ok=True)
        me = jax.process_index()
        options = ocp.CheckpointManagerOptions(
            max_to_keep=None if read_only else keep,
            create=not read_only and not alone,
            cleanup_tmp_directories=not read_only,
            # orbax's asynchronous saves signal through keys shared by all processes: a save
            # made by one process alone must be synchronous.
            enable_async_checkpointing=not alone,
            multiprocessing_options=ocp.options.MultiprocessingOptions(
                primary_host=me, active_processes={me}, barrier_sync_key_prefix=f"local{me}")
            if alone else ocp.options.MultiprocessingOptions(),
        )
        self._ocp = ocp
        self._mgr = ocp.CheckpointManager(
            self.directory, options=options, item_names=("state", "meta")
        )

    def steps(self) -> list[int]:
        """Chunk indices of the complete checkpoints on disk, ascending."""
        self._mgr.reload()
        return sorted(self._mgr.all_steps())

    def latest(self) -> int | None:
        steps = self.steps()
        return steps[-1] if steps else None

    def select(self, chunk: int | None = None) -> int:
        """`chunk` if saved, else the latest; raises CheckpointError when there is none."""
        steps = self.steps()
        if not steps:
            raise CheckpointError(f"no checkpoint in {self.directory}.")
        if chunk is None:
            return steps[-1]
        if chunk not in steps:
            raise CheckpointError(
                f"no checkpoint of chunk {chunk} in {self.directory}; "
                f"saved chunks: {', '.join(map(str, steps))}."
            )
        return chunk

    def save(self, chunk: int, runner: loop.RunState, records: list[dict], resolved: dict) -> None:
        """Starts saving the state after `chunk` chunks (asynchronous; see `wait`).

        Args:
            chunk: chunks completed (the step name).
            runner: the run state, leaves `[S, ...]`.
            records: every metrics record so far (one per chunk).
            resolved: the resolved config.
        """
        if self.read_only:
            raise CheckpointError(f"{self.directory} was opened read-only.")
        args = self._ocp.args
        has_replay = self.agent is not None and self.agent.has_replay
        state = pack(runner if self.replay or not has_replay else strip_replay(self.agent, runner))
        # orbax writes the JSON part in a background thread: give it a snapshot, not the
        # caller's list, which the runner appends the next chunk's record to meanwhile.
        meta = copy.deepcopy({
            "format": FORMAT_VERSION,
            "chunk": chunk,
            "records": list(records),
            "config": resolved,
            "replay": self.replay or not has_replay,
        })
        try:  # also raises a failure of the previous (asynchronous) save
            self._mgr.save(
                chunk,
                args=args.Composite(state=args.StandardSave(state), meta=args.JsonSave(meta)),
                force=True,
            )
        except Exception as err:  # noqa: BLE001
            raise self._write_failed(err) from err

    def delete_after(self, chunk: int) -> list[int]:
        """Deletes the checkpoints of chunks after `chunk` (a sweep member that saved a chunk
        its peers did not: the resumed sweep writes it again, bit-identical); returns them."""
        if self.read_only:
            raise CheckpointError(f"{self.directory} was opened read-only.")
        later = [s for s in self.steps() if s > chunk]
        for s in later:
            self._mgr.delete(s)
        return later

    def restore_meta(self, chunk: int) -> dict:
        """The JSON part of a checkpoint; CheckpointError when unreadable."""
        args = self._ocp.args
        try:
            return self._mgr.restore(chunk, args=args.Composite(meta=args.JsonRestore())).meta
        except Exception as err:  # noqa: BLE001  (orbax raises many types for broken files)
            raise self._broken(chunk, err) from err

    def restore_state(self, chunk: int, abstract: loop.RunState, replay: bool) -> loop.RunState:
        """The runner of checkpoint `chunk` (buffer None when it was saved without replay).

        Args:
            abstract: `jax.eval_shape` of a fresh runner (shapes, dtypes, structure).
            replay: whether the checkpoint holds the replay buffer (its meta's `replay`).
        """
        args = self._ocp.args
        target = abstract if replay else strip_replay(self.agent, abstract)
        try:
            out = self._mgr.restore(
                chunk, args=args.Composite(state=args.StandardRestore(pack(target))))
        except Exception as err:  # noqa: BLE001
            raise self._broken(chunk, err) from err
        return unpack(out.state, target)

    def _broken(self, chunk: int, err: Exception) -> CheckpointError:
        others = [s for s in self.steps() if s != chunk]
        hint = (
            f" Other saved chunks: {', '.join(map(str, others))} (`jaxrl eval`, `export` and "
            "`render` load one with `--chunk N`; `jaxrl train --resume` moves a broken "
            "checkpoint aside and resumes from the newest readable one)."
            if others
            else ""
        )
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        reason = (f"checkpoint {os.path.join(self.directory, str(chunk))} cannot be read "
                  f"({type(err).__name__}: {first.rstrip('.')}).")
        broken = CheckpointError(reason + hint)
        broken.reason = reason  # without the hint (`restore.newest_readable`)
        return broken

    def wait(self) -> None:
        """Blocks until pending saves are on disk.

        Raises:
            CheckpointError: a pending write failed (the previous checkpoint stays the latest).
        """
        try:
            self._mgr.wait_until_finished()
        except Exception as err:  # noqa: BLE001
            raise self._write_failed(err) from err

    def _write_failed(self, err: Exception) -> CheckpointError:
        latest = self.latest()
        kept = f"chunk {latest} is the latest complete one" if latest else "none is complete"
        return CheckpointError(
            f"writing a checkpoint in {self.directory} failed "
            f"({type(err).__name__}: {str(err)[:300]}); {kept}."
        )

    def close(self) -> None:
        self._mgr.close()


def existing_steps(run_dir: str) -> list[int]:
    """Chunk indices of the checkpoints in a run dir (empty when there is none); read-only."""
    if not os.path.isdir(os.path.join(run_dir, CHECKPOINT_DIR)):
        return []
    ckpt = Checkpointer(run_dir, read_only=True)
    try:
        return ckpt.steps()
    finally:
        ckpt.close()


# --- rebuilding a run ---------------------------------------------------------------------------


def abstract_runner(agent, env, hp: dict | None, with_jaxpr: bool = False, init=None):
    """(the `[S]` initial runner as shape structs, init fn, `[S, 2]` keys, `[S]` hps) of
    `agent`'s run (`agent.train`), traced once (`jax.jit(...).trace`); with `with_jaxpr`, the
    traced init program is appended. `init`: the run's own (`loop.make_train`), else made
    here."""
    cfg = agent.train
    init = init or loop.make_train(agent, env)[0]
    keys = assemble.seed_keys(cfg)
    hps = assemble.stack_hp(hp or agent.default_hp(), cfg.num_seeds)
    traced = jax.jit(parallel.member_map(init)).trace(keys, hps)
    out = (traced.out_info, init, keys, hps)
    return out + (traced.jaxpr,) if with_jaxpr else out


def restore_runner(
    ckpt: Checkpointer,
    chunk: int,
    meta: dict,
    agent,
    env,
    hp: dict | None,
    shardings=None,
) -> loop.RunState:
    """Restores checkpoint `chunk` into a runner for (agent, env); an empty replay buffer
    (from a fresh `init`) replaces one that was not saved.

    Args:
        shardings: where the restored arrays go (`runner.placement`): orbax reads each
            device's shard straight into place (every process its own); None: one device.
    """
    abstract, fresh = restore_target(agent, env, hp, shardings)
    return restore_into(ckpt, chunk, meta, agent, abstract, fresh, shardings)


def restore_target(agent, env, hp: dict | None, shardings=None, init=None):
    """(abstract runner placed by `shardings`, `fresh()` giving a new runner) for
    `restore_into`, from tracing the run's init (`init`, else made here)."""
    abstract, init, keys, hps = abstract_runner(agent, env, hp, init=init)
    # Without shardings, one device: a run saved over several (a CLI run of several seeds has
    # a CPU device per seed, `process.provide_cpu_devices`) is read back onto it.
    one = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    place = shardings if shardings is not None else jax.tree.map(lambda _: one, abstract)
    abstract = jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s),
                            abstract, place)
    return abstract, lambda: jax.jit(parallel.member_map(init), out_shardings=shardings)(keys, hps)


def restore_into(ckpt: Checkpointer, chunk: int, meta: dict, agent, abstract, fresh,
                 shardings=None) -> loop.RunState:
    """Checkpoint `chunk` read into the structure `abstract` (shape structs, optionally with
    shardings); `fresh()` gives a new runner whose empty replay buffer replaces one that was
    not saved. The structure may hold `warm_start.Opaque` nodes: leaves are read in order."""
    replay = bool(meta.get("replay", True))
    ckpt.agent = agent
    state = ckpt.restore_state(chunk, abstract, replay)
    if not replay and agent.has_replay:
        state = fill_replay(agent, state, agent.replay_of(fresh().agent_state))
    if shardings is not None:  # size-0 leaves come back from `unpack` as host arrays
        state = jax.device_put(state, shardings)
    return state


def check_spec(resolved: dict, spec: EnvSpec, env_name: str) -> None:
    """Raises CheckpointError when `spec` does not fit the observation/action sizes trained on."""
    saved = resolved.get("spec")
    if not saved:
        return
    got = {"obs_shape": jsonify(spec.obs_shape), "action_size": spec.action_size}
    if got != saved:
        raise CheckpointError(
            f"env {env_name!r} has observations {got['obs_shape']} and {got['action_size']} "
            f"action(s), but the run trained on {resolved.get('env')!r} with observations "
            f"{saved['obs_shape']} and {saved['action_size']} action(s)."
        )


def load_run(run_dir: str, chunk: int | None = None, env_name: str | None = None) -> LoadedRun:
    """Rebuilds agent, env and runner of a run dir from its config.json and a checkpoint.

    Args:
        run_dir: a folder written by `jaxrl train` / `runner.train`.
        chunk: the checkpoint to load (chunks completed); None loads the latest (the final
            checkpoint of a finished run).
        env_name: load this env instead of the training env (same observation and action
            sizes), e.g. to evaluate on a variant.

    Returns:
        LoadedRun whose `runner` leaves have a leading seed axis S = `cfg.num_seeds`.

    Raises:
        CheckpointError: missing run dir, config or checkpoint, unreadable checkpoint, or an
            env whose sizes do not match.
        ValueError: unknown agent or env (subclasses of ValueError), invalid saved config.
    """
    resolved = read_config(run_dir)
    agent_name, train_env, cfg, agent_config, hp = parse_config(resolved)
    env_name = env_name or train_env
    if not os.path.isdir(os.path.join(run_dir, CHECKPOINT_DIR)):
        raise CheckpointError(f"no checkpoint in {run_dir!r} (no {CHECKPOINT_DIR}/ folder).")
    ckpt = Checkpointer(run_dir, read_only=True)
    try:
        step = ckpt.select(chunk)
        meta = ckpt.restore_meta(step)
        agent, env, spec = assemble.build(agent_name, train_env, cfg, agent_config)
        state = restore_runner(ckpt, step, meta, agent, env, hp)
        if env_name != train_env:  # the runner's env_state stays the training env's
            agent, env, spec = assemble.build(agent_name, env_name, cfg, agent_config)
            check_spec(resolved, spec, env_name)
    finally:
        ckpt.close()
    return LoadedRun(
        agent=agent,
        env=env,
        spec=spec,
        cfg=cfg,
        agent_name=agent_name,
        env_name=env_name,
        agent_config=agent_config,
        runner=state,
        run_dir=run_dir,
        chunk=step,
        run=parse_run(resolved),
    )
