"""Process-wide setup of a CLI command, before anything touches a device: the processes of a
multi-host run join (`jaxrl.run.distributed`), then JAX's persistent compilation cache is
switched on. `provide_cpu_devices` gives a CPU run one host device per vmapped member.

The cache keeps every compiled XLA program on disk, keyed by the program and the
backend/versions, so the second run of a config skips its compiles (minutes on a 2-core CPU for
MJX envs); `jaxrl train` also keeps each run's compiled programs whole in its
`jaxrl-programs` subfolder (`jaxrl.run.warm_start`): that run then starts without building
the env or tracing. Folder: `JAXRL_COMPILE_CACHE`, else `JAX_COMPILATION_CACHE_DIR`, else
`~/.cache/jaxrl/jax-compilation`. `--no-compile-cache` turns it off for one command.
"""

from __future__ import annotations

import os

import jax

from jaxrl.run import distributed


def cache_dir() -> str:
    """The compilation cache folder this process uses when the cache is on."""
    return (os.environ.get("JAXRL_COMPILE_CACHE") or os.environ.get("JAX_COMPILATION_CACHE_DIR")
            or os.path.join(os.path.expanduser("~"), ".cache", "jaxrl", "jax-compilation"))


_cache_folder: str | None = None


def program_store() -> str | None:
    """The warm-start store of this process (`jaxrl.run.warm_start`): `jaxrl-programs` in the
    compilation cache folder while `enable_compile_cache` has the cache on, else None."""
    from jaxrl.run import warm_start

    return os.path.join(_cache_folder, warm_start.FOLDER) if _cache_folder else None


def enable_compile_cache(on: bool = True) -> str | None:
    """Turns JAX's persistent compilation cache on (every program, however fast it compiled)
    or off; returns the folder, or None when off. The warm-start store (`program_store`)
    follows it."""
    global _cache_folder
    _cache_folder = None
    if not on:
        jax.config.update("jax_enable_compilation_cache", False)
        return None
    folder = _cache_folder = cache_dir()
    os.makedirs(folder, exist_ok=True)
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", folder)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return folder


def setup(args) -> None:
    """Joins the other processes (`args.coordinator_address`, `num_processes`, `process_id`, or
    a SLURM/MPI environment) and applies `args.compile_cache`.

    Raises:
        ValueError: inconsistent distributed flags (`distributed.check_args`).
    """
    distributed.initialize(args.coordinator_address, args.num_processes, args.process_id)
    enable_compile_cache(args.compile_cache)


MAX_CPU_DEVICES = 64
_CPU_DEVICE_FLAG = "xla_force_host_platform_device_count"


def provide_cpu_devices(num_members: int) -> int | None:
    """Gives the CPU backend one device per member (at most `MAX_CPU_DEVICES`) before it starts.

    Why: XLA CPU runs the dots of an MLP's weight gradients through its fast (YNNPACK) kernels
    only without a batch dimension; vmapped members turn them into batched dots that run
    several times slower, so 4 members on one CPU device trained at half the total env steps
    per second of 1 member. With a device per member the runner places the member axis on a
    `seed` mesh (`jaxrl.engine.parallel.seed_mesh`): each device runs one member's unbatched
    program on its own thread, and no collective joins them (`benchmarks/sweep_throughput.py`).

    Only the CPU client reads this setting (`jax_num_cpu_devices`); on a GPU machine the members
    still go to the GPUs. Call it before the first JAX computation; the CLI calls it for
    `--num-seeds` and sweep members.

    Returns:
        The CPU device count set, or None when nothing changed: one member, a count already
        chosen in `XLA_FLAGS` (`--xla_force_host_platform_device_count`) or
        `jax_num_cpu_devices`, or a backend that already started (too late to change).
    """
    from jax._src import xla_bridge

    if num_members <= 1 or _CPU_DEVICE_FLAG in os.environ.get("XLA_FLAGS", ""):
        return None
    if xla_bridge.backends_are_initialized() or jax.config.jax_num_cpu_devices >= 0:
        return None
    count = min(int(num_members), MAX_CPU_DEVICES)
    jax.config.update("jax_num_cpu_devices", count)
    return count
