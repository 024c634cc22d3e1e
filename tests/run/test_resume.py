"""Resume beyond the plain case: stored programs, training on, broken checkpoints.

One PPO run on the toy env is interrupted after chunk 2 of 4 (its programs stored) and
compared with a straight 6-chunk run: resumed from the store it must match the straight run's
first 4 chunks without building the env, and trained on to 6 chunks it must match the straight
run bit for bit (PPO's toy preset has no schedule over the run's length).
"""

import dataclasses
import json
import os
import shutil
import signal
import types

import numpy as np
import pytest
from test_checkpoint import (
    AGENT_CFG,
    CFG,
    CLI_FLAGS,
    _corrupt,
    _interrupt_after,
    _records,
    _same_records,
    _snapshot,
)
from tree_helpers import assert_trees_equal

from jaxrl.run import checkpoint, cli, restore, runner

PER_CHUNK = CFG.num_envs * CFG.unroll_length
CFG6 = dataclasses.replace(CFG, total_env_steps=6 * PER_CHUNK, num_chunks=6)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("resume")
    store = str(tmp / "store")
    straight = runner.train("ppo", "PointMass1D", CFG6, AGENT_CFG, str(tmp / "straight"),
                            progress=False)
    killed = str(tmp / "killed")
    with pytest.MonkeyPatch.context() as mp:
        _interrupt_after(mp, 2, signal.SIGINT)
        with pytest.raises(runner.TrainingInterrupted):
            runner.train("ppo", "PointMass1D", CFG, AGENT_CFG, killed, progress=False,
                         programs=store)
    assert len(os.listdir(store)) == 1  # init, chunk and evaluator of the 4-chunk config
    return types.SimpleNamespace(straight=straight, killed=killed, store=store, tmp=tmp)


def _copy(base, name):
    path = str(base.tmp / name)
    shutil.copytree(base.killed, path)
    return path


def test_resume_loads_stored_programs_then_trains_on(base, monkeypatch, capsys):
    run_dir = _copy(base, "warm")

    def no_env(*args, **kwargs):
        raise AssertionError("the env was built: the stored programs were not used")

    with monkeypatch.context() as mp:
        mp.setattr(runner, "build", no_env)
        resumed = runner.resume(run_dir, progress=False, programs=base.store)
    err = capsys.readouterr().err
    assert "loaded the compiled programs in" in err and "compiled in" not in err
    assert [r["chunk"] for r in resumed.records] == [1, 2, 3, 4]
    assert _same_records(base.straight.records[:4], resumed.records)
    assert "eval/episode_return" in resumed.records[-1]

    # Finished: train on to 6 chunks through the CLI, as the straight 6-chunk run.
    cli.main(["train", "--resume", run_dir, "--total-env-steps", str(6 * PER_CHUNK - 5),
              "--no-progress"])
    assert "done: 768 env steps" in capsys.readouterr().out
    assert _records(os.path.join(run_dir, "metrics.jsonl")) == _records(
        os.path.join(base.straight.run_dir, "metrics.jsonl"))
    loaded = checkpoint.load_run(run_dir)
    assert loaded.chunk == 6 and loaded.cfg == CFG6  # 763 steps rounded up to whole chunks
    assert_trees_equal(base.straight.runner, loaded.runner)
    config = json.load(open(os.path.join(run_dir, "config.json")))
    assert config["trained_on"] == [{"total_env_steps": CFG.total_env_steps, "num_chunks": 4,
                                     "max_train_seconds": None}]


def test_train_on_stretches_the_annealed_learning_rate(tmp_path):
    agent_cfg = dataclasses.replace(AGENT_CFG, anneal_lr=True)
    run_dir = str(tmp_path / "anneal")
    first = runner.train("ppo", "PointMass1D", CFG, agent_cfg, run_dir, progress=False)
    lr = first.runner.agent_state.hp["learning_rate"][0]
    on = runner.resume(run_dir, progress=False, total_env_steps=6 * PER_CHUNK)
    got = [r["train/learning_rate"] for r in on.records]
    # One update per chunk: 4 updates over 4, then updates 4 and 5 over the new 6.
    want = [lr * (1 - u / 4) for u in range(4)] + [lr * (1 - 4 / 6), lr * (1 - 5 / 6)]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    with pytest.raises(ValueError, match="does not train on: the run's budget is already 768"):
        runner.resume(run_dir, progress=False, total_env_steps=6 * PER_CHUNK)


