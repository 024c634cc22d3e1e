"""`benchmarks/env_overhead.py`: the rows the env-overhead table needs, its ratios, and one
worker measurement of each kind on a small env (no timing asserted)."""

import os
import sys
from types import SimpleNamespace

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
sys.path.insert(0, BENCH)

import env_overhead  # noqa: E402


def _args(**kw):
    return SimpleNamespace(**dict(dict(only=None, envs=None, scan=100, repeats=10,
                                       no_members=False, members_only=False), **kw))


def test_plan_covers_the_envs_kinds_and_members():
    rows = env_overhead.plan(_args())
    envs = {r["env"] for r in rows}
    assert {"CartpoleBalance", "CheetahRun", "WalkerWalk", "Go1JoystickFlatTerrain",
            "PandaPickCube", "halfcheetah"} <= envs
    go1 = {(r["num_envs"], r["randomize"]) for r in rows
           if r["env"] == "Go1JoystickFlatTerrain" and r["members"] == 1}
    assert go1 == {(32, False), (128, False), (32, True), (128, True)}
    for r in rows:
        assert r["scan"] * r["repeats"] >= 1000  # DM Control's truncation step is in the window
    assert {r["kind"] for r in rows if r["members"] == 4} == {"raw", "jaxrl"}
    assert all(r["members"] == 1 for r in env_overhead.plan(_args(no_members=True)))
    assert all(r["members"] == 4 for r in env_overhead.plan(_args(members_only=True)))
    only = env_overhead.plan(_args(only=["CheetahRun"], envs=[8], no_members=True))
    assert [(r["env"], r["num_envs"], r["kind"]) for r in only] == [
        ("CheetahRun", 8, k) for k in env_overhead.KINDS]


def test_table_ratios():
    row = dict(env="CheetahRun", randomize=False, num_envs=64, members=1)
    lines = env_overhead.table([dict(row, kind="raw", sps=20000.0),
                                dict(row, kind="jaxrl", sps=19000.0, episodes_ended=64),
                                dict(row, kind="peer", error="timeout")])
    assert lines[2] == ("| CheetahRun | - | 64 x 1 | 20,000 | 19,000 | 0.95 | error | - | 64 |")


@pytest.mark.parametrize("kind", env_overhead.KINDS)
def test_worker_measures_each_kind(kind):
    s = dict(env="CartpoleBalance", num_envs=4, randomize=False, kind=kind, members=1, scan=3,
             repeats=2, seed=0)
    out = env_overhead.measure(s)
    assert out["sps"] > 0 and out["seconds"] > 0
