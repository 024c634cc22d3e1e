"""Shared parts of the benchmark scripts: the Brax venv, the Brax worker subprocess, raw MJX
stepping, Brax epoch timing, machine and version info, and table helpers.

The scripts (`ppo_throughput.py`, `offpolicy_throughput.py`) are run as files, so their folder
is on `sys.path` and they import this module as `_common`. It imports nothing from jaxrl (and
jax only inside functions), so it also loads inside the Brax venv, where the scripts re-invoke
themselves with `--brax-worker SETTINGS_JSON` and print one `RESULT_TAG + json` line.

Brax's trainers do not run on our jax (0.10 removed `jax.device_put_replicated`), so the Brax
side runs in a separate virtual environment, by default `.venv-brax` at the repository root
(gitignored by `.venv-*/`), created by `setup_brax_venv` (`--setup-brax-venv` in the scripts):
`python -m venv .venv-brax` then `pip install "jax==0.8.3" "jaxlib==0.8.3" brax playground`
(a jax from before that removal). `run_worker` is the same mechanism for any worker (the off-policy
benchmark also runs each of our agents in its own process, with a timeout); `setup_venv` creates
any peer's venv (`crl_throughput.py` uses it for `.venv-jaxgcrl`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import platform
import re
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_BRAX_VENV = os.path.join(REPO, ".venv-brax")
BRAX_PINS = ("jax==0.8.3", "jaxlib==0.8.3", "brax", "playground")
RESULT_TAG = "BRAX_WORKER_RESULT "
PACKAGES = ("jax", "jaxlib", "mujoco", "mujoco-mjx", "brax", "playground", "flax", "optax",
            "warp-lang")


# ----- machine and versions ----------------------------------------------------------------
def machine_info() -> dict:
    """CPU model (from /proc/cpuinfo), core counts, load average, OS and Python."""
    model = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            names = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
        model = names[0] if names else model
    except OSError:
        pass
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    load = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None
    return {"cpu_model": model, "cpu_count": os.cpu_count(), "cpus_usable": affinity,
            "loadavg_1_5_15": load, "platform": platform.platform(),
            "python": platform.python_version()}


def versions(extra: tuple[str, ...] = ()) -> dict:
    """Installed versions of the packages that matter and of `extra` (None when absent), and
    jax's backend."""
    from importlib import metadata

    out = {}
    for name in PACKAGES + tuple(extra):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    import jax

    out["jax_backend"] = jax.default_backend()
    return out


# ----- the Brax venv and its worker --------------------------------------------------------
def setup_venv(path: str, installs: list[list[str]], check_code: str) -> None:
    """Creates the venv `path` (if missing) with the base Python of this one, upgrades pip, runs
    `pip install ARGS` for each list in `installs` (in order), then `python -c check_code`."""
    python = os.path.join(path, "bin", "python")
    if not os.path.exists(python):
        print(f"creating {path}", flush=True)
        base = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([base, "-m", "venv", path], check=True)
    subprocess.run([python, "-m", "pip", "install", "--upgrade", "pip"], check=True)
    for args in installs:
        subprocess.run([python, "-m", "pip", "install", *args], check=True)
    subprocess.run([python, "-c", check_code], check=True)


def setup_brax_venv(path: str, check_import: str = "brax.training.agents.ppo.train") -> None:
    """Creates `path` (if missing) and installs the pinned Brax stack into it with pip."""
    setup_venv(path, [list(BRAX_PINS)], f"import {check_import}, mujoco_playground; "
               "import jax; print('brax venv ok, jax', jax.__version__)")


def worker_log_path(name: str, kind: str = "brax") -> str:
    """Where a worker's stderr goes: `<tmp>/<name>_<kind>_worker.log`."""
    return os.path.join(tempfile.gettempdir(), f"{name}_{kind}_worker.log")


def run_worker(python: str, script: str, flag: str, payload: dict, timeout: float,
               log_path: str) -> dict:
    """Runs `python script flag PAYLOAD_JSON`; returns the JSON of its `RESULT_TAG` line.

    The worker's stderr goes to `log_path`; its tail is in the error on failure.

    Raises:
        subprocess.TimeoutExpired: the worker ran past `timeout` seconds (it is killed).
        RuntimeError: the worker failed or printed no result line.
    """
    cmd = [python, os.path.abspath(script), flag, json.dumps(payload)]
    with open(log_path, "w") as log:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=log, text=True,
                              timeout=timeout, cwd=REPO)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_TAG)]
    if proc.returncode or not lines:
        with open(log_path) as f:
            tail = f.read()[-4000:]
        raise RuntimeError(f"worker {flag} failed (rc {proc.returncode}); stderr tail:\n{tail}\n"
                           f"stdout tail:\n{proc.stdout[-2000:]}")
    return json.loads(lines[-1][len(RESULT_TAG):])


