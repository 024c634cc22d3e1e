"""CLI: bad input fails before compiling with a useful message; a toy run writes its run dir."""

import glob
import json
import os
import subprocess
import sys

import pytest

from jaxrl import configs
from jaxrl.engine import loop
from jaxrl.run import checkpoint, cli, runner
from jaxrl.run.logging import read_jsonl


@pytest.fixture
def no_compile(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("make_train was reached: validation must fail before compiling")

    monkeypatch.setattr(loop, "make_train", boom)


def _fails(argv, capsys, match):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    err = str(exc.value.code) + capsys.readouterr().err
    assert exc.value.code not in (0, None)
    assert match in err, err


@pytest.mark.parametrize("argv,match", [
    (["train", "--agent", "ppx"], "Unknown agent 'ppx'. Did you mean: ppo"),
    (["train", "--env", "CartpoleBalanse"], "Did you mean: CartpoleBalance"),
    (["train", "--preset", "ppo-dmc-cpx"], "Unknown preset 'ppo-dmc-cpx'. Did you mean"),
    (["train", "--num-envs", "100"], "not divisible by num_minibatches = 8"),
    (["train", "--total-env-steps", "0"], "total_env_steps must be positive"),
    (["train", "--num-envs", "-4"], "num_envs must be positive"),
    (["train", "--ppo.learning-rat", "0.1"], "--ppo.learning-rate"),
    (["train", "--ppo.gae-mode", "weird"], "gae_mode must be"),
    (["trian"], "Did you mean 'train'"),
    (["train", "--sac.batch-size", "64"], "--sac.batch-size is an option of agent 'sac', but "
     "this run trains 'ppo': drop it, or train that agent with --agent sac."),
    (["train", "--agent", "sac", "--flow-sac.batch-size=64"], "--flow-sac.batch-size is an "
     "option of agent 'flow_sac'"),
    (["sweep", "--grid", "ppo.learning_rate=1e-3,3e-3", "--sac.tau", "0.1"],
     "--sac.tau is an option of agent 'sac'"),
    (["train", "--ppo.learning-rate", "nan"], "learning_rate = nan is not finite"),
    (["train", "--ppo.gamma", "1.5"], "gamma = 1.5"),
    (["train", "--checkpoint-every", "0"], "checkpoint_every must be positive"),
    (["train", "--keep-checkpoints", "0"], "keep_checkpoints must be positive"),
    (["train", "--resume", "no/such/run"], "run dir 'no/such/run' does not exist"),
    (["eval", "no/such/run"], "run dir 'no/such/run' does not exist"),
])
def test_bad_input_fails_before_compiling(argv, match, capsys, no_compile):
    _fails(argv, capsys, match)


def test_help_lists_fields_with_docstrings(capsys):
    with pytest.raises(SystemExit):
        cli.main(["train", "--help"])
    out = capsys.readouterr().out
    for text in ("--total-env-steps", "--num-envs", "--seed", "--run-dir", "--preset",
                 "--ppo.learning-rate", "Adam step size", "--ppo.gae-lambda", "--resume",
                 "--checkpoint-every", "--keep-checkpoints", "--checkpoint-replay"):
        assert text in out


def test_preset_values_become_defaults():
    args, agent, env, cfg, agent_cfg = cli.resolve(["--preset", "ppo-dmc-gpu", "--seed", "3"])
    assert (agent, env, cfg.num_envs, args.run.seed) == ("ppo", "CartpoleBalance", 2048, 3)
    assert agent_cfg.num_epochs == 16 and agent_cfg.reward_scaling == 10.0
    _, _, _, cfg, agent_cfg = cli.resolve(["--ppo.learning-rate", "3e-4"])
    assert agent_cfg.learning_rate == 3e-4 and cfg.num_envs == 256


def test_list_commands(capsys, monkeypatch):
    monkeypatch.delenv("JAXRL_MENAGERIE_PATH", raising=False)
    cli.main(["list", "envs"])
    out = capsys.readouterr().out
    assert "CartpoleBalance" in out and "ant" in out and "PointMass1D" in out
    assert "Go1Getup," in out and "*" not in out  # the robot wheels are installed
    cli.main(["list", "presets"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["preset", "agent", "env", "num_envs", "description"]
    # Columns line up however long a name is: each column starts where the header's does.
    starts = [lines[0].index(word) for word in ("agent", "env ", "description")]
    row = next(line for line in lines if line.startswith("warpsac-a-go1-flat-gpu "))
    assert [row[s - 2:s] for s in starts] == ["  "] * 3 and row[starts[0]] != " "
    assert row[starts[0]:].startswith("warpsac") and row[starts[1]:].startswith("Go1Joystick")
    assert len(lines) == 1 + len(configs.PRESETS)


def test_list_envs_marks_unavailable_envs_and_why(tmp_path, monkeypatch, capsys):
    from jaxrl.envs import assets

    monkeypatch.setattr(assets, "wheel_roots", lambda: [])  # no wheels: only the variable,
    monkeypatch.setattr(assets, "playground_root", lambda: None)  # which holds Go1 only
    (tmp_path / "unitree_go1").mkdir()
    monkeypatch.setenv("JAXRL_MENAGERIE_PATH", str(tmp_path))
    cli.main(["list", "envs"])
    lines = capsys.readouterr().out.splitlines()
    playground = next(line for line in lines if line.startswith("playground ("))
    assert "G1JoystickFlatTerrain*," in playground and "Go1Getup," in playground
    assert "CartpoleBalance," in playground and "Go1Getup*" not in playground
    assert "* unavailable here (" in lines[lines.index(playground) + 2]  # after brax
    reason = next(line for line in lines if line.startswith("  G1JoystickFlatTerrain: "))
    assert "unitree_g1" in reason and "jaxrl[robots]" in reason and "JAXRL_MENAGERIE_PATH" in reason


def test_toy_run_writes_run_dir(tmp_path, capsys):
    run_dir = str(tmp_path / "run")
    cli.main(["train", "--preset", "ppo-toy-cpu", "--run-dir", run_dir, "--no-progress",
              "--total-env-steps", "4096", "--num-chunks", "2"])
    out = capsys.readouterr()
    assert ("compiled in" in out.err or "loaded the compiled programs in" in out.err)
    assert "SPS" in out.out
    config = json.load(open(os.path.join(run_dir, "config.json")))
    assert config["env"] == "PointMass1D" and config["train"]["num_envs"] == 64
    records = read_jsonl(os.path.join(run_dir, "metrics.jsonl"))
    assert [r["chunk"] for r in records] == [1, 2]
    assert records[-1]["env_steps"] == 4096 and records[-1]["perf/sps"] > 0
    assert [r["layout"] for r in records] == ["single", "single"]  # which layout made them
    assert json.load(open(os.path.join(run_dir, "summary.json")))["layout"] == "single"
    assert "eval/episode_return" in records[-1] and "train/policy_loss" in records[-1]
    assert glob.glob(os.path.join(run_dir, "tb", "events.out.tfevents.*"))
    params = runner.load_params(os.path.join(run_dir, "final_params"))
    assert params["policy"]["params"]["Dense_0"]["kernel"].shape == (1, 2, 32)  # [seeds, in, out]
    assert checkpoint.existing_steps(run_dir) == [1, 2]  # checkpoint_every = 1


def test_list_agents_in_a_fresh_interpreter():
    """`jaxrl list agents` registers the built-in agents itself (nothing imported before)."""
    out = subprocess.run(
        [sys.executable, "-c", "from jaxrl.run.cli import main; main(['list', 'agents'])"],
        capture_output=True, text=True, check=True, timeout=300)
    lines = out.stdout.splitlines()
    assert [line.split()[0] for line in lines] == [
        "ppo", "sac", "fastdsac", "warpsac", "crl", "cppo", "pql", "fpo", "flow_sac",
        "policyflow"]
    assert "Proximal Policy Optimization" in lines[0] and "a profile of sac" in lines[3]
    assert len({line.index(line.split()[1]) for line in lines}) == 1  # one description column
