"""A CPU run gets one device per vmapped member (`process.provide_cpu_devices`), so the runner puts
the members on a `seed` mesh; every check runs in a fresh interpreter, whose backend has not
started yet (this test process's has)."""

import json
import os
import subprocess
import sys

SCRIPT = r"""
import json, sys
from jax._src import xla_bridge
from jaxrl.run import cli, cli_sweep, process

out = {}
# Parsing a command imports every agent, env and preset: none may start the backend.
args, agent_name, env_name, cfg, agent_cfg = cli.resolve(
    ["--preset", "ppo-toy-cpu", "--num-seeds", "4", "--num-eval-envs", "0"])
members = cli_sweep.resolve(["--preset", "sac-toy-cpu", "--grid", "sac.tau=0.01,0.02,0.05",
                             "--num-seeds", "2"])[1]
out["started_by_parsing"] = xla_bridge.backends_are_initialized()
out["one_member"] = process.provide_cpu_devices(1)
out["provided"] = process.provide_cpu_devices(cfg.num_seeds)
out["again"] = process.provide_cpu_devices(len(members))  # already chosen: kept

import jax
from jaxrl.run import runner
from jaxrl.run.assemble import build

out["devices"] = jax.device_count()
agent, env, spec = build(agent_name, env_name, cfg, agent_cfg)
mesh, shardings = runner.placement(agent, env)
out["mesh"] = None if mesh is None else dict(mesh.shape)
out["params_shards"] = (None if mesh is None
                        else len(jax.tree.leaves(shardings)[0].devices_indices_map((4, 3))))
out["after_start"] = process.provide_cpu_devices(8)  # too late: None, nothing changes
out["sweep_members"] = len(members)
print("RESULT" + json.dumps(out))
"""


def _run(script, **env):
    full = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    full.update(env)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=full, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT"))
    return json.loads(line[len("RESULT"):])


def test_members_get_one_cpu_device_each():
    out = _run(SCRIPT)
    assert out["started_by_parsing"] is False
    assert out["one_member"] is None
    assert out["provided"] == 4 and out["again"] is None
    assert out["devices"] == 4 and out["mesh"] == {"seed": 4}
    assert out["params_shards"] == 4
    assert out["after_start"] is None
    assert out["sweep_members"] == 6


def test_a_device_count_the_user_chose_is_kept():
    out = _run(SCRIPT, XLA_FLAGS="--xla_force_host_platform_device_count=2")
    assert out["provided"] is None
    assert out["devices"] == 2 and out["mesh"] == {"seed": 2}


def test_a_run_over_several_cpu_devices_loads_on_one(tmp_path, capsys):
    """A CLI run of 2 seeds saves its checkpoints from 2 CPU devices (one per seed); `jaxrl
    eval` and `load_run` in a process with another device count read them back onto one
    device (orbax refused them before: "Topology mismatch")."""
    import jax

    from jaxrl.run import checkpoint, cli

    run_dir = str(tmp_path / "two_seeds")
    script = ("from jaxrl.run import cli; cli.main(['train', '--preset', 'ppo-toy-cpu', "
              "'--num-seeds', '2', '--total-env-steps', '20000', '--num-chunks', '1', "
              f"'--num-eval-envs', '0', '--run-dir', {run_dir!r}]); "
              "import jax; print('RESULT' + str(jax.device_count()))")
    full = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=full, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "RESULT2" in proc.stdout  # the run had a device per seed
    assert jax.device_count() != 2  # this process: another topology
    loaded = checkpoint.load_run(run_dir)
    params = jax.tree.leaves(loaded.runner.agent_state)
    assert params[0].shape[0] == 2 and len(params[0].devices()) == 1
    cli.main(["eval", run_dir, "--episodes", "4"])
    out = capsys.readouterr().out
    assert "seed 0: return" in out and "seed 1: return" in out