def run_brax_subprocess(script: str, s: dict, venv: str, timeout: int, skip_raw: bool,
                        name: str) -> dict:
    """Runs `script --brax-worker SETTINGS` with `venv`'s Python; returns the worker's JSON.

    The worker's stderr goes to `worker_log_path(name)`.
    """
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        raise SystemExit(f"No Brax venv at {venv}; create it with --setup-brax-venv.")
    return run_worker(python, script, "--brax-worker", dict(s, skip_raw=skip_raw), timeout,
                      worker_log_path(name))


def print_worker_result(out: dict) -> None:
    """Inside the worker: prints `RESULT_TAG + json` on one line."""
    print(RESULT_TAG + json.dumps(out), flush=True)


# ----- raw stepping ------------------------------------------------------------------------
def time_random_rollout(step, state, action_size: int, num_envs: int, num_steps: int,
                        repeats: int, seed: int, batched: bool = False) -> dict:
    """SPS of `jit(scan(vmap(step)))` with uniform random actions in [-1, 1].

    `step` is a single-env `step(state, action)` (`batched`: already a batched env's step, not
    vmapped again); `state` is already batched over `num_envs`. Two warm-up calls (compile, and
    any recompile for the output-typed carry) are excluded.
    """
    import jax
    import jax.numpy as jnp

    vstep = step if batched else jax.vmap(step)

    def body(carry, _):
        s, key = carry
        key, k = jax.random.split(key)
        a = jax.random.uniform(k, (num_envs, action_size), jnp.float32, -1.0, 1.0)
        s = vstep(s, a)
        return (s, key), s.reward.sum()

    run = jax.jit(lambda s, key: jax.lax.scan(body, (s, key), None, num_steps))
    carry = (state, jax.random.PRNGKey(seed))
    t0 = time.perf_counter()
    for _ in range(2):  # the second call feeds outputs back in, as the timed calls do
        carry, rew = run(*carry)
        jax.block_until_ready((carry, rew))
    warmup = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(repeats):
        carry, rew = run(*carry)
    jax.block_until_ready((carry, rew))
    seconds = time.perf_counter() - t0
    steps = num_envs * num_steps * repeats
    return {"sps": steps / seconds, "env_steps": steps, "seconds": seconds,
            "warmup_seconds": warmup}


def raw_ours(s: dict) -> dict:
    """Raw stepping of `jaxrl.envs.make(s["env"], impl=s["impl"])` (in our venv)."""
    import jax

    from jaxrl import envs

    env = envs.make(s["env"], impl=s["impl"])
    keys = jax.random.split(jax.random.PRNGKey(s["seed"]), s["num_envs"])
    state = jax.jit(jax.vmap(env.reset))(keys)
    return time_random_rollout(env.step, state, env.action_size, s["num_envs"], s["raw_steps"],
                               s["raw_repeats"], s["seed"])


def load_playground(name: str, impl: str):
    """Playground env with `impl` overridden (when its config has one) and its config."""
    from mujoco_playground import registry

    cfg = registry.get_default_config(name)
    overrides = {"impl": impl} if "impl" in cfg else None
    return registry.load(name, config_overrides=overrides), cfg


def raw_brax_side(s: dict) -> dict:
    """Raw stepping of the plain Playground env inside the Brax venv (jax 0.8.3)."""
    import jax

    env, _ = load_playground(s["env"], s["impl"])
    keys = jax.random.split(jax.random.PRNGKey(s["seed"]), s["num_envs"])
    state = jax.jit(jax.vmap(env.reset))(keys)
    return time_random_rollout(env.step, state, env.action_size, s["num_envs"], s["raw_steps"],
                               s["raw_repeats"], s["seed"])


# ----- Brax epoch timing -------------------------------------------------------------------
class CompileClock(logging.Handler):
    """Records `(time, seconds)` of jax's "Finished tracing/lowering/compilation ... in X sec"
    messages (logger `jax._src.dispatch`, DEBUG level, so nothing is printed)."""

    PATTERN = re.compile(r"^Finished .* in ([0-9.eE+-]+) sec")

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.events: list[tuple[float, float]] = []

    def emit(self, record):
        m = self.PATTERN.match(record.getMessage())
        if m:
            self.events.append((time.perf_counter(), float(m.group(1))))

    def install(self) -> CompileClock:
        log = logging.getLogger("jax._src.dispatch")
        log.setLevel(logging.DEBUG)
        log.addHandler(self)
        log.propagate = False
        return self

    def seconds_between(self, t0: float, t1: float) -> float:
        return sum(sec for t, sec in self.events if t0 < t <= t1)

    def wall_seconds_between(self, t0: float, t1: float) -> float:
        """Wall time covered by the events ending in (t0, t1]: the union of their intervals,
        so a jit traced inside another jit's tracing is not counted twice (`seconds_between`
        sums them)."""
        spans = sorted((t - sec, t) for t, sec in self.events if t0 < t <= t1)
        total, end = 0.0, float("-inf")
        for a, b in spans:
            if b > end:
                total += b - max(a, end)
                end = b
        return total


