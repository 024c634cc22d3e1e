"""Env families register themselves: `make`, `list_envs` and `check_env_name` know a new family
without edits, duplicates are clear errors, unknown names still get close matches."""

import pytest

from jaxrl.envs import UnknownEnvError, check_env_name, list_envs, make, registry, toy


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
