"""Env families register themselves: `make`, `list_envs` and `check_env_name` know a new family
without edits, duplicates are clear errors, unknown names still get close matches; `unavailable`
names what cannot be built here (robot assets missing, unsupported names) without loading."""

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jaxrl.envs import UnknownEnvError, assets, check_env_name, list_envs, make, registry, toy


class _Recorder:
    """A family factory that records its calls and builds a toy env."""

    def __init__(self):
        self.calls = []

    def __call__(self, name, *, impl, episode_length, **overrides):
        self.calls.append((name, impl, episode_length, overrides))
        env = toy.PointMass()
        if episode_length:
            env.episode_length = int(episode_length)
        return env


@pytest.fixture
def scratch():
    """Registers a throwaway family `scratch` for one test and always removes it."""
    listed = []

    def names():
        listed.append(1)
        return ("ScratchAlpha", "ScratchBeta")

    factory = _Recorder()
    registry.register_family("scratch", names, factory, unsupported={"ScratchGamma": "no gamma"})
    try:
        yield factory, listed
    finally:
        registry.unregister_family("scratch")
    assert "scratch" not in list_envs()


def test_builtin_families_in_order():
    envs = list_envs()
    assert list(envs) == ["toy", "goal", "playground", "brax"]
    assert envs["toy"] == ("DoneAfterK", "PointMass1D", "TwoModes")
    assert envs["brax"] == registry.BRAX_ENVS
    assert all(isinstance(names, tuple) for names in envs.values())


def test_registered_family_is_listed_checked_and_made(scratch):
    factory, listed = scratch
    envs = list_envs()
    assert list(envs)[-1] == "scratch" and envs["scratch"] == ("ScratchAlpha", "ScratchBeta")
    assert check_env_name("ScratchBeta") == "ScratchBeta"
    env = make("ScratchAlpha", impl="jax", episode_length=7)
    assert env.episode_length == 7 and env.action_size == 1
    assert factory.calls == [("ScratchAlpha", "jax", 7, {})]
    make("ScratchBeta", episode_length=50)
    assert factory.calls[-1] == ("ScratchBeta", None, 50, {})
    assert listed  # the lazy listing was called by the reads above


def test_lazy_names_are_not_listed_at_registration():
    calls = []
    registry.register_family("lazy", lambda: calls.append(1) or ("LazyOne",), _Recorder())
    try:
        assert calls == []
        assert check_env_name("LazyOne") == "LazyOne" and calls
    finally:
        registry.unregister_family("lazy")


def test_overrides_reach_the_factory(scratch):
    factory, _ = scratch
    env = make("ScratchAlpha", episode_length=None)
    assert factory.calls[-1] == ("ScratchAlpha", None, None, {})
    assert env.episode_length == 100  # PointMass default, kept when episode_length is None
    assert make("ScratchBeta", episode_length=20).episode_length == 20
    make("ScratchBeta", impl="warp", gravity=2.0, name_suffix="x")
    assert factory.calls[-1] == ("ScratchBeta", "warp", None, {"gravity": 2.0, "name_suffix": "x"})


def test_duplicate_family_name_is_an_error(scratch):
    with pytest.raises(ValueError, match="'scratch' is already registered"):
        registry.register_family("scratch", ("Other",), _Recorder())
    with pytest.raises(ValueError, match="'toy' is already registered"):
        registry.register_family("toy", ("Other",), _Recorder())
    assert list_envs()["scratch"] == ("ScratchAlpha", "ScratchBeta")  # unchanged


def test_duplicate_env_name_in_a_static_list_fails_at_registration():
    with pytest.raises(ValueError, match="'ant' is registered by both families 'brax' and 'dup'"):
        registry.register_family("dup", ("ant",), _Recorder())
    with pytest.raises(ValueError, match="'Twin' is registered twice in family 'dup'"):
        registry.register_family("dup", ("Twin", "Twin"), _Recorder())
    assert "dup" not in list_envs()


def test_duplicate_env_name_in_a_lazy_list_fails_on_read():
    registry.register_family("dup", lambda: ("DoneAfterK",), _Recorder())
    try:
        for read in (list_envs, lambda: check_env_name("PointMass1D"),
                     lambda: make("DoneAfterK")):
            with pytest.raises(ValueError, match="'DoneAfterK' is registered by both families "
                                                 "'toy' and 'dup'"):
                read()
    finally:
        registry.unregister_family("dup")
    assert check_env_name("DoneAfterK") == "DoneAfterK"


def test_bad_registrations_are_type_errors():
    with pytest.raises(TypeError, match="make_fn"):
        registry.register_family("bad", ("BadEnv",), "not callable")
    with pytest.raises(TypeError, match="string"):
        registry.register_family("bad", "BadEnv", _Recorder())
    with pytest.raises(ValueError, match="non-empty"):
        registry.register_family("", ("BadEnv",), _Recorder())
    assert "bad" not in list_envs()


def test_unregister_unknown_family_is_a_key_error():
    with pytest.raises(KeyError, match="no_such_family"):
        registry.unregister_family("no_such_family")


def test_unknown_names_get_close_matches(scratch):
    with pytest.raises(UnknownEnvError, match="Did you mean: ScratchAlpha"):
        check_env_name("ScratchAlpah")
    with pytest.raises(UnknownEnvError, match="Did you mean: ScratchBeta"):
        make("scratchbeta")  # case-insensitive match first
    with pytest.raises(UnknownEnvError, match="not supported: no gamma"):
        make("ScratchGamma")
    with pytest.raises(UnknownEnvError, match="Did you mean: PointMass1D"):
        check_env_name("PointMass1d")
    with pytest.raises(UnknownEnvError, match="jaxrl list envs"):
        check_env_name("NoSuchEnvAtAll")


