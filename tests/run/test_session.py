"""The one run session: `jaxrl train`, `--resume` and `jaxrl sweep` each build the program
(`loop.make_train`) once, and go through `session.run_session`."""

import dataclasses
import os
import shutil

import pytest

from jaxrl import configs
from jaxrl.engine import loop
from jaxrl.run import runner, session, sweep, sweep_spec

PRESET = configs.get("ppo-toy-cpu")
CFG = dataclasses.replace(PRESET.train, num_envs=8, unroll_length=4, total_env_steps=2 * 32,
                          num_chunks=2, num_eval_envs=2)


@pytest.fixture
def counted(monkeypatch):
    calls = {"make_train": 0, "run_session": 0}
    make_train, run_session = loop.make_train, session.run_session

    def count_make(*args, **kwargs):
        calls["make_train"] += 1
        return make_train(*args, **kwargs)

    def count_session(*args, **kwargs):
        calls["run_session"] += 1
        return run_session(*args, **kwargs)

    monkeypatch.setattr(loop, "make_train", count_make)
    for module in (runner, sweep):  # the names they call
        monkeypatch.setattr(module, "run_session", count_session, raising=False)
    monkeypatch.setattr(session, "run_session", count_session)
    return calls


def test_train_resume_and_sweep_build_their_program_once(counted, tmp_path):
    run_dir = str(tmp_path / "run")
    runner.train("ppo", "PointMass1D", CFG, PRESET.agent_config, run_dir, progress=False)
    assert counted == {"make_train": 1, "run_session": 1}
    shutil.rmtree(os.path.join(run_dir, "checkpoints", "2"))
    runner.resume(run_dir, progress=False)
    assert counted == {"make_train": 2, "run_session": 2}
    members = sweep_spec.members(sweep_spec.points({"learning_rate": [1e-3, 3e-3]}, {}, 0, 0),
                                 [0])
    sweep_dir = str(tmp_path / "sweep")
    sweep.run_sweep("ppo", "PointMass1D", CFG, PRESET.agent_config, members, sweep_dir, False)
    assert counted == {"make_train": 3, "run_session": 3}
    for m in members:
        shutil.rmtree(os.path.join(sweep.member_dir(sweep_dir, m), "checkpoints", "2"))
    sweep.resume_sweep(sweep_dir, progress=False)
    assert counted == {"make_train": 4, "run_session": 4}


def test_every_outputs_class_has_the_whole_protocol():
    """`run_session` calls every method of `session.Outputs` (a new one, like `adapt`, must be
    in both the run's and the sweep's outputs), with the protocol's parameters."""
    import inspect

    wanted = {name: inspect.signature(fn) for name, fn in vars(session.Outputs).items()
              if callable(fn) and not name.startswith("_")}
    assert {"adapt", "record", "save", "finish"} <= set(wanted)
    for cls in (runner.RunOutputs, sweep.MemberOutputs):
        for name, sig in wanted.items():
            got = inspect.signature(getattr(cls, name))
            assert list(got.parameters) == list(sig.parameters), (cls.__name__, name)
