"""Closed-loop parity: the exported ONNX policy drives the env, next to the JAX policy.

`jaxrl eval RUN --policy onnx` loads `RUN/export/policy.onnx` (written by `jaxrl export RUN`)
and its sidecar, and rolls out `N` evaluation episodes twice from the same initial states (the
reset key `jaxrl eval` uses: `split(key_like(run key, seed))[0]`, one episode per env slot, no
auto-reset):

- ONNX: each step the observations go to the host, onnxruntime (CPU) computes the action in env
  units (in batches of the exported batch size, the last one padded), it is mapped back to
  [-1, 1] (the inverse of `export.to_env_units`) and the jitted JAX env steps. On the same
  observations the JAX policy's action is computed too; the largest |ONNX - JAX| over all
  steps of live episodes is the per-step action difference (env units).
- JAX: the same host loop with the JAX deterministic policy (`agent.act(..., True)`).

Each episode's return is frozen at its first `done`, as `jaxrl.engine.rollout.evaluate` does.
The exported model's seed and checkpoint (`seed_index`, `chunk` in the sidecar) are the ones
compared. With domain randomization in the run's config the env follows `eval_randomization`
(as `jaxrl eval`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time

import jax
import numpy as np

from jaxrl.deploy import export
from jaxrl.engine import randomization, wrappers
from jaxrl.engine.rollout import key_like

EXPORT_MODEL = os.path.join("export", "policy.onnx")


class NotExportedError(ValueError):
    """The run has no ONNX export (`jaxrl export RUN` writes one)."""


@dataclasses.dataclass(frozen=True)
class ClosedLoopResult:
    """Per-episode outcomes of the ONNX and JAX policies from the same initial states.

    Attributes:
        onnx_return, jax_return: float64 `[N]`, return of each episode (up to its first done,
            or up to the step limit).
        onnx_length, jax_length: float64 `[N]`, env steps of each episode.
        onnx_done, jax_done: bool `[N]`, whether the episode ended within the step limit.
        max_action_diff: max |ONNX action - JAX action| (env units) over the live steps of the
            ONNX trajectories, both policies given the same observation.
        num_compared: live (episode, step) pairs compared.
        batch_size: the exported model's batch size.
        seconds: wall time of the two rollouts (compiles included).
    """

    onnx_return: np.ndarray
    jax_return: np.ndarray
    onnx_length: np.ndarray
    jax_length: np.ndarray
    onnx_done: np.ndarray
    jax_done: np.ndarray
    max_action_diff: float
    num_compared: int
    batch_size: int
    seconds: float

    def summary(self) -> dict[str, float]:
        """Means and the differences: `onnx_return_mean`, `jax_return_mean`, `*_std`,
        `*_length_mean`, `max_return_diff` (max over episodes of |ONNX - JAX|),
        `max_return_rel_diff` (that over max(|JAX return|, 1e-8)), `max_action_diff`."""
        diff = np.abs(self.onnx_return - self.jax_return)
        rel = diff / np.maximum(np.abs(self.jax_return), 1e-8)
        return {"onnx_return_mean": float(self.onnx_return.mean()),
                "onnx_return_std": float(self.onnx_return.std()),
                "jax_return_mean": float(self.jax_return.mean()),
                "jax_return_std": float(self.jax_return.std()),
                "onnx_length_mean": float(self.onnx_length.mean()),
                "jax_length_mean": float(self.jax_length.mean()),
                "max_return_diff": float(diff.max()), "max_return_rel_diff": float(rel.max()),
                "max_action_diff": self.max_action_diff}


def read_export(run_dir: str, model: str | None = None) -> tuple[str, dict]:
    """(model path, sidecar dict) of a run's ONNX export.

    Args:
        run_dir: the run folder; model: the `.onnx` file (default `RUN_DIR/export/policy.onnx`).

    Raises:
        NotExportedError: no model or sidecar there, or the sidecar is not an ONNX export's.
    """
    path = model or os.path.join(run_dir, EXPORT_MODEL)
    if not (os.path.isfile(path) and os.path.isfile(path + ".json")):
        raise NotExportedError(f"no exported policy at {path} (and {os.path.basename(path)}"
                               f".json): export it first with `jaxrl export {run_dir}`.")
    with open(path + ".json") as f:
        meta = json.load(f)
    if meta.get("format") != "onnx":
        raise NotExportedError(f"{path}.json describes a {meta.get('format')!r} export, not "
                               f"ONNX: run `jaxrl export {run_dir}` (--format onnx).")
    return path, meta


class OnnxPolicy:
    """The exported model in onnxruntime: `obs [N, ...] (array or dict) -> action [N, A]`.

    Rows go through in batches of the sidecar's `batch_size` B (the last padded by repeating
    its final row); inputs are fed by the sidecar's `inputs` (`obs`, or one per key read).

    Raises:
        ImportError: onnxruntime is not installed (the `export` extra).
    """

    def __init__(self, path: str, meta: dict):
        self.session = export.onnx_session(path, "`--policy onnx`")
        self.inputs = [(i["name"], i["obs_key"]) for i in meta["inputs"]]
        self.batch_size = int(meta["batch_size"])

    def __call__(self, obs) -> np.ndarray:
        leaves = [np.asarray(obs[k] if k is not None else obs, np.float32)
                  for _, k in self.inputs]
        n, b = leaves[0].shape[0], self.batch_size
        pad = (-n) % b
        if pad:
            leaves = [np.concatenate([x, np.repeat(x[-1:], pad, axis=0)]) for x in leaves]
        outs = [self.session.run(["action"], {name: x[i : i + b] for (name, _), x in
                                              zip(self.inputs, leaves, strict=True)})[0]
                for i in range(0, n + pad, b)]
        return np.concatenate(outs)[:n]


def from_env_units(action: np.ndarray, low, high) -> np.ndarray:
    """Inverse of `export.to_env_units` on `[low, high]`: env units -> [-1, 1] (float32)."""
    low, high = np.asarray(low, np.float64), np.asarray(high, np.float64)
    if np.allclose(low, -1.0) and np.allclose(high, 1.0):
        return np.asarray(action, np.float32)
    width = np.where(high > low, high - low, 1.0)
    return (2.0 * (np.asarray(action, np.float64) - low) / width - 1.0).astype(np.float32)


def _episodes(step, state, act, num_steps: int, reference=None):
    """Host loop: `act(obs) -> (action [-1, 1], action in env units)` until every slot is done
    or `num_steps`; `reference(obs) -> env-unit action` is compared on live slots.

    Returns:
        (return [N], length [N], done [N] bool, max action diff, live steps compared).
    """
    n = int(np.shape(state.reward)[0])
    ret, length, ended = np.zeros(n), np.zeros(n), np.zeros(n, bool)
    diff, compared = 0.0, 0
    for _ in range(num_steps):
        action, env_action = act(state.obs)
        if reference is not None:
            gap = np.abs(np.asarray(env_action, np.float64) - np.asarray(reference(state.obs)))
            diff = max(diff, float(gap[~ended].max()))
            compared += int((~ended).sum())
        state = step(state, action)
        reward, done = jax.device_get((state.reward, state.done))
        ret += np.where(ended, 0.0, reward)
        length += ~ended
        ended |= np.asarray(done) > 0
        if ended.all():
            break
    return ret, length, ended, diff, compared


def closed_loop_eval(loaded, path: str, meta: dict, num_episodes: int, seed: int = 0,
                     num_steps: int | None = None, randomize: bool | None = None
                     ) -> ClosedLoopResult:
    """Rolls out the ONNX model and the JAX policy of `meta["seed_index"]` (see module doc).

    Args:
        loaded: the run (`jaxrl.load_run`) at the exported chunk.
        path, meta: the model and its sidecar (`read_export`).
        num_episodes: N, episodes (parallel env slots) per policy.
        seed: PRNG seed of the initial states (as `jaxrl eval --seed`).
        num_steps: step limit; None: the episode length (`cfg.episode_length` or the env's).
        randomize: domain randomization on/off; None follows `cfg.eval_randomization`.

    Raises:
        ValueError: non-positive `num_episodes` / `num_steps`; ImportError: no onnxruntime.
    """
    if num_episodes <= 0 or (num_steps is not None and num_steps <= 0):
        raise ValueError(f"num_episodes and num_steps must be positive, got {num_episodes} "
                         f"and {num_steps}.")
    onnx_policy = OnnxPolicy(path, meta)
    cfg, spec = loaded.cfg, loaded.spec
    length = cfg.episode_length or spec.episode_length
    randomize = cfg.eval_randomization if randomize is None else randomize
    env = randomization.maybe_randomize(loaded.env,
                                        cfg.domain_randomization if randomize else None)
    venv = wrappers.wrap_for_eval(env, num_episodes, length, cfg.action_repeat)
    state = jax.tree.map(lambda x: x[meta["seed_index"]], loaded.runner.agent_state)
    act_key = key_like(loaded.runner.key, 0)

    @jax.jit
    def jax_act(obs):
        with jax.default_matmul_precision("highest"):  # as the ONNX model: no TF32 on GPUs
            action = loaded.agent.act(state, obs, act_key, True)[0]
        return action, export.to_env_units(action, spec.action_low, spec.action_high)

    def onnx_act(obs):
        env_action = onnx_policy(jax.device_get(obs))
        return from_env_units(env_action, spec.action_low, spec.action_high), env_action

    t0 = time.time()
    start = jax.jit(venv.reset)(jax.random.split(key_like(loaded.runner.key, seed))[0])
    step, limit = jax.jit(venv.step), num_steps or length
    o_ret, o_len, o_done, diff, compared = _episodes(step, start, onnx_act, limit,
                                                     lambda obs: jax_act(obs)[1])
    j_ret, j_len, j_done, _, _ = _episodes(step, start, jax_act, limit)
    return ClosedLoopResult(o_ret, j_ret, o_len, j_len, o_done, j_done, diff, compared,
                            onnx_policy.batch_size, time.time() - t0)


def check_selection(meta: dict, seed_index: int | None, chunk: int | None, run_dir: str
                    ) -> None:
    """Raises ValueError when `--seed-index` / `--chunk` ask for another policy than the
    exported one (the sidecar's `seed_index`, `chunk`), naming the re-export command."""
    for flag, want, have in (("seed-index", seed_index, meta.get("seed_index")),
                             ("chunk", chunk, meta.get("chunk"))):
        if want is not None and want != have:
            raise ValueError(f"the export in {run_dir} is of --{flag} {have}, not {want}: "
                             f"re-export with `jaxrl export {run_dir} --{flag} {want}`.")


def report(res: ClosedLoopResult, loaded, path: str, meta: dict, seed: int) -> list[str]:
    """The lines `jaxrl eval --policy onnx` prints: both policies' returns and lengths, the
    largest return difference over episodes and the largest per-step action difference."""
    s, n = res.summary(), res.onnx_return.shape[0]
    lines = [f"{loaded.agent_name} on {loaded.env_name}: {path} (seed index "
             f"{meta['seed_index']}, chunk {meta['chunk']}, batch size {res.batch_size}) in "
             f"onnxruntime vs the JAX policy, {n} episodes from the same initial states (seed "
             f"{seed}), {res.seconds:.1f} s"]
    for name in ("onnx", "jax"):
        done = int(getattr(res, f"{name}_done").sum())
        lines.append(f"{name + ':':6s}return {s[name + '_return_mean']:.3f} +- "
                     f"{s[name + '_return_std']:.3f} ({done} of {n} episodes ended), length "
                     f"{s[name + '_length_mean']:.1f}")
    lines.append(f"return difference: max {s['max_return_diff']:.3g} over episodes (relative "
                 f"{s['max_return_rel_diff']:.3g}); largest per-step action difference "
                 f"{s['max_action_diff']:.3g} (env units, {res.num_compared} steps of the ONNX "
                 "trajectories)")
    return lines
