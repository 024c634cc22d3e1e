"""`jaxrl sweep`: parsing, members equal to standalone runs, resume, summary, bad input."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil

import jax
import numpy as np
import pytest

from jaxrl import configs
from jaxrl.agents import PPOConfig
from jaxrl.run import checkpoint, cli, runner, sweep, sweep_spec
from tests.tree_helpers import assert_trees_equal

HP = ("learning_rate", "gamma", "entropy_cost")
STATIC = ("num_minibatches", "policy_hidden")


def test_grid_is_the_cartesian_product_times_seeds():
    grid = sweep_spec.parse_grid(["ppo.learning_rate=1e-4,3e-4", "gamma=0.9,0.99,0.999"], "ppo",
                                 HP, STATIC)
    assert grid == {"learning_rate": [1e-4, 3e-4], "gamma": [0.9, 0.99, 0.999]}
    points = sweep_spec.points(grid, {}, 0, 0)
    assert len(points) == 6 and points[1] == {"learning_rate": 1e-4, "gamma": 0.99}
    members = sweep_spec.members(points, [5, 6])
    assert [m.index for m in members] == list(range(12))
    assert [(m.point, m.seed) for m in members[:3]] == [(0, 5), (0, 6), (1, 5)]
    assert members[3].name == "m003_learning_rate=0.0001_gamma=0.99_seed=6"
    assert len({m.name for m in members}) == 12


def test_random_search_is_reproducible_and_in_range():
    spec = sweep_spec.parse_random(["ppo.learning-rate=loguniform:1e-5:1e-3",
                                    "gamma=uniform:0.9:0.99"], "ppo", HP, STATIC)
    assert spec == {"learning_rate": ("loguniform", 1e-5, 1e-3), "gamma": ("uniform", 0.9, 0.99)}
    a, b = sweep_spec.points({}, spec, 16, 3), sweep_spec.points({}, spec, 16, 3)
    assert a == b and a != sweep_spec.points({}, spec, 16, 4)
    lrs = np.log10([p["learning_rate"] for p in a])
    assert lrs.min() >= -5 and lrs.max() <= -3 and lrs.max() - lrs.min() > 0.5  # log-spread
    assert all(0.9 <= p["gamma"] <= 0.99 for p in a)
    with_grid = sweep_spec.points({"entropy_cost": [0.0, 0.01]}, spec, 3, 0)
    assert [p["entropy_cost"] for p in with_grid] == [0.0] * 3 + [0.01] * 3


@pytest.mark.parametrize("item, message", [
    ("ppo.num_minibatches=4,8", "static field"),
    ("ppo.learning_rat=1e-3", "Did you mean learning_rate"),
    ("sac.learning_rate=1e-3", "names group 'sac'"),
    ("ppo.learning_rate=1e-3,nan", "not finite"),
    ("ppo.learning_rate=1e-3,x", "not a number"),
    ("ppo.learning_rate=", "lists no values"),
    ("learning_rate", "NAME=VALUES"),
])
def test_bad_grid_items_are_clear_errors(item, message):
    with pytest.raises(ValueError, match=message):
        sweep_spec.parse_grid([item], "ppo", HP, STATIC)


@pytest.mark.parametrize("item, message", [
    ("ppo.learning_rate=normal:0:1", "uniform:LOW:HIGH"),
    ("ppo.learning_rate=loguniform:0:1", "LOW > 0"),
    ("ppo.gamma=uniform:0.99:0.9", "LOW <= HIGH"),
])
def test_bad_random_items_are_clear_errors(item, message):
    with pytest.raises(ValueError, match=message):
        sweep_spec.parse_random([item], "ppo", HP, STATIC)


def test_cli_bad_input_fails_before_compiling(tmp_path):
    base = ["sweep", "--preset", "ppo-toy-cpu", "--sweep-dir", str(tmp_path / "s")]
    for extra, message in (
        (["--grid", "ppo.num_minibatches=4,8"], "static field"),
        (["--grid", "ppo.learning_rate=1e-3", "--random", "ppo.learning_rate=uniform:0:1"],
         "in both --grid and --random"),
        (["--grid", "ppo.learning_rate=2.0"], "outside"),  # out of HP_RANGES
        (["--grid", "ppo.gamma=0.9", "--num-devices", "3"], "does not divide num_envs"),
        (["--run-dir", str(tmp_path / "r")], "names its output folder with --sweep-dir"),
        (["--grid", "ppo.gamma=0.9,0.99", "--grid", "ppo.learning_rate=1e-3,3e-3"],
         "--grid is given twice"),
    ):
        with pytest.raises(SystemExit) as exit_:
            cli.main(base + extra)
        assert message in str(exit_.value.code), (extra, exit_.value.code)
    assert not (tmp_path / "s" / "members").exists()
    with pytest.raises(SystemExit) as exit_:
        cli.main(["sweep", "--resume", str(tmp_path / "nothing"), "--num-seeds", "2"])
    assert "drop --num-seeds" in str(exit_.value.code)


def test_sweep_help_is_its_own(capsys):
    with pytest.raises(SystemExit):
        cli.main(["sweep", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--run-dir" not in text and "--sweep-dir" in text
    assert "Continue the sweep in this sweep dir" in text
    assert "Continue the run in this folder" not in text


def test_sweep_stops_at_max_train_seconds(tmp_path, capsys):
    sweep_dir = str(tmp_path / "timed")
    cli.main(["sweep", "--preset", "ppo-toy-cpu", "--num-seeds", "2", "--num-chunks", "3",
              "--total-env-steps", "3072", "--num-eval-envs", "2", "--max-train-seconds",
              "1e-6", "--sweep-dir", sweep_dir, "--no-progress"])
    assert "reached after chunk 1 of 3" in capsys.readouterr().err
    points, rows = _summary_tables(sweep_dir)
    assert len(rows) == 2
    for name in os.listdir(os.path.join(sweep_dir, "members")):
        recs = [json.loads(x) for x in open(os.path.join(sweep_dir, "members", name,
                                                         "metrics.jsonl"))]
        assert [r["chunk"] for r in recs] == [1] and "eval/episode_return" in recs[0]


def test_sweep_programs_are_stored_and_a_resume_loads_them(tmp_path, monkeypatch, capsys):
    """A sweep stores its compiled programs; the same sweep again loads them, and a resume
    loads them without building the env, ending as the uninterrupted sweep."""
    store = str(tmp_path / "store")
    preset = configs.get("ppo-toy-cpu")
    cfg = dataclasses.replace(preset.train, num_envs=16, unroll_length=8, num_chunks=3,
                              total_env_steps=3 * 16 * 8, num_eval_envs=2)
    agent_cfg = preset.agent_config
    members = sweep_spec.members(sweep_spec.points({"learning_rate": [1e-3, 3e-3]}, {}, 0, 0),
                                 [0])
    first = str(tmp_path / "first")
    sweep.run_sweep("ppo", "PointMass1D", cfg, agent_cfg, members, first, False, programs=store)
    assert "compiling 2 members" in capsys.readouterr().err and len(os.listdir(store)) == 1
    again = str(tmp_path / "again")
    sweep.run_sweep("ppo", "PointMass1D", cfg, agent_cfg, members, again, False, programs=store)
    assert "loaded in" in capsys.readouterr().err
    assert _summary_tables(again) == _summary_tables(first)
    for mem in members:  # killed after chunk 1
        for chunk in (2, 3):
            shutil.rmtree(os.path.join(sweep.member_dir(again, mem), "checkpoints", str(chunk)))
    os.remove(os.path.join(again, "summary.json"))

    def no_env(*args, **kwargs):
        raise AssertionError("the env was built: the stored programs were not used")

    monkeypatch.setattr(sweep, "build", no_env)
    sweep.resume_sweep(again, progress=False, programs=store)
    assert "loaded in" in capsys.readouterr().err
    assert _summary_tables(again) == _summary_tables(first)
    for mem in members:
        assert_trees_equal(checkpoint.load_run(sweep.member_dir(first, mem)).runner,
                           checkpoint.load_run(sweep.member_dir(again, mem)).runner)


def _summary_tables(sweep_dir):
    with open(os.path.join(sweep_dir, "summary.json")) as f:
        summary = json.load(f)
    return summary["points"], summary["members"]


@pytest.mark.slow  # two small PPO compiles (the 4-member sweep and one member alone)
def test_sweep_members_equal_standalone_runs_and_resume_is_exact(tmp_path, capsys):
    sweep_dir = str(tmp_path / "sweep")
    cli.main(["sweep", "--preset", "ppo-toy-cpu", "--grid", "ppo.learning_rate=1e-3,3e-3",
              "--num-seeds", "2", "--seed", "4", "--num-chunks", "3", "--total-env-steps",
              "6144", "--sweep-dir", sweep_dir, "--no-progress"])
    out = capsys.readouterr().out
    assert "done: 4 members" in out and "| learning_rate | seeds |" in out
    with open(os.path.join(sweep_dir, "sweep.json")) as f:
        members = [sweep_spec.Member(**m) for m in json.load(f)["members"]]
    assert [(m.seed, m.values["learning_rate"]) for m in members] == [
        (4, 1e-3), (5, 1e-3), (4, 3e-3), (5, 3e-3)]
    for name in ("summary.md", "summary.csv", "summary.png"):
        assert os.path.getsize(os.path.join(sweep_dir, name)) > 0
    points, rows = _summary_tables(sweep_dir)
    assert [p["num_seeds"] for p in points] == [2, 2]
    for p in points:  # mean and spread over the point's seeds, from the member rows
        finals = [r["final"] for r in rows if r["point"] == p["point"]]
        assert math.isclose(p["final_mean"], float(np.mean(finals)), rel_tol=1e-9)
        assert math.isclose(p["final_std"], float(np.std(finals)), rel_tol=1e-9, abs_tol=1e-12)
    # Member 3 (seed 5, learning rate 3e-3) is `jaxrl train --seed 5 --ppo.learning-rate 3e-3`.
    m = members[3]
    loaded = checkpoint.load_run(sweep.member_dir(sweep_dir, m))
    assert loaded.run.seed == 5 and loaded.cfg.num_seeds == 1
    assert loaded.agent_config.learning_rate == 3e-3
    alone = runner.train(loaded.agent_name, loaded.env_name, loaded.cfg, loaded.agent_config,
                         progress=False, run=loaded.run)
    member_params = jax.tree.leaves(loaded.runner.agent_state.params)
    for a, b in zip(jax.tree.leaves(alone.runner.agent_state.params), member_params, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-5, rtol=0)
    recs = [json.loads(x) for x in open(os.path.join(sweep.member_dir(sweep_dir, m),
                                                     "metrics.jsonl"))]
    assert [r["env_steps"] for r in recs] == [r["env_steps"] for r in alone.records]
    for r, s in zip(recs, alone.records, strict=True):
        assert abs(r["eval/episode_return"] - s["eval/episode_return"]) < 1e-3
    # Killed after chunk 1 (member 0 also saved chunk 2): resume gives the same summary.
    cut = str(tmp_path / "cut")
    shutil.copytree(sweep_dir, cut)
    for n, mem in enumerate(members):
        for chunk in ((3,) if n == 0 else (2, 3)):
            shutil.rmtree(os.path.join(sweep.member_dir(cut, mem), "checkpoints", str(chunk)))
    for name in ("summary.json", "summary.md"):
        os.remove(os.path.join(cut, name))
    resumed = sweep.resume_sweep(cut, progress=False)
    assert _summary_tables(cut) == _summary_tables(sweep_dir)
    straight = checkpoint.load_run(sweep.member_dir(sweep_dir, members[2]))
    again = checkpoint.load_run(sweep.member_dir(cut, members[2]))
    assert_trees_equal(straight.runner, again.runner)
    assert len(resumed.records[0]) == 3
    with pytest.raises(checkpoint.CheckpointError, match="already finished"):
        sweep.resume_sweep(cut, progress=False)
    with pytest.raises(checkpoint.CheckpointError, match="already holds a sweep"):
        p = configs.get("ppo-toy-cpu")
        sweep.run_sweep("ppo", "PointMass1D", dataclasses.replace(p.train), PPOConfig(),
                        members, cut)