def test_broken_newest_checkpoint_is_moved_aside_and_the_previous_resumes(base, capsys):
    run_dir = _copy(base, "broken")
    _corrupt(run_dir)  # checkpoint 2's arrays
    garbage = _snapshot(os.path.join(run_dir, "checkpoints", "2"))
    cli.main(["train", "--resume", run_dir, "--no-progress"])
    err = capsys.readouterr().err
    moved = os.path.join(run_dir, restore.BROKEN_DIR, "2")
    assert f"warning: checkpoint {os.path.abspath(run_dir)}/checkpoints/2 cannot be read" in err
    assert f"Moved it to {moved}; resuming from chunk 1." in err
    assert _snapshot(moved) == garbage  # kept as it was, never deleted
    assert _records(os.path.join(run_dir, "metrics.jsonl")) == _records(
        os.path.join(base.straight.run_dir, "metrics.jsonl"))[:4]
    assert checkpoint.existing_steps(run_dir) == [2, 3, 4]


def test_no_readable_checkpoint_is_one_error_and_moves_nothing(base, capsys):
    run_dir = _copy(base, "all-broken")
    _corrupt(run_dir, 2)
    _corrupt(run_dir, 1)
    before = _snapshot(run_dir)
    with pytest.raises(SystemExit) as exc:
        cli.main(["train", "--resume", run_dir, "--no-progress"])
    message = str(exc.value.code)
    assert message.startswith("error: no checkpoint in") and "can be read" in message
    assert "checkpoints/2 cannot be read" in message and "checkpoints/1 cannot be read" in message
    assert "\n" not in message and "--chunk" not in message
    assert _snapshot(run_dir) == before


RESUME_REFUSALS = [
    (["--num-envs", "32"], "only --total-env-steps and --max-train-seconds may change"),
    (["--checkpoint-every", "2"], "--checkpoint-every 2 (saved: 1)"),  # a host flag too
    (["--total-env-steps", "100"], "--total-env-steps 100 does not train on"),
]


@pytest.mark.parametrize("flags,match", RESUME_REFUSALS)
def test_resume_refusals_name_the_way_on(base, flags, match, tmp_path):
    run_dir = str(tmp_path / "refused")
    shutil.copytree(base.killed, run_dir)
    before = _snapshot(run_dir)
    with pytest.raises(SystemExit) as exc:
        cli.main(["train", "--resume", run_dir, *flags])
    assert str(exc.value.code).startswith("error: ") and match in str(exc.value.code)
    assert _snapshot(run_dir) == before


def test_finished_run_says_how_to_train_on(base, tmp_path):
    run_dir = str(tmp_path / "done")
    shutil.copytree(base.straight.run_dir, run_dir)
    with pytest.raises(SystemExit) as exc:
        cli.main(["train", "--resume", run_dir, *CLI_FLAGS[-1:]])
    assert (f"already finished (chunk 6 of 6); train it on with `jaxrl train --resume {run_dir} "
            "--total-env-steps N`, N above 768.") in str(exc.value.code)


def test_config_json_from_before_run_config_resumes(base, tmp_path):
    """A run dir written before `RunConfig` (host settings inside `train`) still resumes, with
    the same result; the rewritten config.json then holds them under `run`."""
    run_dir = _copy(base, "legacy")
    path = os.path.join(run_dir, "config.json")
    config = json.load(open(path))
    config["train"].update(config.pop("run"))
    json.dump(config, open(path, "w"))
    assert checkpoint.parse_run(config) == checkpoint.parse_run(
        json.load(open(os.path.join(base.killed, "config.json"))))
    resumed = runner.resume(run_dir, progress=False, total_env_steps=6 * PER_CHUNK)
    assert_trees_equal(base.straight.runner, resumed.runner)
    rewritten = json.load(open(path))
    assert rewritten["run"]["keep_checkpoints"] == 3
    assert "keep_checkpoints" not in rewritten["train"]
