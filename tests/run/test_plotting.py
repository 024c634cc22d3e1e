"""Learning-curve plots (`plot_runs`, `jaxrl plot`) and rollout videos (`jaxrl render`).

Plot inputs are `metrics.jsonl` files written by the real `Logger`; the video is a deterministic
rollout of a PPO policy in the Playground env CartpoleBalance (one MJX compile per module).
"""

from __future__ import annotations

import json
import math
import os

import jax
import numpy as np
import pytest

from jaxrl.agents import PPOConfig
from jaxrl.engine.loop import TrainConfig
from jaxrl.run import cli, plotting, runner
from jaxrl.run.logging import Logger

STEPS = [1000, 2000, 3000, 4000]


def _write_run(path, returns, per_seed=None, agent="ppo", env="PointMass1D"):
    """A run dir with config.json and a metrics.jsonl written by the real Logger."""
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump({"agent": agent, "env": env}, f)
    logger = Logger(str(path), STEPS[-1], progress=False)
    for i, (step, ret) in enumerate(zip(STEPS, returns, strict=True)):
        rec = {"chunk": i + 1, "env_steps": step, "wall_time": 0.5 * (i + 1),
               "episode/return": ret - 1.0, "eval/episode_return": ret}
        if per_seed is not None:
            rec["eval/episode_return_per_seed"] = per_seed[i]
        logger.log(rec)
    logger.close()
    return str(path)


@pytest.fixture
def runs(tmp_path):
    seeds = [[1.0, 3.0, 2.0], [4.0, 6.0, 5.0], [8.0, 9.0, 10.0], [9.0, 11.0, 10.0]]
    a = _write_run(tmp_path / "a", [2.0, 5.0, 9.0, 10.0], per_seed=seeds)
    b = _write_run(tmp_path / "b", [1.0, math.nan, 3.0, 4.0], agent="sac")
    return a, b


def test_figure_has_one_labeled_curve_per_run(runs):
    fig = plotting.make_figure(runs)
    steps_ax, time_ax = fig.axes
    for ax, xs in ((steps_ax, STEPS), (time_ax, [0.5, 1.0, 1.5, 2.0])):
        lines = ax.get_lines()
        assert [ln.get_label() for ln in lines] == ["a (ppo on PointMass1D)",
                                                    "b (sac on PointMass1D)"]
        np.testing.assert_allclose(lines[0].get_xdata(), xs)
        np.testing.assert_allclose(lines[0].get_ydata(), [2.0, 5.0, 9.0, 10.0])
        # run b's NaN record (no episode ended) is left out
        np.testing.assert_allclose(lines[1].get_xdata(), [xs[0], xs[2], xs[3]])
        np.testing.assert_allclose(lines[1].get_ydata(), [1.0, 3.0, 4.0])
        assert len(ax.collections) == 1  # min-max band for the 3-seed run only
    band = steps_ax.collections[0].get_paths()[0].vertices
    assert band[:, 1].min() == pytest.approx(1.0) and band[:, 1].max() == pytest.approx(11.0)
    legend = [t.get_text() for t in steps_ax.get_legend().get_texts()]
    assert legend == ["a (ppo on PointMass1D)", "b (sac on PointMass1D)"]
    assert steps_ax.get_xlabel() == "env steps" and "wall time" in time_ax.get_xlabel()


def test_plot_runs_writes_png_and_other_metrics(runs, tmp_path):
    out = plotting.plot_runs(runs, str(tmp_path / "sub" / "curves.png"), labels=["A", "B"])
    with open(out, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(out) > 10_000
    curve = plotting.load_curve(runs[0], "episode/return")
    np.testing.assert_allclose(curve.mean, [1.0, 4.0, 8.0, 9.0])
    assert curve.num_seeds == 1


def test_plot_errors_name_the_problem(runs, tmp_path):
    with pytest.raises(plotting.PlotError, match="Did you mean: eval/episode_return"):
        plotting.make_figure(runs, metric="eval/episode_retrun")
    with pytest.raises(plotting.PlotError, match="no metrics.jsonl"):
        plotting.make_figure([str(tmp_path / "missing")])


def test_cli_plot(runs, tmp_path, capsys):
    out = str(tmp_path / "cli.png")
    cli.main(["plot", *runs, "--out", out, "--metric", "episode/return"])
    assert "wrote" in capsys.readouterr().out and os.path.getsize(out) > 0
    cli.main(["plot", runs[0]])
    assert os.path.isfile(os.path.join(runs[0], "learning_curves.png"))
    with pytest.raises(SystemExit, match="^error: .*no metrics.jsonl"):
        cli.main(["plot", str(tmp_path / "nope")])


# ---- videos ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gl_backend():
    from jaxrl.deploy import render

    try:
        return render.setup_gl()
    except render.RenderError as err:
        pytest.skip(f"no usable OpenGL backend here: {err}")


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # imageio's ffmpeg subprocess
def test_render_playground_video(gl_backend, tmp_path):
    import imageio.v3 as iio

    from jaxrl.deploy import render

    cfg = TrainConfig(num_envs=2, unroll_length=2, total_env_steps=4, num_chunks=1,
                      num_eval_envs=0)
    agent_cfg = PPOConfig(policy_hidden=(8,), value_hidden=(8,), num_minibatches=1)
    agent, env, spec = runner.build("ppo", "CartpoleBalance", cfg, agent_cfg)
    state = agent.init(jax.random.PRNGKey(0), agent.default_hp())
    mp4, gif = str(tmp_path / "v.mp4"), str(tmp_path / "v.gif")
    res = render.render_policy(agent, state, env, mp4, num_steps=40)
    # 100 Hz control, shown at <= 50 fps: every second state, real time
    assert (res.num_frames, res.fps, res.gl_backend) == (20, 50.0, gl_backend)
    frames = iio.imread(mp4)
    assert frames.shape == (20, 240, 320, 3)
    assert all(f.std() > 5.0 for f in frames)  # not blank
    assert iio.immeta(mp4)["fps"] == pytest.approx(50.0)
    states = render.rollout_states(agent, state, env, 10)
    frames = render.render_frames(render.mujoco_model(env), states, 64, 48, camera="fixed")
    render.write_video(frames, gif, 25.0)
    decoded = iio.imread(gif)
    assert decoded.shape[:3] == (10, 48, 64)
    # the cart moves: frames differ over the rollout
    assert np.abs(decoded[0].astype(float) - decoded[-1].astype(float)).mean() > 0.0


def test_render_errors(gl_backend, tmp_path, capsys):
    from jaxrl.deploy import render
    from jaxrl.envs import toy

    with pytest.raises(render.RenderError, match="no MuJoCo model"):
        render.mujoco_model(toy.PointMass())
    with pytest.raises(render.RenderError, match="use .mp4 or .gif"):
        render.write_video(np.zeros((2, 8, 8, 3), np.uint8), str(tmp_path / "x.avi"), 10)
    with pytest.raises(SystemExit, match="^error: .*does not exist"):
        cli.main(["render", str(tmp_path / "missing")])
