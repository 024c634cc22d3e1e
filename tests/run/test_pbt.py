"""`jaxrl sweep --pbt`: truncation selection, explore, the round on real agent states, lineage,
exact resume, key independence, bad input before compiling."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import configs
from jaxrl.run import checkpoint, cli, pbt, pbt_report, sweep, sweep_spec
from jaxrl.run.assemble import build
from tests.tree_helpers import assert_trees_equal


def test_truncation_selection_by_hand():
    key = jax.random.PRNGKey(0)
    # n = 1: the NaN member is the worst and copies the best (member 1).
    parent = pbt.select_parents(jnp.asarray([1.0, 5.0, jnp.nan, 2.0]), key, 1)
    assert parent.tolist() == [0, 1, 1, 3]
    # n = 2: members 0 and 4 (scores 1, 0) copy one of the two best (1, 5); ties keep order.
    scores = jnp.asarray([1.0, 5.0, 3.0, 2.0, 0.0, 4.0])
    for k in range(8):
        parent = pbt.select_parents(scores, jax.random.PRNGKey(k), 2).tolist()
        assert [parent[i] for i in (1, 2, 3, 5)] == [1, 2, 3, 5]
        assert parent[0] in (1, 5) and parent[4] in (1, 5)
    assert pbt.select_parents(jnp.asarray([2.0, 2.0, 2.0]), key, 1).tolist() == [0, 1, 0]
    assert [pbt.num_copied(s, f) for s, f in ((2, 0.25), (8, 0.25), (10, 0.5), (7, 0.3))] == \
        [1, 2, 5, 2]


def test_explore_perturbs_resamples_and_clips():
    space = {"learning_rate": pbt.Dim(1e-4, 1e-2, log=True),
             "gamma": pbt.Dim(0.9, 0.99, values=(0.9, 0.95, 0.99))}
    old = {"learning_rate": jnp.asarray([1e-3, 1e-3, 1e-2, 1e-3]),
           "gamma": jnp.asarray([0.95, 0.95, 0.95, 0.99]), "tau": jnp.full((4,), 0.5)}
    copied = jnp.asarray([True, True, True, False])
    cfg = pbt.PBTConfig(resample_probability=0.0)
    new = pbt.explore(old, copied, space, cfg, jax.random.PRNGKey(0))
    factors = set()
    for i in range(3):  # x0.8 or x1.25 of the old value, then clipped to the range
        for name, (lo, hi) in (("learning_rate", (1e-4, 1e-2)), ("gamma", (0.9, 0.99))):
            o, v = float(old[name][i]), float(new[name][i])
            hits = [f for f in (0.8, 1.25) if math.isclose(v, min(max(o * f, lo), hi),
                                                           rel_tol=1e-6)]
            assert hits, (name, i, v)
            factors.update(hits)
    assert factors == {0.8, 1.25}  # both factors drawn
    assert new["learning_rate"][3] == old["learning_rate"][3]  # not copied: kept
    assert new["gamma"][3] == old["gamma"][3]
    assert new["tau"] is old["tau"]  # not searched
    draws = pbt.explore({k: jnp.repeat(v[:1], 512) for k, v in old.items()}, jnp.ones(512, bool),
                        space, dataclasses.replace(cfg, resample_probability=1.0),
                        jax.random.PRNGKey(4))
    lrs = np.log10(np.asarray(draws["learning_rate"]))
    assert lrs.min() >= -4 - 1e-6 and lrs.max() <= -2 + 1e-6 and lrs.std() > 0.4  # log-uniform
    assert set(np.asarray(draws["gamma"]).tolist()) == set(np.float32([0.9, 0.95, 0.99]).tolist())
    # The range is also cut to the agent's HP_RANGES.
    cut = pbt.search_space({"gamma": [0.5, 1.5]}, {"tau": ("uniform", -1.0, 0.5)},
                           {"gamma": (0.0, 1.0), "tau": (0.0, 1.0)})
    assert (cut["gamma"].low, cut["gamma"].high, cut["tau"].low) == (0.5, 1.0, 0.0)


def _stacked_state(preset, num_members, **train):
    p = configs.get(preset)
    cfg = dataclasses.replace(p.train, num_seeds=num_members, **train)
    agent, env, spec = build(p.agent, p.env, cfg, p.agent_config)
    from jaxrl.engine import loop, parallel

    init, chunk = loop.make_train(agent, env)
    keys = jnp.stack([jax.random.PRNGKey(s) for s in range(num_members)])
    hps = {k: jnp.full((num_members,), v, jnp.float32) for k, v in agent.default_hp().items()}
    state = jax.jit(parallel.member_map(init))(keys, hps)
    state, _ = jax.jit(parallel.member_map(chunk))(state)  # a buffer with data, a moved policy
    return agent, state


def _member(tree, i):
    return jax.tree.map(lambda x: x[i], tree)


@pytest.mark.parametrize("replay", ["copy", "keep"])
def test_round_copies_the_whole_agent_state_and_keeps_keys(replay):
    """SAC (off-policy, a replay buffer): the worst member gets the best one's parameters,
    optimizer, target critic, normalizers and buffer (`keep`: its own buffer); env state and PRNG
    key stay its own; others are untouched; only the copied member's hp moves."""
    agent, state = _stacked_state("sac-toy-cpu", 4, num_envs=8, total_env_steps=1024)
    space = {"learning_rate": pbt.Dim(1e-4, 1e-2, True), "tau": pbt.Dim(0.01, 0.1)}
    cfg = pbt.PBTConfig(replay=replay)
    new, parent, hp = jax.jit(pbt.make_round(agent, space, cfg, 4))(
        state, jnp.asarray([3.0, 1.0, 4.0, 2.0]), pbt.round_key(0, 1))
    assert parent.tolist() == [0, 2, 2, 3]
    child, src = _member(new.agent_state, 1), _member(state.agent_state, 2)
    for field in ("params", "target_critic", "opt_state", "log_alpha", "obs_stats",
                  "reward_stats", "num_updates"):
        assert_trees_equal(getattr(child, field), getattr(src, field))
    own = _member(state.agent_state, 1)
    assert_trees_equal(child.buffer, src.buffer if replay == "copy" else own.buffer)
    assert not np.array_equal(np.asarray(jax.tree.leaves(src.buffer.data)[0]),
                              np.asarray(jax.tree.leaves(own.buffer.data)[0]))
    for i in (0, 2, 3):
        assert_trees_equal(_member(new.agent_state, i), _member(state.agent_state, i))
    assert_trees_equal(new.env_state, state.env_state)
    assert_trees_equal(new.key, state.key)
    assert len({tuple(np.asarray(k).tolist()) for k in new.key}) == 4  # no two share a key
    lr, tau = float(new.agent_state.hp["learning_rate"][1]), float(new.agent_state.hp["tau"][1])
    lo, hi = np.float32([0.01, 0.1])
    assert lr != float(src.hp["learning_rate"]) and 1e-4 <= lr <= 1e-2 and lo <= tau <= hi
    assert float(hp["learning_rate"][1]) == lr


