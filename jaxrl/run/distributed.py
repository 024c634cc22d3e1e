"""Several processes as one run: JAX's own distributed runtime (`jax.distributed.initialize`).

Every process runs the same command; after `initialize`, `jax.devices()` lists the devices of
all processes, so the meshes of `jaxrl.engine.parallel` span every host: a data-parallel run
(`--num-devices` = all devices) or a sweep's members sharded over all of them. Process 0 writes
config.json, metrics.jsonl, TensorBoard and summaries; every process takes part in checkpoint
writes (orbax writes each array's shards from the process that holds them, and the metadata
once) and must see the same run dir (a shared file system).

How the processes find each other, in this order:
1. explicit flags: `--coordinator-address HOST:PORT --num-processes P --process-id I`;
2. a cluster JAX detects itself: SLURM (`srun`, one task per host or per GPU), Open MPI,
   Kubernetes/GKE TPU (no flags needed; `jax.distributed.initialize()` reads the environment);
3. neither: one process, nothing to initialize.

On CPU, cross-process collectives go through gloo (`jax_cpu_collectives_implementation`).
"""

from __future__ import annotations

import os

import jax

_SLURM_VARS = ("SLURM_JOB_ID", "SLURM_NTASKS", "SLURM_PROCID")


def check_args(coordinator_address: str | None, num_processes: int | None,
               process_id: int | None) -> None:
    """Raises ValueError for an incomplete or inconsistent set of flags (before any device
    is touched)."""
    given = [v is not None for v in (coordinator_address, num_processes, process_id)]
    if any(given) and not all(given):
        raise ValueError("--coordinator-address, --num-processes and --process-id go together "
                         "(or none of them, to let JAX read a SLURM or MPI environment).")
    if not any(given):
        return
    host, _, port = coordinator_address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--coordinator-address must be HOST:PORT (process 0's address), got "
                         f"{coordinator_address!r}.")
    if num_processes < 1:
        raise ValueError(f"--num-processes must be >= 1, got {num_processes}.")
    tasks = os.environ.get("SLURM_NTASKS")
    if tasks and tasks.isdigit() and int(tasks) > 1 and int(tasks) != num_processes:
        raise ValueError(f"--num-processes {num_processes}, but this SLURM step runs {tasks} "
                         "tasks: drop the flags to let JAX read SLURM, or make them agree.")
    if not 0 <= process_id < num_processes:
        raise ValueError(f"--process-id {process_id} is outside 0..{num_processes - 1} "
                         f"(--num-processes {num_processes}).")


def in_cluster() -> bool:
    """True under a multi-task SLURM step (`srun`) or an explicit `JAX_COORDINATOR_ADDRESS`."""
    if os.environ.get("JAX_COORDINATOR_ADDRESS"):
        return True
    slurm = all(os.environ.get(v) for v in _SLURM_VARS)
    return slurm and int(os.environ.get("SLURM_NTASKS", "1")) > 1


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, timeout_s: int = 300) -> bool:
    """Joins the processes of one run; returns whether more than one process takes part.

    Args:
        coordinator_address: `HOST:PORT` of process 0 (it listens there).
        num_processes: processes in the run, all started with the same command.
        process_id: this process's index, 0 .. num_processes - 1.
        timeout_s: how long to wait for every process to connect.

    Raises:
        ValueError: bad flags (`check_args`), or a run whose processes disagree on their
            number (fewer joined than `num_processes` said).
    """
    check_args(coordinator_address, num_processes, process_id)
    if coordinator_address is None and not in_cluster():
        return False
    # Must precede any backend use; only the CPU client reads it (GPUs use NCCL).
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if not jax.distributed.is_initialized():
        try:
            jax.distributed.initialize(coordinator_address, num_processes, process_id,
                                       initialization_timeout=timeout_s)
        except Exception as err:  # noqa: BLE001  (XLA raises its own runtime error types)
            where = coordinator_address or "the cluster's coordinator"
            raise ValueError(
                f"the processes did not all join {where} within {timeout_s} s "
                f"({type(err).__name__}: {str(err).splitlines()[0][:200]}); start every "
                "process with the same --coordinator-address and --num-processes and a "
                "distinct --process-id.") from err
    if num_processes is not None and jax.process_count() != num_processes:
        raise ValueError(f"--num-processes {num_processes}, but {jax.process_count()} "
                         "processes joined the coordinator.")
    return jax.process_count() > 1


def is_primary() -> bool:
    """True in process 0 (the one that writes logs and summaries)."""
    return jax.process_index() == 0