def test_toy_envs_added_with_monkeypatch_are_known(monkeypatch):
    monkeypatch.setitem(toy.TOY_ENVS, "PointMassCopy", toy.PointMass)
    assert "PointMassCopy" in list_envs()["toy"]
    assert make("PointMassCopy", episode_length=9).episode_length == 9


def _robot_envs():
    return [n for n in list_envs()["playground"] if assets.robot_folders(n)]


@pytest.fixture
def no_loading(monkeypatch):
    """Fails any Playground env load: `unavailable` must only list folders."""
    from mujoco_playground import registry as playground

    def boom(*args, **kwargs):
        raise AssertionError("unavailable() loaded an env")

    monkeypatch.setattr(playground, "load", boom)


@pytest.fixture
def only_variable(tmp_path, monkeypatch):
    """No wheels and no Playground folder: `$JAXRL_MENAGERIE_PATH` (an empty tmp dir) only."""
    monkeypatch.setattr(assets, "wheel_roots", lambda: [])
    monkeypatch.setattr(assets, "playground_root", lambda: None)
    monkeypatch.setenv(assets.MENAGERIE_VAR, str(tmp_path))
    return tmp_path


def test_every_robot_env_is_in_the_folder_table():
    """`assets.ROBOT_FOLDERS` matches Playground: every locomotion / manipulation env has an
    entry whose folders its package's source names; no dm_control env reads one."""
    from mujoco_playground import registry as playground

    for suite in ("locomotion", "manipulation"):
        envs = importlib.import_module(f"mujoco_playground._src.{suite}")._envs
        for name in getattr(playground, suite).ALL_ENVS:
            module = importlib.import_module(getattr(envs[name], "func", envs[name]).__module__)
            source = "".join(p.read_text() for p in Path(module.__file__).parent.glob("*.py"))
            assert assets.robot_folders(name), name
            assert all(f'"{f}"' in source for f in assets.robot_folders(name)), name
    assert not any(assets.robot_folders(n) for n in playground.dm_control_suite.ALL_ENVS)
    assert len(_robot_envs()) == 29


def test_nothing_unavailable_with_the_wheels(monkeypatch, no_loading):
    monkeypatch.delenv(assets.MENAGERIE_VAR, raising=False)
    assert registry.unavailable() == {}


def test_unavailable_names_missing_robot_assets(only_variable, no_loading):
    missing = registry.unavailable()
    assert list(missing) == _robot_envs() and "CartpoleBalance" not in missing
    reason = missing["Go1Getup"]
    assert all(t in reason for t in ("unitree_go1", "jaxrl[robots]", "JAXRL_MENAGERIE_PATH"))
    for robot in ("unitree_go1", "franka_emika_panda"):
        (only_variable / robot).mkdir()
    missing = registry.unavailable()
    assert "Go1Getup" not in missing and "PandaPickCube" not in missing
    assert "G1JoystickFlatTerrain" in missing and "unitree_g1" in missing["G1JoystickFlatTerrain"]
    assert "robotiq_2f85_v4" in missing["PandaRobotiqPushCube"]
    assert "franka_emika_panda" not in missing["PandaRobotiqPushCube"]


def test_unavailable_without_any_source(only_variable, monkeypatch, no_loading):
    monkeypatch.delenv(assets.MENAGERIE_VAR)
    missing = registry.unavailable()
    assert list(missing) == _robot_envs() and "no asset source" in missing["T1JoystickFlatTerrain"]


def test_unavailable_with_a_bad_variable(tmp_path, monkeypatch, no_loading):
    monkeypatch.setenv(assets.MENAGERIE_VAR, str(tmp_path / "missing"))
    missing = registry.unavailable()
    assert list(missing) == _robot_envs() and "not a directory" in missing["Go1Getup"]


def test_unavailable_lists_unsupported_names(scratch, monkeypatch):
    monkeypatch.delenv(assets.MENAGERIE_VAR, raising=False)
    assert registry.unavailable() == {"ScratchGamma": "not supported: no gamma"}


def test_playground_names_are_cached_per_install(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    registry.playground_envs.cache_clear()
    try:
        names = registry.playground_envs()
        path = registry._playground_names_path()
        assert path.startswith(str(tmp_path))
        with open(path) as f:
            assert json.load(f) == list(names)
        assert "CartpoleBalance" in names and len(names) > 40
        # Read back without importing mujoco_playground (reading it now fails).
        def no_import():
            raise ImportError("mujoco_playground must not be imported")

        registry.playground_envs.cache_clear()
        monkeypatch.setattr(registry, "_import_playground_names", no_import)
        assert registry.playground_envs() == names
        # A corrupt file is rebuilt, which needs the import.
        with open(path, "w") as f:
            f.write("{not json")
        registry.playground_envs.cache_clear()
        with pytest.raises(ImportError, match="must not be imported"):
            registry.playground_envs()
    finally:
        registry.playground_envs.cache_clear()


def test_pure_jax_env_does_not_import_playground_once_names_are_cached(tmp_path):
    code = ("import sys; from jaxrl.envs import registry, make, make_spec; "
            "registry.check_env_name('PointMaze'); make_spec(make('PointMaze'), 'PointMaze'); "
            "print('mujoco_playground' in sys.modules)")
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           timeout=300, check=True).stdout.split()[-1] for _ in range(2)]
    assert runs == ["True", "False"]  # the first run lists Playground's envs and caches them
