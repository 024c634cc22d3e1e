"""Contrastive critics for goal-conditioned RL: energies, InfoNCE losses, future-goal offsets.

Shared by CRL (off-policy, `agents/crl.py`) and CPPO (on-policy, `agents/cppo.py`). A batch of B
pairs gives a logits matrix `L[i, j] = f(phi(s_i, a_i), psi(g_j))` whose diagonal holds the
positive pairs (the goal reached from `(s_i, a_i)`) and whose off-diagonal entries are negatives.

Sources: Eysenbach et al., "Contrastive Learning as Goal-Conditioned RL" (NeurIPS 2022);
Bortkiewicz et al., "Accelerating Goal-Conditioned RL Algorithms and Research" (ICLR 2025),
`MichalBortkiewicz/JaxGCRL` `jaxgcrl/agents/crl/losses.py` (energies, InfoNCE directions, the
logsumexp penalty) and `crl.py::flatten_batch` (geometric future-state relabeling masked by
`traj_id`). Two departures from that code: `binary_nce` is a real binary
cross-entropy (the released one is `-mean(sigmoid(L))`), and `cosine` normalizes each vector
(the released one divides by a global norm until JaxGCRL PR #64).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

ENERGIES = ("distance", "sq_distance", "dot", "cosine")
"""Energy names; JaxGCRL calls `distance` "norm" and `sq_distance` "l2"."""
LOSSES = ("fwd_infonce", "bwd_infonce", "sym_infonce", "binary_nce")


def energy(phi: jax.Array, psi: jax.Array, kind: str = "distance", temperature=1.0
           ) -> jax.Array:
    """Pairwise energies `f(phi_i, psi_j)`, the critic's logits (larger = closer).

    Args:
        phi: float32 `[B, D]` state-action representations.
        psi: float32 `[K, D]` goal representations.
        kind: `distance` `-sqrt(||phi - psi||^2 + 1e-6)` (JaxGCRL's default "norm", the
            paper's "L2"), `sq_distance` `-||phi - psi||^2` (JaxGCRL's "l2"), `dot`
            `phi . psi`, `cosine` `phi . psi / (|phi| |psi|) / temperature`.
        temperature: positive float32 scalar, used by `cosine` only.

    Returns:
        float32 `[B, K]` logits.

    Raises:
        ValueError: unknown `kind`.

    The squared distances are `|phi_i|^2 + |psi_j|^2 - 2 phi_i . psi_j` (one `[B, D] x [D, K]`
    matmul, clipped at 0 against rounding), as `torch.cdist` computes them for large inputs:
    JaxGCRL's `phi[:, None] - psi[None]` builds a `[B, K, D]` array, whose gradient took 10x
    the time at B = 512 as at 256 on a 2-core CPU (`benchmarks/RESULTS.md`, "The pairwise
    distance as a matmul"). The two forms agree to float32 rounding (about 2e-6 on unit
    normal 64-d representations).
    """
    if kind in ("distance", "sq_distance"):
        sq = (jnp.sum(jnp.square(phi), -1)[:, None] + jnp.sum(jnp.square(psi), -1)[None, :]
              - 2.0 * (phi @ psi.T))
        sq = jnp.maximum(sq, 0.0)
        return -jnp.sqrt(sq + 1e-6) if kind == "distance" else -sq
    if kind == "dot":
        return phi @ psi.T
    if kind == "cosine":
        unit = lambda x: x / (jnp.linalg.norm(x, axis=-1, keepdims=True) + 1e-8)  # noqa: E731
        return unit(phi) @ unit(psi).T / temperature
    raise ValueError(f"energy must be one of {', '.join(ENERGIES)}; got {kind!r}.")


def pair_energy(phi: jax.Array, psi: jax.Array, kind: str = "distance", temperature=1.0):
    """Row-wise `f(phi_i, psi_i)` (the diagonal of `energy`), float32 `[...]` for `[..., D]`."""
    if kind in ("distance", "sq_distance"):
        sq = jnp.sum(jnp.square(phi - psi), axis=-1)
        return -jnp.sqrt(sq + 1e-6) if kind == "distance" else -sq
    if kind == "dot":
        return jnp.sum(phi * psi, axis=-1)
    if kind == "cosine":
        num = jnp.sum(phi * psi, axis=-1)
        den = jnp.linalg.norm(phi, axis=-1) * jnp.linalg.norm(psi, axis=-1) + 1e-8
        return num / den / temperature
    raise ValueError(f"energy must be one of {', '.join(ENERGIES)}; got {kind!r}.")


def contrastive_loss(logits: jax.Array, kind: str = "fwd_infonce") -> jax.Array:
    """Critic loss on square logits `[B, B]` with positives on the diagonal (float32 scalar).

    `fwd_infonce`: `mean_i [LSE_j L[i, j] - L[i, i]]` (classify the goal of each (s, a));
    `bwd_infonce`: `mean_j [LSE_i L[i, j] - L[j, j]]`; `sym_infonce`: their sum;
    `binary_nce`: binary cross-entropy with logits, label 1 on the diagonal, 0 elsewhere.

    Raises:
        ValueError: unknown `kind`.
    """
    diag = jnp.diagonal(logits)
    fwd = jnp.mean(jax.nn.logsumexp(logits, axis=1) - diag)
    bwd = jnp.mean(jax.nn.logsumexp(logits, axis=0) - diag)
    if kind == "fwd_infonce":
        return fwd
    if kind == "bwd_infonce":
        return bwd
    if kind == "sym_infonce":
        return fwd + bwd
    if kind == "binary_nce":
        labels = jnp.eye(logits.shape[0], dtype=logits.dtype)
        # BCE with logits: softplus(L) - y L, stable for any L.
        return jnp.mean(jax.nn.softplus(logits) - labels * logits)
    raise ValueError(f"contrastive_loss must be one of {', '.join(LOSSES)}; got {kind!r}.")


def logsumexp_penalty(logits: jax.Array) -> jax.Array:
    """`mean_i (LSE_j L[i, j])^2` (JaxGCRL multiplies it by `logsumexp_penalty_coeff` = 0.1)."""
    return jnp.mean(jnp.square(jax.nn.logsumexp(logits, axis=1)))


def critic_metrics(logits: jax.Array) -> dict[str, jax.Array]:
    """Categorical accuracy (row argmax on the diagonal), mean positive / negative logit, LSE."""
    b = logits.shape[0]
    eye = jnp.eye(b, dtype=bool)
    return {
        "train/accuracy": jnp.mean(jnp.argmax(logits, axis=1) == jnp.arange(b)),
        "train/logits_pos": jnp.mean(jnp.diagonal(logits)),
        "train/logits_neg": jnp.sum(jnp.where(eye, 0.0, logits)) / max(b * (b - 1), 1),
        "train/logsumexp": jnp.mean(jax.nn.logsumexp(logits, axis=1)),
    }


def future_offsets(key: jax.Array, valid: jax.Array, gamma) -> jax.Array:
    """Geometric future offsets restricted to the steps that are still in the same episode.

    Draws `k` with `P(k) ∝ gamma^k` over the `k` where `valid[..., k]` holds. `valid[..., 0]`
    must be true (offset 0 is the step itself), so a draw always exists. With `valid` true for
    `k < L` this is the geometric law truncated to `L` outcomes.

    Args:
        key: PRNG key.
        valid: bool `[..., H]`, which offsets are allowed.
        gamma: discount in (0, 1], float or float32 scalar.

    Returns:
        int32 `[...]` offsets in `[0, H)`.
    """
    h = valid.shape[-1]
    log_w = jnp.arange(h, dtype=jnp.float32) * jnp.log(jnp.asarray(gamma, jnp.float32))
    logits = jnp.where(valid, log_w, -jnp.inf)
    return jax.random.categorical(key, logits, axis=-1).astype(jnp.int32)


def rollout_future_index(key: jax.Array, traj_id: jax.Array, gamma) -> jax.Array:
    """For every step of a time-major rollout, the row of a future step in the same episode.

    Row `j >= t` of column `n` is drawn with `P(j) ∝ gamma^(j - t)` among the rows with
    `traj_id[j, n] == traj_id[t, n]` (rows of one episode are contiguous). The goal for step `t`
    is then the state reached by step `j`, `next_obs[j, n]`: `j - t + 1 >= 1` steps ahead, the
    geometric offset of CRL, never from another episode or past the rollout's end.

    Args:
        key: PRNG key.
        traj_id: int32 `[T, N]` episode ids (`Transition.extras["traj_id"]`).
        gamma: relabeling discount in (0, 1].

    Returns:
        int32 `[T, N]` rows `j` in `[t, T)`.
    """
    t = traj_id.shape[0]
    rows = jnp.arange(t)
    later = rows[None, :] - rows[:, None]  # [t, j] = j - t
    same = traj_id[None, :, :] == traj_id[:, None, :]  # [t, j, N]
    valid = (later[:, :, None] >= 0) & same
    shifted = jax.vmap(lambda v, s: jnp.roll(v, -s, axis=0), in_axes=(0, 0))(valid, rows)
    # shifted[t, k, n] = valid[t, t + k, n]; rolled-in rows (t + k >= T) have j < t: invalid.
    k = future_offsets(key, jnp.moveaxis(shifted, 1, -1), gamma)  # [T, N]
    return rows[:, None] + k


def mix_random_goals(goal: jax.Array, fraction: float) -> jax.Array:
    """Actor goals of a batch: the first `round(fraction * B)` rows take the goal of the row
    before them (`jnp.roll(goal, 1)`, another transition's relabeled future state), the rest
    keep their own.

    Eysenbach et al. (NeurIPS 2022), `google-research/contrastive_rl` `learning.py::actor_loss`
    (`random_goals` in {0, 0.5, 1}, default 0.5): the actor then also learns to reach goals
    that its own trajectory did not reach, such as the far side of a wall, instead of only the
    states it already visits. There 0.5 concatenates the B rolled rows to the B own rows (a
    doubled actor batch); here the batch keeps B rows. Batch rows are i.i.d. (independent pairs,
    or a permuted window batch), so the first rows are a uniform subset.

    Args:
        goal: float32 `[B, goal_dim]` relabeled goals of the batch.
        fraction: share of rows that get another row's goal, in [0, 1] (a Python float).

    Returns:
        float32 `[B, goal_dim]`; `goal` itself when no row is mixed.
    """
    k = int(round(fraction * goal.shape[0]))
    if k == 0:
        return goal
    return jnp.concatenate([jnp.roll(goal, 1, axis=0)[:k], goal[k:]], axis=0)
