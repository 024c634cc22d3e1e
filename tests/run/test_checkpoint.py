"""Checkpoints: bit-identical resume, atomic writes, NaN guard, `jaxrl eval`, bad input.

One straight 4-chunk PPO run on the toy env is compared with the same run interrupted by
SIGINT after chunk 2 (through the CLI) and resumed, both in-process and through the CLI.
"""

import dataclasses
import hashlib
import json
import math
import os
import re
import shutil
import signal
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct
from tree_helpers import assert_trees_equal

from jaxrl import configs
from jaxrl.agents import PPOConfig
from jaxrl.engine import contract as agent_lib
from jaxrl.engine import loop
from jaxrl.envs import toy
from jaxrl.run import checkpoint, cli, guards, runner
from jaxrl.run import logging as jl

PRESET = configs.get("ppo-toy-cpu")
NUM_ENVS, UNROLL, CHUNKS = 16, 8, 4
CFG = dataclasses.replace(
    PRESET.train,
    num_envs=NUM_ENVS,
    unroll_length=UNROLL,
    total_env_steps=CHUNKS * NUM_ENVS * UNROLL,
    num_chunks=CHUNKS,
    num_eval_envs=4,
)
AGENT_CFG = PRESET.agent_config
CLI_FLAGS = [
    "--preset",
    "ppo-toy-cpu",
    "--num-envs",
    str(NUM_ENVS),
    "--unroll-length",
    str(UNROLL),
    "--total-env-steps",
    str(CFG.total_env_steps),
    "--num-chunks",
    str(CHUNKS),
    "--num-eval-envs",
    "4",
    "--no-progress",
]
VOLATILE = ("wall_time", "perf/sps")


class PointMassNaN(toy.PointMass):
    """PointMass1D whose reward is NaN from episode step `NAN_STEP` on (episodes last 100
    steps, so with 8 steps per chunk the first NaN reward is collected in chunk 3)."""

    name = "PointMassNaN"
    NAN_STEP = 20

    def reset(self, key):
        state = super().reset(key)
        return state.replace(data=dict(state.data, t=jnp.zeros(())))

    def step(self, state, action):
        t = state.data["t"] + 1.0
        out = super().step(state.replace(data={"x": state.data["x"], "v": state.data["v"]}), action)
        reward = jnp.where(t >= self.NAN_STEP, jnp.nan, out.reward)
        return out.replace(data=dict(out.data, t=t), reward=reward)


class PointMassWide(toy.PointMass):
    """PointMass1D with a third (zero) observation entry: same actions, other obs size."""

    name = "PointMassWide"

    def reset(self, key):
        state = super().reset(key)
        return state.replace(obs=jnp.concatenate([state.obs, jnp.zeros(1)]))

    def step(self, state, action):
        out = super().step(state, action)
        return out.replace(obs=jnp.concatenate([out.obs, jnp.zeros(1)]))


def _interrupt_after(mp, chunk: int, signum: int) -> None:
    """Sends `signum` to this process right after the record of `chunk` is logged."""
    log = jl.Logger.log

    def log_then_signal(self, record):
        log(self, record)
        if record["chunk"] == chunk:
            os.kill(os.getpid(), signum)

    mp.setattr(jl.Logger, "log", log_then_signal)


def _records(path: str) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in VOLATILE} for r in jl.read_jsonl(path)]


def _same_records(a: list[dict], b: list[dict]) -> bool:
    def norm(r):
        return {k: v for k, v in r.items() if k not in VOLATILE}

    def eq(x, y):
        if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
            return True
        return x == y

    a, b = [norm(r) for r in a], [norm(r) for r in b]
    return len(a) == len(b) and all(
        ra.keys() == rb.keys() and all(eq(ra[k], rb[k]) for k in ra)
        for ra, rb in zip(a, b, strict=True)
    )


