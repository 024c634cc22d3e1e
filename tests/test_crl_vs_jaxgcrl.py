"""`benchmarks/crl_vs_jaxgcrl.py`: which side each result belongs to, replacing runs by task,
side and seed, the seed-spread table and the PNG (no training)."""

import os
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
sys.path.insert(0, BENCH)

import crl_vs_jaxgcrl as cvj  # noqa: E402


def _result(seed, fixed, sampling, ours_final, peer_final=None, env="ReacherGoal", eps=None):
    settings = {"env": env, "episode_length": 51, "seed": seed,
                "fixed_starts": fixed, "sampling": sampling, "log_det_epsilon": eps}

    def part(final):
        evals = [{"env_steps": 100, "eval/episode_success_any": 0.1,
                  "eval/episode_success": 1.0},
                 {"env_steps": 200, "eval/episode_success_any": final[0],
                  "eval/episode_success": final[1]}]
        return {"crl": {"env_steps": 200, "grad_steps": 50, "train_seconds": 10.0 + seed,
                        "evals": evals, "agent_config": {"actor_init_scale": 1 / 3}}}

    res = {"settings": settings, "ours": part(ours_final)}
    if peer_final is not None:
        res["peer"] = part(peer_final)
    return res


def test_entries_name_the_sides_and_keep_the_curves():
    ours, peer = cvj.entries(_result(0, True, "windows", (0.9, 30.0), (0.8, 20.0)), "x.json")
    assert (ours["task"], ours["side"], peer["side"]) == (
        "reacher", "ours-jaxgcrl-setting", "jaxgcrl")
    assert ours["curve"] == [(100, 0.1, 1.0), (200, 0.9, 30.0)]
    assert (ours["success_any"], ours["near_goal"], peer["near_goal"]) == (0.9, 30.0, 20.0)
    assert cvj.entries(_result(1, False, "pairs", (1.0, 40.0)), "y.json")[0]["side"] == "ours"
    assert cvj.entries(_result(0, True, "pairs", (0.5, 5.0)), "z.json")[0]["side"] == (
        "ours-fixed-starts")
    with pytest.raises(ValueError, match="attribution run"):
        cvj.entries(_result(0, False, "windows", (0.5, 5.0)), "w.json")
    exact = cvj.entries(_result(0, True, "windows", (0.9, 30.0), env="ReacherGoalJaxGCRL"), "e")
    assert (exact[0]["task"], exact[0]["side"]) == ("reacher", "ours-exact")
    pairs = cvj.entries(_result(0, True, "pairs", (0.9, 30.0), env="ReacherGoalJaxGCRL"), "p")
    assert pairs[0]["side"] == "ours-exact-task"
    with pytest.raises(ValueError, match="fixed starts"):
        cvj.entries(_result(0, False, "pairs", (0.5, 5.0), env="ReacherGoalJaxGCRL"), "e.json")
    eps = cvj.entries(_result(0, True, "windows", (0.9, 30.0), env="ReacherGoalJaxGCRL",
                              eps=1e-6), "q")
    assert eps[0]["side"] == "ours-exact-eps"
    with pytest.raises(ValueError, match="window batches"):
        cvj.entries(_result(0, True, "pairs", (0.9, 30.0), env="ReacherGoalJaxGCRL", eps=1e-6),
                    "r")


def test_exact_side_runs_jaxgcrls_task_env(monkeypatch):
    calls = []

    def fake_run(cmd, check):
        calls.append(cmd)
        raise SystemExit(0)  # stop before reading a JSON

    monkeypatch.setattr(cvj.subprocess, "run", fake_run)
    for task, side in (("reacher", "ours-exact"), ("pusher", "ours-exact-task"),
                       ("pusher", "ours"), ("reacher", "ours-exact-eps")):
        with pytest.raises(SystemExit):
            cvj.run_one(task, side, 3, "/tmp")
    (reacher, pusher, plain, eps) = calls
    assert "--log-det-epsilon" not in reacher
    assert eps[eps.index("--log-det-epsilon") + 1] == "1e-6"
    assert [a for a in eps if a not in ("--log-det-epsilon", "1e-6")] == [
        a.replace("ours-exact_", "ours-exact-eps_") for a in reacher]
    assert "--sampling" not in pusher and "--fixed-starts" in pusher
    assert reacher.count("--env") == pusher.count("--env") == plain.count("--env") == 1
    assert reacher[reacher.index("--env") + 1] == "ReacherGoalJaxGCRL"
    assert "--fixed-starts" in reacher
    assert reacher[reacher.index("--sampling") + 1] == "windows"
    assert reacher[reacher.index("--seed") + 1] == "3"
    assert pusher[pusher.index("--env") + 1] == "PusherGoalJaxGCRL" and "pusher_easy" in pusher
    assert plain[plain.index("--env") + 1] == "PusherGoal" and "--fixed-starts" not in plain


def test_merge_replaces_a_seed_and_the_table_shows_mean_and_range():
    res = {"runs": []}
    for seed, final in ((0, (0.9, 30.0)), (1, (0.5, 10.0)), (2, (1.0, 38.0))):
        res = cvj.merge(res, cvj.entries(_result(seed, False, "pairs", final), "a.json"))
    res = cvj.merge(res, cvj.entries(_result(1, False, "pairs", (0.8, 32.0)), "b.json"))
    assert [(r["seed"], r["success_any"]) for r in res["runs"]] == [(0, 0.9), (1, 0.8), (2, 1.0)]
    row = cvj.table(res["runs"])[2]
    assert row.startswith("| reacher | ours | 0, 1, 2 | 200 | 50 |")
    assert "| 0.900 (0.800-1.000) | 33.3 (30.0-38.0) of 51 | 11 (10-12) |" in row


def test_figure_draws_every_side(tmp_path):
    res = cvj.merge({"runs": []}, cvj.entries(
        _result(0, True, "windows", (0.9, 30.0), (0.8, 20.0)), "x.json"))
    path = tmp_path / "r.png"
    cvj.figure(res["runs"], "reacher", str(path))
    assert path.stat().st_size > 10_000


def test_peer_plan_matches_the_documented_budgets():
    """JaxGCRL's step accounting (`_jaxgcrl_peer.peer_plan`) for the two tasks: 25 batches of
    128 x 50 relabeled rows per 512-env-step collect on the reacher (utd 6.25), 50 per 2,048 on
    the pusher; totals as in benchmarks/RESULTS.md."""
    import crl_throughput as ct

    reacher = ct.peer_plan(ct.settings_from_args(ct.parse_args([])))
    assert (reacher["env_steps"], reacher["grad_steps"], reacher["utd_ratio"]) == (
        299_520, 14_000, 6.25)
    pusher = ct.peer_plan(ct.settings_from_args(ct.parse_args(
        cvj.TASKS["pusher"]["flags"])))
    assert (pusher["env_steps"], pusher["grad_steps"], pusher["prefill_env_steps"]) == (
        593_920, 13_750, 30_720)
    settings = dict(ct.settings_from_args(ct.parse_args([])), episode_length=50)
    with pytest.raises(ValueError, match="not divisible by batch_size"):
        ct.peer_plan(settings)