def brax_epochs(t0: float, stamps: list, metrics: list, clock: CompileClock) -> list[dict]:
    """Per-epoch wall time, env steps, jax compile seconds and Brax's `training/sps`.

    `stamps` holds `(perf_counter, env_steps)` per `progress_fn` call, `metrics` the
    `training/` metrics of the same call; epoch i spans stamps i-1 .. i (t0 before the first).
    """
    out, prev_t, prev_n = [], t0, 0
    for (t, n), m in zip(stamps, metrics, strict=True):
        out.append({"seconds": t - prev_t, "env_steps": n - prev_n,
                    "compile_seconds": clock.seconds_between(prev_t, t),
                    "brax_training_sps": m.get("training/sps")})
        prev_t, prev_n = t, n
    return out


def steady_epochs(epochs: list[dict]) -> list[int]:
    """Indices of the epochs after the first whose jax compile time is under 1% of the epoch.

    Raises RuntimeError when there are none (every epoch compiled).
    """
    steady = [i for i, e in enumerate(epochs) if i and e["compile_seconds"] < 0.01 * e["seconds"]]
    if not steady:
        raise RuntimeError(f"every Brax epoch compiled; raise --num-chunks. Epochs: {epochs}")
    return steady


def epoch_summary(bp: dict) -> str:
    """`epoch i: seconds (compile seconds)` for the epochs left out of the Brax SPS."""
    steady = set(bp.get("steady_epochs", []))
    return ", ".join(f"epoch {i} {e['seconds']:.1f} s ({e['compile_seconds']:.1f} s compiling)"
                     for i, e in enumerate(bp.get("epochs", []), 1) if i not in steady)


# ----- output ------------------------------------------------------------------------------
@contextlib.contextmanager
def quiet(log_path: str | None):
    """Sends file descriptors 1 and 2 to `log_path` (MJX/Warp print solver warnings from C,
    thousands per rollout); None leaves them alone."""
    if log_path is None:
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(log_path, "a") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, old in zip((1, 2), saved, strict=True):
                os.dup2(old, fd)
                os.close(old)


def start_quiet_log(name: str, verbose: bool, folder: str | None = None) -> str | None:
    """Empties and returns `<folder>/<name>.log` (default folder: the temp dir) for `quiet`
    (None with `verbose`), and says so."""
    if verbose:
        return None
    log = os.path.join(folder or tempfile.gettempdir(), f"{name}.log")
    open(log, "w").close()
    print(f"simulator/compiler output of our parts goes to {log} (--verbose shows it)")
    return log


def fmt(x) -> str:
    """Thousands-separated integer, or '-' for missing values."""
    return "-" if x is None else f"{x:,.0f}"


def vers(v: dict) -> str:
    """`name version, ...` for the packages present."""
    return ", ".join(f"{k} {x}" for k, x in v.items() if x is not None)


def machine_lines(res: dict) -> list[str]:
    """Bullet lines for the machine, our versions and (when run) the Brax venv's versions."""
    m, b = res["machine"], res.get("brax") or {}
    out = [f"- machine: {m['cpu_model']}, {m['cpu_count']} cores ({m['cpus_usable']} usable), "
           f"load average at start {m['loadavg_1_5_15']}, Python {m['python']}",
           f"- versions (ours): {vers(res['versions'])}"]
    if b.get("versions"):
        out.append(f"- versions (brax venv): {vers(b['versions'])}")
    return out


def write_json(path: str | None, res: dict) -> None:
    """Writes `res` as indented JSON when `path` is set."""
    if path:
        with open(path, "w") as f:
            json.dump(res, f, indent=2)


def brax_lines(b: dict, trainer: dict | None) -> list[str]:
    """Bullet lines for a Brax worker result `b` (its `trainer` part: `b["ppo"]` or `b["sac"]`)
    and the raw SPS measured inside the Brax venv; shared by both throughput benchmarks."""
    out = []
    if trainer:
        load = trainer.get("loadavg_at_end")
        out.append(f"- brax: {fmt(trainer['steady_env_steps'])} steps in "
                   f"{trainer['steady_seconds']:.1f} s over epochs {trainer['steady_epochs']} of "
                   f"{len(trainer['epochs'])} (left out: {epoch_summary(trainer)}); Brax's own "
                   f"training/sps mean over the same epochs: "
                   f"{fmt(trainer['brax_training_sps_mean_steady'])}"
                   + (f"; load average at end {load}" if load is not None else ""))
    if b.get("raw"):
        out.append(f"- raw SPS inside the Brax venv (plain Playground env, jax "
                   f"{b['versions']['jax']}): {fmt(b['raw']['sps'])}")
    return out
