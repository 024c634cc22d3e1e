"""Process-wide setup of a CLI command, before anything touches a device: the processes of a
multi-host run join (`jaxrl.run.distributed`), then JAX's persistent compilation cache is
switched on.

The cache keeps every compiled XLA program on disk, keyed by the program and the
backend/versions, so the second run of a config skips its compiles (minutes on a 2-core CPU for
MJX envs). Folder: `JAXRL_COMPILE_CACHE`, else `JAX_COMPILATION_CACHE_DIR`, else
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


def enable_compile_cache(on: bool = True) -> str | None:
    """Turns JAX's persistent compilation cache on (every program, however fast it compiled)
    or off; returns the folder, or None when off."""
    if not on:
        jax.config.update("jax_enable_compilation_cache", False)
        return None
    folder = cache_dir()
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