def test_on_policy_learning_rate_follows_the_new_value():
    """PPO without annealing keeps its step size in `learning_rate`: `with_hp` moves it too."""
    agent, state = _stacked_state("ppo-toy-cpu", 2, num_envs=16, total_env_steps=1024)
    assert not agent.config.anneal_lr and agent.config.desired_kl is None
    one = _member(state.agent_state, 0)
    moved = agent.with_hp(one, {"learning_rate": jnp.float32(1e-4)})
    assert float(moved.learning_rate) == pytest.approx(1e-4) and float(moved.hp["gamma"]) == \
        float(one.hp["gamma"])
    adapted = one.replace(learning_rate=one.learning_rate * 2)  # as desired_kl would
    scaled = agent.with_hp(adapted, {"learning_rate": one.hp["learning_rate"] * 0.5})
    assert float(scaled.learning_rate) == pytest.approx(float(one.learning_rate))


def _pbt_argv(sweep_dir, *extra):
    return ["sweep", "--preset", "ppo-toy-cpu", "--random",
            "ppo.learning_rate=loguniform:1e-4:1e-2", "--num-samples", "4", "--pbt",
            "--pbt-interval", "1", "--num-chunks", "4", "--total-env-steps", "8192",
            "--num-eval-envs", "8", "--sweep-dir", str(sweep_dir), "--no-progress", *extra]


