"""Training time of the contrastive presets with the pairwise distance computed two ways.

    .venv/bin/python benchmarks/energy_forms.py [--steps 64000] [--batch-sizes 256 512]

`jaxrl.learning.contrastive.energy` computes the `distance` energy's squared distances as one
matmul, `|phi_i|^2 + |psi_j|^2 - 2 phi_i . psi_j`; JaxGCRL (`jaxgcrl/agents/crl/losses.py`)
and this project before 2026-12-07 broadcast `phi[:, None] - psi[None]` into a `[B, K, D]`
array. Each row trains the preset as `jaxrl train` does (`jaxrl.train`, one chunk, 16
evaluation episodes) once with the energy as shipped and once with the broadcast form
patched in, one after the other in this process, and prints training seconds (compile
excluded) for each: `crl-detourmaze-cpu` at the batch sizes given, and `cppo-detourmaze-cpu`
(critic batch 256). Results in `benchmarks/RESULTS.md` ("The pairwise distance as a matmul").
"""

from __future__ import annotations

import argparse
import platform

import jax
import jax.numpy as jnp

import jaxrl
from jaxrl.learning import contrastive

SHIPPED = contrastive.energy


def broadcast_energy(phi, psi, kind="distance", temperature=1.0):
    """The `[B, K, D]` broadcast form of the distance energies (JaxGCRL's)."""
    if kind in ("distance", "sq_distance"):
        sq = jnp.sum(jnp.square(phi[:, None, :] - psi[None, :, :]), axis=-1)
        return -jnp.sqrt(sq + 1e-6) if kind == "distance" else -sq
    return SHIPPED(phi, psi, kind, temperature)


def train_seconds(preset: str, steps: int, form, **overrides) -> float:
    contrastive.energy = form
    try:
        result = jaxrl.train(preset, total_env_steps=steps, num_chunks=1, num_eval_envs=16,
                             **overrides)
    finally:
        contrastive.energy = SHIPPED
    return result.train_seconds


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=64_000, help="env steps per CRL row")
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[256, 512])
    args = p.parse_args()
    print(f"jax {jax.__version__}, {platform.processor() or platform.machine()}")
    print("| preset | batch | env steps | matmul (shipped) s | broadcast s | ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    rows = [("crl-detourmaze-cpu", b, args.steps, {"batch_size": b}) for b in args.batch_sizes]
    rows.append(("cppo-detourmaze-cpu", 256, 2 * 64_000, {}))
    for preset, batch, steps, overrides in rows:
        ours = train_seconds(preset, steps, SHIPPED, **overrides)
        theirs = train_seconds(preset, steps, broadcast_energy, **overrides)
        print(f"| `{preset}` | {batch} | {steps:,} | {ours:.1f} | {theirs:.1f} | "
              f"{theirs / ours:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
