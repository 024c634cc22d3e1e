"""`max_train_seconds`: a wall-clock budget ends the run after the chunk that reaches it; that
chunk is evaluated and saved like a last chunk (PQL's `max_time`)."""

import dataclasses
import json
import os

import pytest

from jaxrl import configs
from jaxrl.engine import loop
from jaxrl.run import checkpoint, cli, runner

PRESET = configs.get("ppo-toy-cpu")
CFG = dataclasses.replace(PRESET.train, num_envs=16, unroll_length=8, total_env_steps=4 * 128,
                          num_chunks=4, num_eval_envs=4)


def test_budget_stops_after_the_chunk_that_reaches_it(tmp_path, capsys):
    run_dir = str(tmp_path / "run")
    result = runner.train("ppo", "PointMass1D", CFG, PRESET.agent_config,
                          run_dir=run_dir, progress=False,
                          run=loop.RunConfig(max_train_seconds=1e-6))
    assert [r["chunk"] for r in result.records] == [1]
    assert "eval/episode_return" in result.records[0]
    assert result.env_steps == 128
    assert checkpoint.existing_steps(run_dir) == [1]
    assert os.path.exists(os.path.join(run_dir, "final_params"))
    summary = json.load(open(os.path.join(run_dir, "summary.json")))
    assert summary["env_steps"] == 128
    assert "max_train_seconds (1e-06 s) reached after chunk 1 of 4" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["0", "nan"])
def test_bad_budget_is_rejected_before_compiling(value, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["train", "--preset", "ppo-toy-cpu", "--max-train-seconds", value,
                  "--no-progress"])
    assert "max_train_seconds must be positive and finite" in str(exc.value.code)
