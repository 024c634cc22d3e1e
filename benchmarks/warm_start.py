"""Launch-to-training time of `jaxrl train`, cold and warm (persistent compilation cache).

Runs the same `jaxrl train` command `--runs` times against one fresh compilation-cache folder
(`JAXRL_COMPILE_CACHE`): the first run compiles cold, the later ones find every program in the
cache. Each run's output lines are time-stamped from launch; the table gives

- **to "compiling" s**: launch until the CLI prints `compiling ...` (Python imports, argument
  parsing, building the env and the agent, reading the env spec);
- **compile s**: the CLI's own `compiled in X s` (placement, init, tracing and lowering the
  chunk program, and the XLA compile or cache read);
- **to training s**: launch until `compiled in ...` is printed, right before the first chunk
  runs: the number the "second run starts training within 5 s" goal is about;
- **wall s**: the whole command, evaluation and writing the run dir included.

Reference rows time bare imports in fresh interpreters (`import jax`, `import
mujoco_playground`), the floor under any MJX run's start.

    .venv/bin/python benchmarks/warm_start.py                      # default train, 2 runs
    .venv/bin/python benchmarks/warm_start.py --runs 3 -- --preset sac-dmc-cpu

Extra arguments after `--` go to `jaxrl train` (default: `--total-env-steps 100000`).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import _common as common

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TRAIN_ARGS = ["--total-env-steps", "100000"]
IMPORTS = ("jax", "mujoco_playground")


def stamped_run(cmd: list[str], env: dict, timeout: float) -> tuple[list[tuple[float, str]], int]:
    """Runs `cmd`; returns ([(seconds since launch, line)], exit code). Progress-bar redraws
    (carriage returns) count as lines."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                            text=True, bufsize=1)
    lines, buf = [], ""
    while True:
        c = proc.stdout.read(1)
        if not c:
            break
        if c in "\r\n":
            if buf.strip():
                lines.append((time.perf_counter() - t0, buf.strip()))
            buf = ""
        else:
            buf += c
        if time.perf_counter() - t0 > timeout:
            proc.kill()
            break
    lines.append((time.perf_counter() - t0, "<exit>"))
    return lines, proc.wait()


def summarize(lines: list[tuple[float, str]], code: int) -> dict:
    """The table's numbers from one run's stamped lines."""
    first = lambda pat: next(((t, s) for t, s in lines if re.search(pat, s)), (None, ""))  # noqa: E731
    t_compiling, _ = first(r"^(compiling|loading the stored)")
    t_trained, text = first(r"^(compiled|loaded the compiled programs) in")
    match = re.search(r" in ([0-9.]+) s", text)
    return {"exit_code": code, "to_compiling_s": t_compiling,
            "compile_s": float(match.group(1)) if match else None, "to_training_s": t_trained,
            "wall_s": lines[-1][0], "last_lines": [s for _, s in lines[-4:]]}


def import_seconds(module: str) -> float:
    """Wall seconds of `python -c "import module"` in a fresh interpreter."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", f"import {module}"], check=True)
    return time.perf_counter() - t0


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=2, help="runs against one cache (1st cold)")
    p.add_argument("--timeout", type=float, default=900, help="seconds per run")
    p.add_argument("--out", default=os.path.join(HERE, "warm_start.json"), help="JSON output")
    p.add_argument("train_args", nargs="*", help="arguments for `jaxrl train` (after --)")
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error("--runs must be at least 1.")
    train_args = args.train_args or DEFAULT_TRAIN_ARGS
    jaxrl_bin = os.path.join(os.path.dirname(sys.executable), "jaxrl")
    cache = tempfile.mkdtemp(prefix="warm_start_cache_")
    runs_root = tempfile.mkdtemp(prefix="warm_start_runs_")
    env = dict(os.environ, JAXRL_COMPILE_CACHE=cache)
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    res = {"machine": common.machine_info(), "versions": common.versions(),
           "command": " ".join(["python", *sys.argv]), "train_args": train_args, "runs": []}
    try:
        for i in range(args.runs):
            cmd = [jaxrl_bin, "train", *train_args, "--run-dir", os.path.join(runs_root, str(i)),
                   "--no-progress"]
            lines, code = stamped_run(cmd, env, args.timeout)
            res["runs"].append(dict(summarize(lines, code), run=i + 1, cache="cold" if i == 0
                                    else "warm"))
        res["imports_s"] = {m: import_seconds(m) for m in IMPORTS}
    finally:
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(runs_root, ignore_errors=True)
    print_table(res)
    common.write_json(args.out, res)


def _s(x) -> str:
    return "-" if x is None else f"{x:.1f}"


def print_table(res: dict) -> None:
    print("| run | cache | to \"compiling\" s | compile s | to training s | wall s | exit |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for r in res["runs"]:
        print(f"| {r['run']} | {r['cache']} | {_s(r['to_compiling_s'])} | {_s(r['compile_s'])} | "
              f"{_s(r['to_training_s'])} | {_s(r['wall_s'])} | {r['exit_code']} |")
    for m, s in res.get("imports_s", {}).items():
        print(f"- `python -c \"import {m}\"`: {s:.1f} s")
    print(f"- `jaxrl train {' '.join(res['train_args'])}`")
    for line in common.machine_lines(res):
        print(line)


if __name__ == "__main__":
    main()