def test_cli_pbt_sweep_lineage_summary_resume_and_eval(tmp_path, capsys):
    sweep_dir = tmp_path / "pbt"
    cli.main(_pbt_argv(sweep_dir))
    captured = capsys.readouterr()
    assert captured.err.count("PBT after chunk") == 3  # rounds after chunks 1-3, not the last
    assert "PBT: best final member" in captured.out
    rows = pbt.read_lineage(str(sweep_dir))
    assert [r["chunk"] for r in rows] == [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4
    spec = json.loads((sweep_dir / "sweep.json").read_text())
    members = [sweep_spec.Member(**m) for m in spec["members"]]
    assert spec["pbt"]["interval"] == 1 and "learning_rate" in spec["search"]["random"]
    for r in rows:
        assert 1e-4 <= r["hp"]["learning_rate"] <= 1e-2
        assert r["copied"] == (r["parent"] != r["member"])
    # A copy at chunk c: the child's checkpointed state (saved after the round) holds its
    # parent's parameters, and its hp is the logged value.
    copies = [r for r in rows if r["copied"] and r["chunk"] == 3]
    assert len(copies) == 1
    c = copies[0]
    child = checkpoint.load_run(sweep.member_dir(str(sweep_dir), members[c["member"]]), chunk=3)
    par = checkpoint.load_run(sweep.member_dir(str(sweep_dir), members[c["parent"]]), chunk=3)
    assert_trees_equal(child.runner.agent_state.params, par.runner.agent_state.params)
    assert float(child.runner.agent_state.hp["learning_rate"][0]) == pytest.approx(
        c["hp"]["learning_rate"], rel=1e-6)
    keys = [checkpoint.load_run(sweep.member_dir(str(sweep_dir), m)).runner.key for m in members]
    assert len({tuple(np.asarray(k).ravel().tolist()) for k in keys}) == 4
    summary = json.loads((sweep_dir / "summary.json").read_text())["pbt"]
    finals = [json.loads((sweep_dir / "members" / m.name / "summary.json").read_text())
              ["final"]["eval/episode_return"] for m in members]
    assert summary["best"] == members[int(np.argmax(finals))].name
    assert summary["schedule"] == pbt.schedule(rows, summary["best_index"])
    assert summary["schedule"][0]["chunk"] == 0 and summary["rounds"] == 3
    assert os.path.getsize(sweep_dir / pbt_report.FIGURE) > 10_000
    # `jaxrl eval` and `jaxrl export` work on the best member's run dir.
    best = str(sweep_dir / "members" / summary["best"])
    cli.main(["eval", best, "--episodes", "4"])
    assert "return" in capsys.readouterr().out
    cli.main(["export", best, "--out", str(tmp_path / "best.onnx")])
    assert os.path.getsize(tmp_path / "best.onnx") > 0
    # Killed after chunk 2 (later lineage rows already written): the resume repeats rounds
    # 2-3 exactly.
    cut = tmp_path / "cut"
    shutil.copytree(sweep_dir, cut)
    for m in members:
        for chunk in (3, 4):
            shutil.rmtree(os.path.join(sweep.member_dir(str(cut), m), "checkpoints", str(chunk)))
    os.remove(cut / "summary.json")
    capsys.readouterr()
    cli.main(["sweep", "--resume", str(cut), "--no-progress"])
    assert capsys.readouterr().err.count("PBT after chunk") == 1
    assert pbt.read_lineage(str(cut)) == rows
    for m in members:
        assert_trees_equal(checkpoint.load_run(sweep.member_dir(str(sweep_dir), m)).runner,
                           checkpoint.load_run(sweep.member_dir(str(cut), m)).runner)
    assert json.loads((cut / "summary.json").read_text())["pbt"] == summary


def test_pbt_through_the_api_on_one_device_matches_the_cli(tmp_path, capsys):
    """The API sweep in this process (one device) takes the same decisions as the CLI, which
    spreads the 4 members over 4 CPU devices (members sharded as in a grid sweep)."""
    import subprocess
    import sys

    import jaxrl

    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    proc = subprocess.run([sys.executable, "-m", "jaxrl.run.cli", *_pbt_argv(tmp_path / "cli")],
                          capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "members on 4 device(s)" in proc.stderr
    result = jaxrl.sweep("ppo-toy-cpu", sweep_dir=str(tmp_path / "api"),
                         random={"learning_rate": ("loguniform", 1e-4, 1e-2)}, num_samples=4,
                         num_chunks=4, total_env_steps=8192, num_eval_envs=8,
                         pbt=jaxrl.PBTConfig(interval=1))
    rows = pbt.read_lineage(str(tmp_path / "cli"))
    assert [(r["chunk"], r["parent"]) for r in result.lineage] == \
        [(r["chunk"], r["parent"]) for r in rows]
    for a, b in zip(result.lineage, rows, strict=True):
        assert a["hp"]["learning_rate"] == pytest.approx(b["hp"]["learning_rate"], rel=1e-6)
    assert result.summary["pbt"]["best"] in {r["name"] for r in rows}


@pytest.mark.parametrize("extra, message", [
    (["--num-samples", "1"], "at least 2 members"),
    (["--pbt-fraction", "0"], "--pbt-fraction (PBTConfig.fraction) must be in (0, 0.5]"),
    (["--pbt-fraction", "0.75"], "--pbt-fraction (PBTConfig.fraction) must be in (0, 0.5]"),
    (["--pbt-metric", "eval/episode_retrun"], "Did you mean eval/episode_return"),
    (["--pbt-metric", "train/learning_rate"], "Choose one of: eval/episode_return"),
    (["--num-eval-envs", "0"], "needs evaluation"),
    (["--pbt-replay", "share"], "--pbt-replay (PBTConfig.replay) must be one of copy, keep"),
    (["--pbt-perturb", "0.8", "-1"], "two positive factors"),
    (["--pbt-interval", "0"], "must be in [1, num_chunks), got 0 with 4 chunks"),
    (["--pbt-interval", "4"], "must be in [1, num_chunks), got 4 with 4 chunks"),
    (["--eval-every", "2"], "--pbt-interval 1 is not a multiple of --eval-every 2"),
])
def test_bad_pbt_input_is_one_line_before_compiling(tmp_path, capsys, extra, message):
    with pytest.raises(SystemExit) as exit_:
        cli.main(_pbt_argv(tmp_path / "s", *extra))
    text = str(exit_.value.code)
    assert text.startswith("error: ") and message in text and "\n" not in text, text
    assert not (tmp_path / "s").exists() and "compiling" not in capsys.readouterr().err


def test_pbt_needs_a_search_space_and_running_hyperparameters(tmp_path):
    base = ["sweep", "--pbt", "--sweep-dir", str(tmp_path / "s"), "--no-progress"]
    for argv, message in (
        (["--preset", "ppo-toy-cpu", "--num-seeds", "4"], "give at least one --grid"),
        (["--preset", "sac-toy-cpu", "--grid", "sac.init_alpha=0.1,1.0"],
         "sac.init_alpha is read only when the state is made"),
        (["--preset", "ppo-toy-cpu", "--grid", "ppo.num_epochs=2,4"], "static field"),
        (["--preset", "ppo-toy-cpu", "--num-samples", "4"], "give at least one --grid"),
    ):
        with pytest.raises(SystemExit) as exit_:
            cli.main(base + argv)
        assert message in str(exit_.value.code), (argv, exit_.value.code)
    assert not (tmp_path / "s").exists()
    with pytest.raises(SystemExit) as exit_:  # a PBT flag without --pbt
        cli.main(["sweep", "--preset", "ppo-toy-cpu", "--grid", "ppo.gamma=0.9,0.99",
                  "--pbt-interval", "2", "--sweep-dir", str(tmp_path / "s")])
    assert str(exit_.value.code) == "error: --pbt-interval sets population-based training: " \
        "add --pbt."


def test_rounds_rank_by_fresh_scores_and_skip_without_any():
    records = [[{"chunk": 1, "episode/return": 5.0}, {"chunk": 2, "episode/return": math.nan}],
               [{"chunk": 1, "episode/return": 3.0}, {"chunk": 2, "episode/return": 4.0}]]
    assert pbt.latest(records[0], "episode/return") == 5.0  # the final value, any time
    assert math.isnan(pbt.latest(records[0], "episode/return", since=1))  # none since chunk 1
    assert pbt.latest(records[1], "episode/return", since=1) == 4.0
    population = pbt.Population(None, pbt.PBTConfig(interval=1, metric="episode/return"),
                                {"gamma": pbt.Dim(0.9, 0.99)}, ["a", "b"], "/nonexistent", False)
    nothing = [[{"chunk": 1}, {"chunk": 2}], [{"chunk": 1}, {"chunk": 2}]]
    state, line = population.step("the state", nothing, 2, 100)
    assert state == "the state" and line == ("PBT after chunk 2: skipped, no member logged "
                                             "episode/return since chunk 1")


def test_off_policy_pbt_sweep_keeps_its_buffers(tmp_path):
    """SAC with `replay="keep"`: a member that copied keeps filling its own buffer, so the
    buffers stay apart while the parameters were copied."""
    import jaxrl

    result = jaxrl.sweep("sac-toy-cpu", sweep_dir=str(tmp_path / "sac"),
                         grid={"tau": [0.01, 0.05]}, seeds=[0, 1], num_chunks=3,
                         pbt=jaxrl.PBTConfig(interval=1, replay="keep", fraction=0.5))
    rows = result.lineage
    assert [r["chunk"] for r in rows] == [0] * 4 + [1] * 4 + [2] * 4
    assert sum(r["copied"] for r in rows if r["chunk"] == 1) == 2
    buffers = result.runner.agent_state.buffer.data
    first = np.asarray(jax.tree.leaves(buffers)[0])
    assert len({first[i].tobytes() for i in range(4)}) == 4
    assert result.summary["pbt"]["best"] in {r["name"] for r in rows}


@pytest.mark.slow  # two sweep processes (one killed with SIGKILL) and a resume
def test_kill_9_then_resume_gives_the_same_lineage_and_params(tmp_path):
    """A real `kill -9` in the middle of a PBT sweep (mid-chunk, possibly mid-write), then
    `jaxrl sweep --resume`: the lineage and every member's final state equal the
    uninterrupted sweep's."""
    import signal
    import subprocess
    import sys
    import time

    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    argv = ["sweep", "--preset", "ppo-toy-cpu", "--random",
            "ppo.learning_rate=loguniform:1e-4:1e-2", "--num-samples", "4", "--pbt",
            "--pbt-interval", "2", "--num-chunks", "12", "--total-env-steps", "600000",
            "--num-eval-envs", "8", "--no-progress"]

    def sweep_cli(*extra, wait=True):
        cmd = [sys.executable, "-m", "jaxrl.run.cli", *extra]
        if not wait:
            return subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
        proc = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc

    straight, killed = tmp_path / "straight", tmp_path / "killed"
    sweep_cli(*argv, "--sweep-dir", str(straight))
    proc = sweep_cli(*argv, "--sweep-dir", str(killed), wait=False)
    first = killed / "members"
    deadline = time.time() + 300
    while time.time() < deadline:  # kill once some member saved chunk 5 (rounds at 2 and 4)
        if first.exists() and any((d / "checkpoints" / "5").exists() for d in first.iterdir()):
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not (killed / "summary.json").exists()  # it did not finish
    sweep_cli("sweep", "--resume", str(killed), "--no-progress")
    assert pbt.read_lineage(str(killed)) == pbt.read_lineage(str(straight))
    spec = json.loads((straight / "sweep.json").read_text())
    for m in (sweep_spec.Member(**x) for x in spec["members"]):
        assert_trees_equal(checkpoint.load_run(sweep.member_dir(str(straight), m)).runner,
                           checkpoint.load_run(sweep.member_dir(str(killed), m)).runner)


def test_a_time_budget_stop_keeps_its_round_and_a_resume_may_extend_it(tmp_path, capsys):
    sweep_dir = tmp_path / "timed"
    argv = _pbt_argv(sweep_dir)
    argv[argv.index("--num-chunks") + 1] = "3"
    cli.main(argv + ["--max-train-seconds", "1e-6"])
    err = capsys.readouterr().err
    assert "PBT after chunk 1" in err and "reached after chunk 1 of 3" in err
    assert [r["chunk"] for r in pbt.read_lineage(str(sweep_dir))] == [0] * 4 + [1] * 4
    cli.main(["sweep", "--resume", str(sweep_dir), "--max-train-seconds", "1000",
              "--no-progress"])
    assert "PBT after chunk 2" in capsys.readouterr().err
    assert [r["chunk"] for r in pbt.read_lineage(str(sweep_dir))] == [0] * 4 + [1] * 4 + [2] * 4
    spec = json.loads((sweep_dir / "sweep.json").read_text())
    assert spec["run"]["max_train_seconds"] == 1000
    summary = json.loads((sweep_dir / "summary.json").read_text())
    # All 3 chunks (3 iterations of 64 envs x 16 steps each) trained.
    assert summary["pbt"]["rounds"] == 2 and summary["members"][0]["env_steps"] == 3 * 3072
    best = json.loads((sweep_dir / "members" / summary["pbt"]["best"] / "summary.json")
                      .read_text())
    assert best["hp"]["learning_rate"] == pytest.approx(
        summary["pbt"]["schedule"][-1]["hp"]["learning_rate"], rel=1e-6)
