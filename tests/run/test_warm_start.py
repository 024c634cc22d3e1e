"""Warm start (`jaxrl.run.warm_start`): stored programs give the same run as compiling, never
import the simulator, survive a broken entry, and are keyed by what changes a program."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import subprocess
import sys

import jax
import numpy as np

from jaxrl import configs
from jaxrl.engine import loop
from jaxrl.envs import registry
from jaxrl.run import checkpoint, runner, warm_start
from jaxrl.run.logging import read_jsonl


@dataclasses.dataclass
class Foreign:  # a node type from outside jaxrl/JAX/flax/optax, like mjx.Data
    x: object
    y: object


jax.tree_util.register_dataclass(Foreign, data_fields=["x", "y"], meta_fields=[])


def test_skeleton_replaces_foreign_nodes_keeps_order_and_pickles():
    tree = {"b": [Foreign(1, (2, Foreign(3, 4))), None],
            "a": loop.RunState(agent_state={"w": 5}, env_state=Foreign(6, 7), key=8,
                               iteration=9)}
    leaves, treedef = jax.tree.flatten(tree)
    sk = warm_start.skeleton(treedef)
    rebuilt = jax.tree.unflatten(sk, leaves)
    assert jax.tree.leaves(rebuilt) == leaves == [5, 6, 7, 8, 9, 1, 2, 3, 4]
    assert isinstance(rebuilt["a"], loop.RunState)  # jaxrl's own types stay
    env_state = rebuilt["a"].env_state
    assert isinstance(env_state, warm_start.Opaque) and env_state.children == [6, 7]
    assert env_state.name == f"{__name__}.Foreign"
    assert pickle.loads(pickle.dumps(sk)) == sk  # stored beside the programs
    assert warm_start.skeleton(jax.tree.structure(tree)) == sk  # deterministic


def _ppo_toy(**train):
    preset = configs.get("ppo-toy-cpu")
    cfg = dataclasses.replace(preset.train, total_env_steps=4096, num_chunks=2, **train)
    return cfg, preset.agent_config


def test_program_key_covers_what_changes_a_program(monkeypatch):
    cfg, agent_cfg = _ppo_toy()
    key = warm_start.program_key("ppo", "PointMass1D", cfg, agent_cfg, None)
    assert not set(loop.RUN_FIELDS) & {f.name for f in dataclasses.fields(cfg)}  # host: apart
    changed = [
        ("ppo", "PointMass1D", dataclasses.replace(cfg, num_envs=32), agent_cfg, None),
        ("ppo", "PointMass1D", cfg, dataclasses.replace(agent_cfg, num_epochs=2), None),
        ("ppo", "PointMass1D", cfg, agent_cfg, {"learning_rate": 1e-3}),
        ("ppo", "TwoModes", cfg, agent_cfg, None),
    ]
    keys = {warm_start.program_key(*args) for args in changed}
    assert len(keys) == len(changed) and key not in keys
    monkeypatch.setitem(registry.toy.TOY_ENVS, "PointMass1D", Foreign)  # other code, same name
    assert warm_start.program_key("ppo", "PointMass1D", cfg, agent_cfg, None) != key
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=true")
    assert warm_start.program_key("ppo", "TwoModes", cfg, agent_cfg, None) not in keys
    registry.register_family("users", ("MyEnv",), lambda name, **kw: None)
    try:  # code the key cannot see: never stored
        assert warm_start.program_key("ppo", "MyEnv", cfg, agent_cfg, None) is None
    finally:
        registry.unregister_family("users")


def _train(tmp_path, name, store, run=None, **train):
    cfg, agent_cfg = _ppo_toy(**train)
    run_dir = str(tmp_path / name)
    result = runner.train("ppo", "PointMass1D", cfg, agent_cfg, run_dir, progress=False,
                          programs=store, run=run)
    return result, read_jsonl(os.path.join(run_dir, "metrics.jsonl"))


def _same_records(a, b):
    drop = ("wall_time", "perf/sps")
    return [{k: v for k, v in r.items() if k not in drop} for r in a] == \
        [{k: v for k, v in r.items() if k not in drop} for r in b]


def test_stored_programs_give_the_same_run_and_a_broken_entry_compiles(tmp_path, capsys):
    store = str(tmp_path / "store")
    cold, cold_records = _train(tmp_path, "cold", store)
    assert "compiled in" in capsys.readouterr().err
    (entry,) = os.listdir(store)
    assert sorted(os.listdir(os.path.join(store, entry))) == [
        "chunk.xla", "evaluator.xla", "init.xla", "meta.pkl"]

    warm, warm_records = _train(tmp_path, "warm", store)
    assert "loaded the compiled programs in" in capsys.readouterr().err
    assert _same_records(cold_records, warm_records) and "eval/episode_return" in warm_records[-1]
    for a, b in zip(jax.tree.leaves(cold.runner), jax.tree.leaves(warm.runner), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))  # bit for bit

    # Host settings only (RunConfig): the same programs, loaded.
    other_seed, seed_records = _train(tmp_path, "seed", store, loop.RunConfig(
        seed=3, checkpoint_every=2, keep_checkpoints=1, eval_every=2, watchdog_seconds=60.0))
    assert "loaded the compiled programs in" in capsys.readouterr().err
    assert checkpoint.existing_steps(str(tmp_path / "seed")) == [2]
    assert len(seed_records) == 2 and not np.array_equal(  # the seed is honoured
        np.asarray(jax.tree.leaves(other_seed.runner.agent_state)[0]),
        np.asarray(jax.tree.leaves(warm.runner.agent_state)[0]))

    with open(os.path.join(store, entry, "chunk.xla"), "wb") as f:
        f.write(b"not an executable")
    again, again_records = _train(tmp_path, "again", store)
    err = capsys.readouterr().err
    assert "the stored programs did not load" in err and "compiled in" in err
    assert _same_records(cold_records, again_records)
    assert os.path.getsize(os.path.join(store, entry, "chunk.xla")) > 1000  # written anew


WARM_SCRIPT = r"""
import json, sys
from jaxrl.run import cli
cli.main(sys.argv[1:])
print(json.dumps({"mjx_imported": "mujoco.mjx" in sys.modules}))
"""


def test_second_cli_run_of_an_mjx_config_never_imports_the_simulator(tmp_path):
    """`jaxrl train` twice on CartpoleBalance with one cache folder: the second run loads its
    programs, trains the same, never imports `mujoco.mjx`, and its checkpoint reads back with
    the real env state (`jaxrl eval`)."""
    env = dict(os.environ, JAXRL_COMPILE_CACHE=str(tmp_path / "cache"))
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    outs = []
    for name in ("cold", "warm"):
        argv = ["train", "--env", "CartpoleBalance", "--num-envs", "16", "--unroll-length", "8",
                "--total-env-steps", "512", "--num-chunks", "2", "--num-eval-envs", "4",
                "--episode-length", "50", "--run-dir", str(tmp_path / name), "--no-progress"]
        proc = subprocess.run([sys.executable, "-c", WARM_SCRIPT, *argv], env=env,
                              capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
        outs.append((json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr))
    (cold, cold_err), (warm, warm_err) = outs
    assert cold["mjx_imported"] and "compiled in" in cold_err
    assert not warm["mjx_imported"] and "loaded the compiled programs in" in warm_err
    records = [read_jsonl(str(tmp_path / n / "metrics.jsonl")) for n in ("cold", "warm")]
    assert _same_records(*records)
    proc = subprocess.run([sys.executable, "-m", "jaxrl.run.cli", "eval", str(tmp_path / "warm"),
                           "--episodes", "4"], env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "all:    return" in proc.stdout


def test_program_store_follows_the_compile_cache(tmp_path, monkeypatch):
    from jaxrl.run import process

    saved = {k: getattr(jax.config, k) for k in (
        "jax_enable_compilation_cache", "jax_compilation_cache_dir",
        "jax_persistent_cache_min_compile_time_secs", "jax_persistent_cache_min_entry_size_bytes")}
    monkeypatch.setenv("JAXRL_COMPILE_CACHE", str(tmp_path / "cache"))
    try:
        process.enable_compile_cache(True)
        assert process.program_store() == str(tmp_path / "cache" / warm_start.FOLDER)
        process.enable_compile_cache(False)  # --no-compile-cache
        assert process.program_store() is None
    finally:
        for k, v in saved.items():
            jax.config.update(k, v)
        process._cache_folder = None
