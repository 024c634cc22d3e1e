"""FPO vs the reference FPO (`akanazawa/fpo`, `playground/`, Apache-2.0) on CartpoleBalance, with
equal settings, plus our `fpo` vs our `ppo` CPU presets at equal env steps.

Part `ref` (equal settings, Brax-style names; ours in brackets): num_envs 256, unroll_length 16,
batch_size 256 sequences x num_minibatches 8 (one update = 8 x 256 x 16 = 32,768 env steps = 256
envs x 128 steps; ours `--num-envs 256 --unroll-length 16 --unrolls-per-update 8`, FPO
`num_minibatches 8`: the update sees `[16, 2048]` sequences, 8 minibatches of 256),
num_updates_per_batch 4 [num_epochs 4], lr 3e-4 constant, clip 0.05, N_mc 8
[num_mc], 10 Euler flow steps, reward scaling 10, gamma 0.995, lambda 0.95, value loss coeff
0.25 [vf_coef 0.5: 0.5 x 0.5], velocity MLP 4x32, value MLP 256x5, averaged ratio with the PPO
clip, observation normalization, truncation masked [gae_mode brax], 655,360 env steps (20
updates), 5 evaluations of 128 envs x 1000 steps. The reference evaluates before the training
step of iterations linspace(0, 19, 5) plus once after the last (0 / 131k / 295k / 459k / 623k /
655k steps), ours after each of 5 chunks (131k / 262k / ... / 655k); both start the flow from
random noise in evaluation [`zero_sampling_eval False`]; ours is also evaluated once more at the
end with its default zero-noise evaluation. The reference runs through the peer runner
`run_fpo_cpu.py` (as a subprocess of its own venv, nothing from the peer folder is imported
here); ours through `jaxrl.run.runner.train` in a worker subprocess of this venv (a fresh
process per run, so no compile is shared between runs). Timing: reference = its runner's numbers
(iteration = rollout + training step, timed with block_until_ready; steady = iterations 2..20,
evals excluded; compile estimate = first iteration minus the steady median; init = jit of the
init functions and env reset); ours = `result.compile_seconds` (init and the chunk program,
compiled ahead of time) and `env_steps / result.train_seconds` (evaluation excluded). Both also
report the sum of XLA backend compile durations from `jax.monitoring` (evaluation included).

Part `presets`: `fpo-dmc-cpu` and `ppo-dmc-cpu`, each with its preset's settings, both at
`fpo-dmc-cpu`'s budget and chunking (2,007,040 env steps in 5 chunks of 49 iterations of 256 x 32
steps; so `ppo-dmc-cpu` anneals its learning rate over 2.0M steps instead of its 5.2M), eval
return after each chunk (64 envs, zero-noise / deterministic).

The reference venv `.venv-fpo` (Python 3.12, jax 0.7.0) is created if missing, with the recipe
of `<peer-dir>/README.md` pinned by `<peer-dir>/constraints-py312.txt`; `--peer-python` uses
another interpreter. Usage (from the project root; about 15-20 minutes on 2 shared cores):

    .venv/bin/python benchmarks/fpo_vs_reference.py                 # all parts, writes the JSON
    .venv/bin/python benchmarks/fpo_vs_reference.py --parts ref --repeats 2   # alternating
    .venv/bin/python benchmarks/fpo_vs_reference.py --from-json benchmarks/fpo_vs_reference.json

This file imports nothing from jaxrl at module level.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import _common as common

NAME = "fpo_vs_reference"
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_JSON = os.path.join(HERE, f"{NAME}.json")
DEFAULT_PEER_VENV = os.path.join(common.REPO, ".venv-fpo")
PEER_PINS = ("jax==0.7.0", "jaxlib==0.7.0", "playground==0.0.5", "mujoco==3.3.4",
             "mujoco-mjx==3.3.4", "brax==0.12.4", "flax==0.11.0", "jax_dataclasses>=1.6.3",
             "tyro>=1.0.0", "tqdm")
PEER_PACKAGES = ("jax", "jaxlib", "mujoco", "mujoco-mjx", "brax", "playground", "flax", "optax",
                 "jax_dataclasses")
REF = {"env": "CartpoleBalance", "seed": 0, "num_envs": 256, "unroll_length": 16,
       "batch_size": 256, "num_minibatches": 8, "num_updates_per_batch": 4,
       "num_timesteps": 655_360, "num_evals": 5, "learning_rate": 3e-4,
       "clipping_epsilon": 0.05, "flow_steps": 10, "n_samples_per_action": 8,
       "reward_scaling": 10.0, "discounting": 0.995, "gae_lambda": 0.95,
       "value_loss_coeff": 0.25, "eval_envs": 128}
"""The equal settings, reference names."""
PRESET_STEPS, PRESET_CHUNKS = 2_007_040, 5


# ----- command line -----------------------------------------------------------------------
def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--parts", default="ref,presets", help="comma list: ref, presets")
    p.add_argument("--repeats", type=int, default=1, help="ref pairs, run alternating "
                   "(reference, ours, reference, ours, ...)")
    p.add_argument("--peer-dir", default="../shared/peers/fpo", help="peer folder (relative to "
                   "the project root)")
    p.add_argument("--peer-python", default=None, help="interpreter for the reference "
                   "(default: .venv-fpo/bin/python, created if missing)")
    p.add_argument("--base-python", default=None, help="Python 3.12 used to create .venv-fpo")
    p.add_argument("--timeout", type=int, default=1200, help="seconds per run")
    p.add_argument("--json", dest="json_path", default=DEFAULT_JSON)
    p.add_argument("--from-json", default=None, help="print the tables of this JSON, run nothing")
    p.add_argument("--ours-worker", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


# ----- the reference venv and runner ------------------------------------------------------
def find_python312(explicit: str | None) -> str:
    """A working Python 3.12: `explicit`, `python3.12` on PATH, or pyenv's 3.12.x."""
    cands = [explicit] if explicit else [shutil.which("python3.12")] + sorted(
        glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12")), reverse=True)
    for c in filter(None, cands):
        ok = subprocess.run([c, "-c", "import sys; assert sys.version_info[:2] == (3, 12)"],
                            capture_output=True).returncode == 0
        if ok:
            return c
    raise SystemExit("no working python3.12 found; pass --base-python or --peer-python")


def peer_python(args: argparse.Namespace, peer_dir: str) -> str:
    """The reference's interpreter; creates `.venv-fpo` with the peer README's pinned recipe
    when neither `--peer-python` nor the venv exists."""
    if args.peer_python:
        return args.peer_python
    python = os.path.join(DEFAULT_PEER_VENV, "bin", "python")
    if os.path.exists(python):
        return python
    base = find_python312(args.base_python)
    print(f"creating {DEFAULT_PEER_VENV} with {base}", flush=True)
    subprocess.run([base, "-m", "venv", DEFAULT_PEER_VENV], check=True)
    constraints = os.path.join(peer_dir, "constraints-py312.txt")
    subprocess.run([python, "-m", "pip", "install", "-c", constraints, *PEER_PINS], check=True)
    return python


def peer_versions(python: str) -> dict:
    code = ("import json, platform; from importlib import metadata as m\n"
            f"names = {list(PEER_PACKAGES)!r}\n"
            "def v(n):\n    try: return m.version(n)\n    except Exception: return None\n"
            "print(json.dumps(dict({n: v(n) for n in names}, python=platform.python_version())))")
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_reference(python: str, peer_dir: str, timeout: int) -> dict:
    """Runs `run_fpo_cpu.py --algo fpo` at the REF settings; returns its JSON summary."""
    r = REF
    flags = {"env": r["env"], "seed": r["seed"], "num-envs": r["num_envs"],
             "batch-size": r["batch_size"], "num-minibatches": r["num_minibatches"],
             "unroll-length": r["unroll_length"],
             "num-updates-per-batch": r["num_updates_per_batch"],
             "num-timesteps": r["num_timesteps"], "num-evals": r["num_evals"],
             "learning-rate": r["learning_rate"], "clipping-epsilon": r["clipping_epsilon"],
             "flow-steps": r["flow_steps"], "n-samples-per-action": r["n_samples_per_action"],
             "eval-envs": r["eval_envs"]}
    sets = [f"{k}={r[k]}" for k in ("reward_scaling", "discounting", "gae_lambda",
                                    "value_loss_coeff")]
    out_json = os.path.join(tempfile.gettempdir(), f"{NAME}_peer.json")
    cmd = [python, os.path.join(peer_dir, "run_fpo_cpu.py"), "--algo", "fpo"]
    cmd += [x for k, v in flags.items() for x in (f"--{k}", str(v))]
    cmd += [x for s in sets for x in ("--set", s)] + ["--json", out_json]
    log = common.worker_log_path(NAME, "peer")
    load0, t0 = os.getloadavg(), time.time()
    with open(log, "w") as f:
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout,
                              cwd=common.REPO, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    if proc.returncode:
        with open(log) as f:
            raise RuntimeError(f"reference run failed (rc {proc.returncode}):\n{f.read()[-3000:]}")
    with open(out_json) as f:
        res = json.load(f)
    rel = [os.path.relpath(c, common.REPO) if os.path.isabs(c) else c for c in cmd]
    rel[-1] = "PEER.json"
    res.update(command=" ".join(rel), wall_s_outside=time.time() - t0,
               loadavg_before=[round(x, 2) for x in load0],
               loadavg_after=[round(x, 2) for x in os.getloadavg()])
    return res


# ----- our side (worker subprocess in this venv) ------------------------------------------
def ours_settings(kind: str, preset: str | None = None) -> dict:
    """Payload for our worker: `ref` (the REF settings) or `preset` (a CPU preset at
    PRESET_STEPS / PRESET_CHUNKS)."""
    if kind == "preset":
        return {"kind": kind, "preset": preset, "seed": 0}
    return {"kind": kind, "seed": REF["seed"]}


def ours_configs(s: dict):
    """(agent name, env, TrainConfig, agent config) for a worker payload."""
    import dataclasses

    import jaxrl.agents  # noqa: F401  (registers the agents)
    from jaxrl import configs
    from jaxrl.agents.fpo import FPOConfig
    from jaxrl.engine.loop import TrainConfig

    if s["kind"] == "preset":
        p = configs.get(s["preset"])
        cfg = dataclasses.replace(p.train, total_env_steps=PRESET_STEPS, num_chunks=PRESET_CHUNKS)
        return p.agent, p.env, cfg, p.agent_config
    r = REF
    ups = r["batch_size"] * r["num_minibatches"] // r["num_envs"]
    cfg = TrainConfig(num_envs=r["num_envs"], unroll_length=r["unroll_length"],
                      unrolls_per_update=ups, total_env_steps=r["num_timesteps"],
                      num_chunks=r["num_evals"], num_eval_envs=r["eval_envs"])
    agent_cfg = FPOConfig(policy_hidden=(32, 32, 32, 32), value_hidden=(256,) * 5,
                          num_minibatches=r["num_minibatches"],
                          num_epochs=r["num_updates_per_batch"],
                          learning_rate=r["learning_rate"], clipping_epsilon=r["clipping_epsilon"],
                          num_mc=r["n_samples_per_action"], flow_steps=r["flow_steps"],
                          sampler="euler", reward_scaling=r["reward_scaling"],
                          gamma=r["discounting"], gae_lambda=r["gae_lambda"],
                          vf_coef=2 * r["value_loss_coeff"], gae_mode="brax",
                          per_sample_ratio=False, trust_region="clip", anneal_lr=False,
                          max_grad_norm=None, normalize_observations=True,
                          zero_sampling_eval=False)
    return "fpo", r["env"], cfg, agent_cfg


def zero_noise_eval(agent_name, env_name, cfg, agent_cfg, result, seed: int = 0) -> float:
    """Eval return of the final state with zero initial noise (same eval key as the last
    chunk's evaluation)."""
    import dataclasses

    import jax
    import numpy as np

    from jaxrl.run import assemble, runner

    agent, env, spec = assemble.build(agent_name, env_name, cfg,
                                      dataclasses.replace(agent_cfg, zero_sampling_eval=True))
    key = assemble.eval_key(result.runner.key, seed, cfg.num_chunks - 1)  # the last eval's
    ev = runner.make_evaluator(agent, env)(result.runner.agent_state, key)
    return float(np.mean(jax.device_get(ev["eval/episode_return"])))


def ours_worker(payload: str) -> None:
    """Inside our venv: one `runner.train` run; prints `RESULT_TAG + json`."""
    import dataclasses

    import jax

    from jaxrl.run import runner

    s = json.loads(payload)
    compile_events: dict[str, float] = {}

    def on_duration(event: str, duration: float, **kwargs) -> None:
        if event.startswith("/jax/core/compile/"):
            compile_events[event] = compile_events.get(event, 0.0) + duration

    jax.monitoring.register_event_duration_secs_listener(on_duration)
    from jaxrl.engine.loop import RunConfig

    agent_name, env_name, cfg, agent_cfg = ours_configs(s)
    load0, t0 = os.getloadavg(), time.time()
    result = runner.train(agent_name, env_name, cfg, agent_cfg, run_dir=None, progress=False,
                          run=RunConfig(seed=s["seed"]))
    wall = time.time() - t0
    recs = result.records
    steady_s = recs[-1]["wall_time"] - recs[0]["wall_time"]
    out = {"settings": s, "agent": agent_name, "env": env_name,
           "train_config": dataclasses.asdict(cfg),
           "agent_config": {k: v for k, v in dataclasses.asdict(agent_cfg).items()},
           "compile_seconds": result.compile_seconds, "train_seconds": result.train_seconds,
           "env_steps": result.env_steps, "total_wall_s": wall,
           "train_sps": result.env_steps / result.train_seconds,
           "train_sps_excl_first_chunk": (result.env_steps * (len(recs) - 1) / len(recs)
                                          / steady_s) if len(recs) > 1 else None,
           "xla_compile_events_s": compile_events,
           "chunks": [{k: r.get(k) for k in ("chunk", "env_steps", "wall_time", "perf/sps",
                                             "eval/episode_return")} for r in recs],
           "loadavg_before": [round(x, 2) for x in load0],
           "loadavg_after": [round(x, 2) for x in os.getloadavg()],
           "versions": common.versions()}
    if s["kind"] == "ref":
        out["final_eval_zero_noise"] = zero_noise_eval(agent_name, env_name, cfg, agent_cfg,
                                                       result, s["seed"])
    common.print_worker_result(out)


def run_ours(s: dict, timeout: int) -> dict:
    tag = s.get("preset") or s["kind"]
    return common.run_worker(sys.executable, __file__, "--ours-worker", s, timeout,
                             common.worker_log_path(f"{NAME}_{tag}", "ours"))


# ----- tables -----------------------------------------------------------------------------
def _ours_eval_at(o: dict, steps: int):
    return next((c["eval/episode_return"] for c in o["chunks"] if c["env_steps"] == steps), None)


def _ref_eval_at(p: dict, steps: int):
    return next((e["reward_mean"] for e in p["evals"] if e["env_steps"] == steps), None)


def _f(x, nd=1) -> str:
    return "-" if x is None else f"{x:,.{nd}f}"


def ref_columns(pair: dict) -> dict[str, list[str]]:
    """Table-1 cells of one reference run and one of ours (same row order as REF_ROWS)."""
    p, o = pair["reference"], pair["ours"]
    bc = "/jax/core/compile/backend_compile_duration"
    t = o["train_config"]
    per_iter = t["num_envs"] * t["unroll_length"] * t["unrolls_per_update"]
    per_update = [w / (o["env_steps"] / len(o["chunks"]) / per_iter) for w in _chunk_walls(o)]
    last = REF["num_timesteps"]
    ref = [f"{p['total_env_steps']:,}", f"{p['init_s']:.1f} + {p['compile_est_s']:.1f}",
           f"{p['first_iter_s']:.2f}", f"{p['steady_iter_median_s']:.2f}",
           _f(p["xla_compile_events_s"].get(bc)), common.fmt(p["train_sps_steady"]),
           f"{p['total_wall_s']:.0f}", _f(_ref_eval_at(p, 131_072)),
           _f(_ref_eval_at(p, last)), "-", f"{p['loadavg_before'][0]} / {p['loadavg_after'][0]}"]
    ours = [f"{o['env_steps']:,}", f"{o['compile_seconds']:.1f}",
            f"{per_update[0]:.2f} (chunk 1)", f"{sorted(per_update)[len(per_update) // 2]:.2f}",
            _f(o["xla_compile_events_s"].get(bc)),
            f"{common.fmt(o['train_sps'])} ({common.fmt(o['train_sps_excl_first_chunk'])})",
            f"{o['total_wall_s']:.0f}", _f(_ours_eval_at(o, 131_072)), _f(_ours_eval_at(o, last)),
            _f(o.get("final_eval_zero_noise")),
            f"{o['loadavg_before'][0]} / {o['loadavg_after'][0]}"]
    return {"reference": ref, "ours": ours}


REF_ROWS = ("env steps", "compile s (ref: init + first iter - steady median; ours: "
            "`compile_seconds`)", "first update s", "steady update s (median)",
            "XLA backend compile s (jax.monitoring, whole run)",
            "**training SPS after compile** (ours: excl. chunk 1)", "whole run wall s",
            "eval return at 131,072 steps (random-noise eval)",
            "**eval return at 655,360 steps** (random-noise eval)",
            "eval return at 655,360, zero-noise eval", "load avg (1 min) before / after")


def _chunk_walls(o: dict) -> list[float]:
    walls = [c["wall_time"] for c in o["chunks"]]
    return [b - a for a, b in zip([0.0] + walls[:-1], walls, strict=True)]


def ref_table(res: dict) -> list[str]:
    pairs = res.get("ref") or []
    if not pairs:
        return []
    heads, cols = [], []
    for i, pair in enumerate(pairs, 1):
        c = ref_columns(pair)
        heads += [f"reference FPO, run {i}", f"jaxrl `fpo`, run {i}"]
        cols += [c["reference"], c["ours"]]
    out = ["| | " + " | ".join(heads) + " |", "| --- |" + " ---: |" * len(heads)]
    out += [f"| {name} | " + " | ".join(col[j] for col in cols) + " |"
            for j, name in enumerate(REF_ROWS)]
    out.append("")
    for i, pair in enumerate(pairs, 1):
        p, o = pair["reference"], pair["ours"]
        curve = " / ".join(f"{e['env_steps']:,}: {e['reward_mean']:.1f}" for e in p["evals"])
        ours = " / ".join(f"{c['env_steps']:,}: {c['eval/episode_return']:.1f}"
                          for c in o["chunks"])
        out += [f"- run {i} eval curve, reference: {curve}",
                f"- run {i} eval curve, ours: {ours}"]
    return out


def preset_table(res: dict) -> list[str]:
    pr = res.get("presets") or {}
    f, p = pr.get("fpo-dmc-cpu"), pr.get("ppo-dmc-cpu")
    if not (f and p):
        return []
    out = ["| env steps | `fpo` (`fpo-dmc-cpu`) eval return | `fpo` train s | "
           "`ppo` (`ppo-dmc-cpu`) eval return | `ppo` train s |",
           "| ---: | ---: | ---: | ---: | ---: |"]
    for a, b in zip(f["chunks"], p["chunks"], strict=True):
        assert a["env_steps"] == b["env_steps"]
        out.append(f"| {a['env_steps']:,} | {a['eval/episode_return']:.1f} | "
                   f"{a['wall_time']:.0f} | {b['eval/episode_return']:.1f} | "
                   f"{b['wall_time']:.0f} |")
    out.append("")
    for name, o in (("fpo", f), ("ppo", p)):
        out.append(f"- `{name}`: compile {o['compile_seconds']:.0f} s, train "
                   f"{o['train_seconds']:.0f} s ({common.fmt(o['train_sps'])} SPS), whole run "
                   f"{o['total_wall_s']:.0f} s incl. evaluation; load avg "
                   f"{o['loadavg_before'][0]} -> {o['loadavg_after'][0]}")
    return [""] + out


def format_tables(res: dict) -> str:
    m = res["machine"]
    lines = [f"- machine: {m['cpu_model']}, {m['cpu_count']} cores, load at start "
             f"{m['loadavg_1_5_15']}, end {res.get('loadavg_end')}",
             f"- ours: {common.vers(res['versions'])}",
             f"- reference venv: {common.vers(res.get('peer_versions') or {})}", ""]
    return "\n".join(lines + ref_table(res) + preset_table(res))


# ----- main -------------------------------------------------------------------------------
def run_all(args: argparse.Namespace, res: dict) -> None:
    """Runs the parts, saving the JSON after every run."""
    parts = set(filter(None, args.parts.split(",")))
    peer_dir = os.path.normpath(os.path.join(common.REPO, args.peer_dir))
    if "ref" in parts:
        python = peer_python(args, peer_dir)
        res["peer_versions"] = peer_versions(python)
        res["ref"] = []
        for i in range(args.repeats):
            print(f"[{i + 1}/{args.repeats}] reference (log "
                  f"{common.worker_log_path(NAME, 'peer')}) ...", flush=True)
            pair = {"reference": run_reference(python, peer_dir, args.timeout)}
            print(f"  {pair['reference']['train_sps_steady']:,.0f} SPS; ours ...", flush=True)
            pair["ours"] = run_ours(ours_settings("ref"), args.timeout)
            print(f"  {pair['ours']['train_sps']:,.0f} SPS", flush=True)
            res["ref"].append(pair)
            common.write_json(args.json_path, res)
    if "presets" in parts:
        res["presets"] = {}
        for name in ("fpo-dmc-cpu", "ppo-dmc-cpu"):
            print(f"preset {name} ...", flush=True)
            res["presets"][name] = run_ours(ours_settings("preset", name), args.timeout)
            common.write_json(args.json_path, res)


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.ours_worker is not None:
        return ours_worker(args.ours_worker)
    if args.from_json:
        with open(args.from_json) as f:
            return print(format_tables(json.load(f)))
    os.chdir(common.REPO)
    res = {"command": " ".join(sys.argv), "date": time.strftime("%Y-%m-%d %H:%M:%S"),
           "machine": common.machine_info(), "versions": common.versions(),
           "ref_settings": REF, "preset_steps": PRESET_STEPS, "preset_chunks": PRESET_CHUNKS}
    run_all(args, res)
    res["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    common.write_json(args.json_path, res)
    print(format_tables(res))


if __name__ == "__main__":
    main()