def _snapshot(directory: str) -> dict:
    """Relative path -> sha256 of every file under `directory`."""
    out = {}
    for root, _, files in os.walk(directory):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, directory)] = hashlib.sha256(f.read()).hexdigest()
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A straight run, and the same run interrupted by SIGINT after chunk 2 then resumed."""
    base = tmp_path_factory.mktemp("ckpt")
    straight_dir, killed_dir = str(base / "straight"), str(base / "killed")
    straight = runner.train(
        "ppo", "PointMass1D", CFG, AGENT_CFG, run_dir=straight_dir, progress=False
    )
    with pytest.MonkeyPatch.context() as mp:
        _interrupt_after(mp, 2, signal.SIGINT)
        with pytest.raises(SystemExit) as exc:
            cli.main(["train", *CLI_FLAGS, "--run-dir", killed_dir])
    killed_records = jl.read_jsonl(os.path.join(killed_dir, "metrics.jsonl"))
    killed_steps = checkpoint.existing_steps(killed_dir)
    copies = {name: str(base / name) for name in ("cli", "partial")}
    for path in copies.values():
        shutil.copytree(killed_dir, path)
    resumed = runner.resume(killed_dir, progress=False)
    return types.SimpleNamespace(
        straight=straight,
        straight_dir=straight_dir,
        resumed=resumed,
        killed_dir=killed_dir,
        exit_code=exc.value.code,
        killed_records=killed_records,
        killed_steps=killed_steps,
        **copies,
    )


def test_interrupt_saves_last_completed_chunk(runs, capsys):
    assert runs.exit_code == 128 + signal.SIGINT
    assert [r["chunk"] for r in runs.killed_records] == [1, 2]
    assert runs.killed_steps == [1, 2]
    assert not os.path.exists(os.path.join(runs.cli, "final_params"))
    config = json.load(open(os.path.join(runs.cli, "config.json")))
    assert config["preset"] == "ppo-toy-cpu" and config["train"]["num_chunks"] == CHUNKS


def test_resume_is_bit_identical(runs):
    assert_trees_equal(runs.straight.runner, runs.resumed.runner)
    assert [r["chunk"] for r in runs.resumed.records] == [1, 2, 3, 4]
    assert _same_records(runs.straight.records, runs.resumed.records)
    assert _records(os.path.join(runs.straight_dir, "metrics.jsonl")) == _records(
        os.path.join(runs.killed_dir, "metrics.jsonl")
    )
    # keep_checkpoints = 3; the final checkpoint is the latest.
    assert checkpoint.existing_steps(runs.killed_dir) == [2, 3, 4]
    assert checkpoint.existing_steps(runs.straight_dir) == [2, 3, 4]
    final = runner.load_params(os.path.join(runs.killed_dir, "final_params"))
    assert_trees_equal(runs.straight.runner.agent_state.params, final)


def test_cli_resume_drops_records_after_checkpoint(runs, capsys):
    # A run killed between a log line and its checkpoint: the stale line must not survive.
    metrics = os.path.join(runs.cli, "metrics.jsonl")
    with open(metrics, "a") as f:
        f.write(json.dumps({"chunk": 3, "env_steps": 384, "train/policy_loss": 123.0}) + "\n")
    cli.main(["train", "--resume", runs.cli, "--no-progress"])
    assert "done:" in capsys.readouterr().out
    assert _records(metrics) == _records(os.path.join(runs.straight_dir, "metrics.jsonl"))
    loaded = checkpoint.load_run(runs.cli)
    assert loaded.chunk == CHUNKS and loaded.cfg == CFG and loaded.agent_config == AGENT_CFG
    assert_trees_equal(runs.straight.runner, loaded.runner)


def test_failed_write_keeps_previous_checkpoint(runs, tmp_path, monkeypatch):
    from orbax.checkpoint._src.path import atomicity

    run_dir = str(tmp_path / "run")
    shutil.copytree(runs.straight_dir, run_dir)
    loaded = checkpoint.load_run(run_dir)

    async def die_before_rename(self):
        raise OSError("killed mid-write")

    monkeypatch.setattr(atomicity.AtomicRenameTemporaryPath, "finalize", die_before_rename)
    saver = checkpoint.Checkpointer(run_dir, keep=3)
    saver.save(5, loaded.runner, runs.straight.records, {})
    with pytest.raises(checkpoint.CheckpointError, match="chunk 4 is the latest complete one"):
        saver.wait()
    saver.close()
    monkeypatch.undo()
    names = sorted(os.listdir(os.path.join(run_dir, "checkpoints")))
    # Everything was written to the temporary folder, which never became step 5.
    assert names == ["2", "3", "4", "5.orbax-checkpoint-tmp"]
    tmp_state = os.path.join(run_dir, "checkpoints", names[-1], "state.orbax-checkpoint-tmp")
    assert os.listdir(tmp_state)  # the arrays were written, then the rename never happened
    again = checkpoint.load_run(run_dir)
    assert again.chunk == 4
    assert_trees_equal(runs.straight.runner, again.runner)


def test_nan_reward_stops_run_at_known_chunk(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(toy.TOY_ENVS, "PointMassNaN", PointMassNaN)
    run_dir = str(tmp_path / "nan")
    with pytest.raises(SystemExit) as exc:
        cli.main(["train", *CLI_FLAGS, "--env", "PointMassNaN", "--run-dir", run_dir])
    message = str(exc.value.code)
    assert message.startswith("error: non-finite loss metric 'train/")
    assert "in chunk 3 of 4 (env steps 256-384)" in message
    assert "latest good checkpoint is chunk 2" in message
    assert checkpoint.existing_steps(run_dir) == [1, 2]
    assert [r["chunk"] for r in jl.read_jsonl(os.path.join(run_dir, "metrics.jsonl"))] == [1, 2]
    assert not os.path.exists(os.path.join(run_dir, "final_params"))
    loaded = checkpoint.load_run(run_dir)
    assert loaded.chunk == 2 and loaded.env_name == "PointMassNaN"
    assert all(bool(jnp.isfinite(x).all()) for x in jax.tree.leaves(loaded.runner))


def test_nan_param_is_named(monkeypatch):
    metrics = {"train/policy_loss": np.zeros(2), "episode/return": np.full(2, np.nan)}
    params = {"policy": {"w": jnp.zeros((2, 3))}, "value": {"b": jnp.array([[0.0], [jnp.inf]])}}
    with pytest.raises(
        runner.NonFiniteError,
        match=r"parameter params\['value'\]\['b'\] "
        r"\(seed index 1\) in chunk 5 of 4 \(env steps 400-500\)",
    ):
        guards.check_finite(metrics, params, 5, CFG, 100, None)
    # A NaN episode return is fine.
    guards.check_finite(metrics, params["policy"], 1, CFG, 100, None)


def test_eval_command_prints_return(runs, capsys):
    cli.main(["eval", runs.straight_dir, "--episodes", "6", "--seed", "1"])
    out = capsys.readouterr().out
    assert f"ppo on PointMass1D, checkpoint of chunk 4 of 4 in {runs.straight_dir}" in out
    found = re.search(
        r"all: +return (-?[\d.]+) \+- ([\d.]+) \(mean \+- std over 6 episodes\), "
        r"length ([\d.]+)",
        out,
    )
    assert found, out
    mean, std, length = map(float, found.groups())
    expected = runner.summarize_eval(
        runner.evaluate_run(checkpoint.load_run(runs.straight_dir), 6, seed=1)
    )
    assert mean == pytest.approx(expected["return_mean"], abs=1e-3)
    assert std == pytest.approx(expected["return_std"], abs=1e-3) and std > 0
    assert length == 100.0  # PointMass1D never terminates: every episode hits the time limit
    assert 0 <= mean <= 100 and "success" not in out


def test_eval_actions_sample_vs_mode(runs, capsys):
    """`--actions sample` draws from the PPO policy: other returns than its mode's, the same
    again for the same eval seed; the printed line names the policy used."""
    loaded = checkpoint.load_run(runs.straight_dir)
    assert loaded.cfg.deterministic_eval  # the default: the mode
    mode = runner.evaluate_run(loaded, 6, seed=1)["eval/episode_return"]
    sample = runner.evaluate_run(loaded, 6, seed=1, deterministic=False)["eval/episode_return"]
    again = runner.evaluate_run(loaded, 6, seed=1, deterministic=False)["eval/episode_return"]
    np.testing.assert_array_equal(sample, again)
    assert abs(float(sample[0] - mode[0])) > 1e-3
    cli.main(["eval", runs.straight_dir, "--episodes", "6", "--seed", "1", "--actions", "sample"])
    out = capsys.readouterr().out
    assert "; sampled actions, 6 episodes per seed" in out
    assert f"all:    return {float(sample[0]):.3f} +- " in out


def test_summarize_eval_pools_seeds_and_success():
    ev = {
        "eval/episode_return": np.array([1.0, 3.0]),
        "eval/episode_return_std": np.zeros(2),
        "eval/episode_length": np.array([10.0, 20.0]),
        "eval/num_episodes": np.array([1.0, 3.0]),
        "eval/success": np.array([1.0, 0.0]),
    }
    out = runner.summarize_eval(ev)
    assert out["return_mean"] == 2.5 and out["return_std"] == pytest.approx(np.sqrt(0.75))
    assert out["length_mean"] == 17.5 and out["success_rate"] == 0.25
    assert out["num_episodes"] == 4.0
    assert runner.summarize_eval(ev, row=1)["return_mean"] == 3.0
    # Goal envs: success rate = episodes with any success step, not success at the last step.
    goal = dict(ev, **{"eval/episode_success_any": np.array([1.0, 2 / 3]),
                       "eval/episode_success": np.array([4.0, 2.0])})
    out = runner.summarize_eval(goal)
    assert out["success_rate"] == 0.75 and out["steps_near_goal"] == 2.5


@pytest.fixture
def no_training(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("compiling was reached: bad input must fail before")

    monkeypatch.setattr(runner, "run_session", boom)
    monkeypatch.setattr(runner, "evaluate_run", boom)
    monkeypatch.setitem(toy.TOY_ENVS, "PointMassWide", PointMassWide)


def _corrupt(run_dir: str, chunk: int = 2) -> None:
    state = os.path.join(run_dir, "checkpoints", str(chunk), "state")
    for root, _, files in os.walk(state):
        for name in files:
            with open(os.path.join(root, name), "wb") as f:
                f.write(b"\x00garbage")


BAD_INPUT = [
    (["train", "--resume", "{partial}", "--agent", "sac"], "--agent sac (saved: ppo)"),
    (
        ["train", "--resume", "{partial}", "--env", "DoneAfterK"],
        "--env DoneAfterK (saved: PointMass1D)",
    ),
    (["train", "--resume", "{partial}", "--num-envs", "32"], "--num-envs 32 (saved: 16)"),
    (["train", "--resume", "{partial}", "--ppo.num-epochs", "1"], "--ppo.num-epochs 1 (saved: 4)"),
    (["train", "--resume", "{missing}"], "does not exist"),
    (["train", "--resume", "{straight}"], "already finished (chunk 4 of 4)"),
    (["train", *CLI_FLAGS, "--run-dir", "{partial}"], "already holds checkpoints (chunks 1, 2)"),
    (["eval", "{missing}"], "does not exist"),
    (["eval", "{straight}", "--seed-index", "1"], "--seed-index 1 is out of range"),
    (["eval", "{straight}", "--episodes", "0"], "--episodes must be positive"),
    (["eval", "{straight}", "--chunk", "1"], "no checkpoint of chunk 1"),
    (["eval", "{straight}", "--env", "PointMassWide"], "observations [3] and 1 action(s)"),
]


@pytest.mark.parametrize("argv,match", BAD_INPUT)
def test_bad_input_is_an_error_and_keeps_checkpoints(
    argv, match, runs, tmp_path, capsys, no_training
):
    corrupt = str(tmp_path / "corrupt")
    shutil.copytree(runs.partial, corrupt)
    _corrupt(corrupt)
    dirs = {
        "partial": runs.partial,
        "straight": runs.straight_dir,
        "corrupt": corrupt,
        "missing": str(tmp_path / "missing"),
    }
    before = {k: _snapshot(v) for k, v in dirs.items()}
    with pytest.raises(SystemExit) as exc:
        cli.main([a.format(**dirs) for a in argv])
    message = str(exc.value.code)
    assert message.startswith("error: ") and match in message, message
    assert {k: _snapshot(v) for k, v in dirs.items()} == before
    assert not os.path.exists(dirs["missing"])


def test_config_round_trip_through_json():
    cfg = dataclasses.replace(CFG, episode_length=50, env_impl="jax")
    agent_cfg = dataclasses.replace(AGENT_CFG, max_grad_norm=1, policy_hidden=(8, 4))
    data = json.loads(
        json.dumps(
            {"train": dataclasses.asdict(cfg), "agent_config": dataclasses.asdict(agent_cfg)}
        )
    )
    assert data["agent_config"]["policy_hidden"] == [8, 4]
    assert checkpoint.config_from_dict(loop.TrainConfig, data["train"]) == cfg
    back = checkpoint.config_from_dict(PPOConfig, data["agent_config"])
    assert back == agent_cfg and back.policy_hidden == (8, 4)
    assert isinstance(back.max_grad_norm, float)
    with pytest.raises(checkpoint.CheckpointError, match=r"unknown fields \['widths'\]"):
        checkpoint.config_from_dict(PPOConfig, {"widths": [1]})


@struct.dataclass
class _ReplayState:
    params: dict
    buffer: dict


class _ReplayAgent:
    """The two replay declarations of the agent contract, for a hand-made state."""

    has_replay = True

    def replay_of(self, state):
        return state.buffer

    def with_replay(self, state, buffer):
        return state.replace(buffer=buffer)


def test_checkpoint_without_replay_drops_buffer(tmp_path):
    state = _ReplayState(
        params={"w": jnp.arange(6.0).reshape(2, 3)},
        buffer={"obs": jnp.ones((2, 5, 3)), "pos": jnp.array([4, 4])},
    )
    run = loop.RunState(
        agent_state=state,
        env_state={"x": jnp.zeros((2, 1))},
        key=jnp.zeros((2, 2), jnp.uint32),
        iteration=jnp.array([7, 7]),
    )
    abstract = jax.eval_shape(lambda: run)
    for replay in (True, False):
        saver = checkpoint.Checkpointer(str(tmp_path / str(replay)), keep=3, replay=replay,
                                      agent=_ReplayAgent())
        saver.save(1, run, [{"chunk": 1, "x": float("nan")}], {"agent": "toy"})
        saver.wait()
        meta = saver.restore_meta(1)
        assert (
            meta["replay"] is replay and meta["chunk"] == 1 and math.isnan(meta["records"][0]["x"])
        )
        back = saver.restore_state(1, abstract, meta["replay"])
        saver.close()
        assert_trees_equal(run.agent_state.params, back.agent_state.params)
        assert_trees_equal(run.env_state, back.env_state)
        if replay:
            assert_trees_equal(run.agent_state.buffer, back.agent_state.buffer)
        else:
            assert back.agent_state.buffer is None
            empty = {"obs": jnp.zeros((2, 5, 3)), "pos": jnp.array([0, 0])}
            filled = checkpoint.fill_replay(_ReplayAgent(), back, empty)
            assert_trees_equal(filled.agent_state.buffer, empty)


def _off_policy_agents() -> list:
    """Registered off-policy agents. `sac` and `pql` (its own state and update structure) always
    run; the others (whose state layout is the same SAC state; compiles of minutes on 2 cores)
    run with JAXRL_TEST_ALL_AGENTS=1, to keep the default suite short."""
    names = [
        n for n in agent_lib.list_agents() if not getattr(agent_lib.lookup(n)[0], "on_policy", True)
    ]
    extra = pytest.mark.skipif(not os.environ.get("JAXRL_TEST_ALL_AGENTS"),
                               reason="set JAXRL_TEST_ALL_AGENTS=1 (minutes per agent on CPU)")
    return [pytest.param(n, marks=() if n in ("sac", "pql") else [pytest.mark.slow, extra])
            for n in names]


def _small_config(config_cls):
    small = {"buffer_size": 2048, "learning_starts": 64, "batch_size": 32, "utd_ratio": 1.0}
    fields = {f.name: f for f in dataclasses.fields(config_cls)}
    kwargs = {k: v for k, v in small.items() if k in fields}
    # One hidden width: the normalized (FlashSAC) encoder reads its width from the first entry.
    kwargs.update({k: (32,) for k in fields if k.endswith("hidden")})
    return config_cls(**kwargs)


@pytest.mark.parametrize("agent_name", _off_policy_agents())
def test_off_policy_resume_with_replay_is_bit_identical(agent_name, tmp_path):
    cfg = dataclasses.replace(
        CFG,
        num_envs=8,
        unroll_length=4,
        total_env_steps=4 * 8 * 4 * 2,
        num_eval_envs=2,
    )
    agent_cfg = _small_config(agent_lib.lookup(agent_name)[1])
    straight_dir, run_dir = str(tmp_path / "a"), str(tmp_path / "b")
    straight = runner.train(
        agent_name, "PointMass1D", cfg, agent_cfg, run_dir=straight_dir, progress=False,
        run=loop.RunConfig(keep_checkpoints=4),
    )
    assert straight.runner.agent_state.buffer is not None
    # The state a kill after chunk 2 leaves behind: chunks 1-2 on disk, 4 lines of metrics.
    shutil.copytree(straight_dir, run_dir)
    for chunk in (3, 4):
        shutil.rmtree(os.path.join(run_dir, "checkpoints", str(chunk)))
    resumed = runner.resume(run_dir, progress=False)
    assert_trees_equal(straight.runner, resumed.runner)
    assert _same_records(straight.records, resumed.records)
    assert _records(os.path.join(run_dir, "metrics.jsonl")) == _records(
        os.path.join(straight_dir, "metrics.jsonl")
    )
    if agent_name != "sac":
        return
    # checkpoint_replay=False: same state, but the buffer comes back empty (fresh from init).
    small_dir = str(tmp_path / "c")
    agent, env, spec = runner.build(agent_name, "PointMass1D", cfg, agent_cfg)
    saver = checkpoint.Checkpointer(small_dir, keep=1, replay=False, agent=agent)
    saver.save(4, straight.runner, straight.records, {})
    saver.wait()
    assert saver.restore_meta(4)["replay"] is False
    back = checkpoint.restore_runner(saver, 4, saver.restore_meta(4), agent, env, None)
    saver.close()
    assert_trees_equal(straight.runner.agent_state.params, back.agent_state.params)
    assert int(straight.runner.agent_state.buffer.size[0]) == 4 * 2 * 4  # 4 chunks x 2 x T
    assert back.agent_state.buffer.size.tolist() == [0]
    assert back.agent_state.buffer.write_time.max() == -1


def test_pack_leaves_out_size_zero_leaves_and_unpack_restores_them():
    """MJX states carry size-0 arrays that orbax refuses to save (e.g. `data.act`)."""
    tree = {"a": np.arange(3.0), "empty": np.zeros((4, 0), np.float32), "b": {"c": np.ones(2)}}
    packed = checkpoint.pack(tree)
    assert sorted(packed) == ["leaf_00000", "leaf_00001"]  # a, b.c (dict keys sort)
    like = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), tree)
    out = checkpoint.unpack(packed, like)
    assert out["empty"].shape == (4, 0) and out["empty"].dtype == np.float32
    np.testing.assert_array_equal(out["a"], tree["a"])
    np.testing.assert_array_equal(out["b"]["c"], tree["b"]["c"])


def test_saved_records_are_those_of_the_saved_chunk(tmp_path, monkeypatch):
    """The runner appends chunk k+1's record to its list while chunk k's checkpoint is still
    being written in the background: the checkpoint must keep the records it was given (a
    checkpoint of chunk 1 holding 2 records made a resume skip its last chunk). orbax serializes
    the JSON part in its background thread; a slow disk is emulated by delaying that write."""
    import asyncio

    import orbax.checkpoint as ocp

    handler = ocp.handlers.JsonCheckpointHandler
    write = handler._save_fn

    async def slow_write(self, x, directory):
        await asyncio.sleep(0.3)
        return await write(self, x, directory)

    monkeypatch.setattr(handler, "_save_fn", slow_write)
    ckpt = checkpoint.Checkpointer(str(tmp_path))
    records = [{"chunk": 1, "env_steps": 64, "loss": 0.5}]
    resolved = {"agent": "ppo", "train": {"num_chunks": 2}}
    ckpt.save(1, {"x": jnp.arange(4.0)}, records, resolved)
    records.append({"chunk": 2, "env_steps": 128})  # what the runner does next
    records[0]["loss"] = 9.0
    resolved["train"]["num_chunks"] = 7
    ckpt.wait()
    meta = ckpt.restore_meta(1)
    ckpt.close()
    assert meta["records"] == [{"chunk": 1, "env_steps": 64, "loss": 0.5}]
    assert meta["config"]["train"]["num_chunks"] == 2 and meta["chunk"] == 1


def test_resume_from_a_checkpoint_that_holds_later_records_is_exact(runs, tmp_path):
    """What the race above left on disk (checkpoint 3 holding chunk 4's record too): resume
    keeps the records of the chunks the checkpoint saw and ends as the straight run."""
    run_dir = str(tmp_path / "late")
    shutil.copytree(runs.straight_dir, run_dir)
    ckpt = checkpoint.Checkpointer(run_dir, keep=10)
    meta = ckpt.restore_meta(3)
    abstract = checkpoint.abstract_runner(*runner.build("ppo", "PointMass1D", CFG, AGENT_CFG)[:2],
                                          None)[0]
    state = ckpt.restore_state(3, abstract, True)
    ckpt.close()
    shutil.rmtree(os.path.join(run_dir, "checkpoints", "3"))
    shutil.rmtree(os.path.join(run_dir, "checkpoints", "4"))
    ckpt = checkpoint.Checkpointer(run_dir, keep=10)
    ckpt.save(3, state, runs.straight.records, meta["config"])  # 4 records for 3 chunks
    ckpt.wait()
    ckpt.close()
    resumed = runner.resume(run_dir, progress=False)
    assert [r["chunk"] for r in resumed.records] == [1, 2, 3, 4]
    assert_trees_equal(runs.straight.runner, resumed.runner)
    assert _same_records(runs.straight.records, resumed.records)
