"""Robot assets resolve with no configuration: the two wheels' Menagerie folders merge into one
view, `$JAXRL_MENAGERIE_PATH` wins per robot, stale views are rebuilt, and a robot that no source
has fails with an error naming the extra and the variable. Folder listings only: no env loads
except the two `make` calls that check the error."""

import shutil

import pytest

from jaxrl.envs import EnvAssetError, assets, make

LARGE, HUMANOID = assets.ASSET_PACKAGES


@pytest.fixture
def no_variable(monkeypatch):
    monkeypatch.delenv(assets.MENAGERIE_VAR, raising=False)


@pytest.fixture
def fake_menagerie(tmp_path, monkeypatch):
    """A Menagerie checkout in tmp_path with `unitree_go1` and `my_robot`, set as the variable."""
    root = tmp_path / "menagerie"
    for robot in ("unitree_go1", "my_robot"):
        (root / robot).mkdir(parents=True)
    monkeypatch.setenv(assets.MENAGERIE_VAR, str(root))
    return root


def _package_of(path):
    return next(p for p in assets.ASSET_PACKAGES if p in path.resolve().parts)


def test_wheels_are_found_with_no_variable(tmp_path, no_variable):
    roots = assets.wheel_roots()
    assert [_package_of(r) for r in roots] == [LARGE, HUMANOID]
    assert assets.sources()[:2] == roots
    view = assets.menagerie_view(cache_dir=tmp_path)
    assert view.parent == tmp_path and view.name.startswith("menagerie-")
    assert _package_of(view / "unitree_go1") == LARGE
    assert _package_of(view / "unitree_g1") == HUMANOID
    assert (view / "unitree_go1" / "LICENSE").is_file()  # each robot folder has its own
    assert assets.menagerie_view(cache_dir=tmp_path) == view  # current: reused as it is


def test_variable_wins_per_robot(tmp_path, fake_menagerie):
    assert assets.sources()[0] == fake_menagerie.resolve()
    view = assets.menagerie_view(cache_dir=tmp_path / "cache")
    assert (view / "unitree_go1").resolve() == (fake_menagerie / "unitree_go1").resolve()
    assert (view / "my_robot").resolve() == (fake_menagerie / "my_robot").resolve()
    assert _package_of(view / "unitree_g1") == HUMANOID  # the wheel fills in the rest
    assert _package_of(view / "franka_emika_panda") == LARGE


def test_view_is_rebuilt_when_a_link_no_longer_resolves(tmp_path, fake_menagerie):
    cache = tmp_path / "cache"
    view = assets.menagerie_view(cache_dir=cache)
    shutil.rmtree(fake_menagerie / "my_robot")
    assert not (view / "my_robot").exists()  # the link dangles
    assert assets.menagerie_view(cache_dir=cache) == view
    assert not (view / "my_robot").is_symlink() and (view / "unitree_g1").is_dir()
    (view / "unitree_g1").unlink()  # a link removed by hand
    assert assets.menagerie_view(cache_dir=cache) == view and (view / "unitree_g1").is_dir()
    assert [p.name for p in cache.iterdir()] == [view.name]  # no temporary folder left


def test_single_source_is_used_directly(tmp_path, fake_menagerie, monkeypatch):
    monkeypatch.setattr(assets, "wheel_roots", lambda: [])
    monkeypatch.setattr(assets, "playground_root", lambda: None)
    assert assets.menagerie_view(cache_dir=tmp_path / "cache") == fake_menagerie.resolve()
    monkeypatch.delenv(assets.MENAGERIE_VAR)
    assert assets.sources() == [] and assets.menagerie_view(cache_dir=tmp_path) is None


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_non_directory_variable_is_an_error(tmp_path, monkeypatch, kind):
    path = tmp_path / "menagerie"
    if kind == "file":
        path.write_text("not a folder")
    monkeypatch.setenv(assets.MENAGERIE_VAR, str(path))
    for call in (assets.sources, lambda: assets.menagerie_view(cache_dir=tmp_path / "cache"),
                 lambda: assets.missing_folders("Go1Getup")):
        with pytest.raises(EnvAssetError, match="is not a directory"):
            call()


def test_robot_folders_by_env_name():
    assert assets.robot_folders("Go1Getup") == ("unitree_go1",)
    assert assets.robot_folders("G1JoystickRoughTerrain") == ("unitree_g1",)
    assert assets.robot_folders("PandaPickCube") == ("franka_emika_panda",)
    assert assets.robot_folders("PandaRobotiqPushCube") == ("franka_emika_panda",
                                                            "robotiq_2f85_v4")
    assert assets.robot_folders("CartpoleBalance") == assets.robot_folders("ant") == ()
    have = {"franka_emika_panda": None}
    assert assets.missing_folders("PandaRobotiqPushCube", have) == ["robotiq_2f85_v4"]
    assert assets.missing_folders("CartpoleBalance", {}) == []


def test_every_table_folder_is_in_a_wheel(no_variable):
    have = assets.robots(assets.wheel_roots())
    needed = {f for folders in assets.ROBOT_FOLDERS.values() for f in folders}
    assert needed <= have.keys(), needed - have.keys()


def _no_wheels(monkeypatch, menagerie):
    monkeypatch.setenv(assets.MENAGERIE_VAR, str(menagerie))
    monkeypatch.setattr(assets, "wheel_roots", lambda: [])
    monkeypatch.setattr(assets, "playground_root", lambda: None)


def test_missing_robot_names_the_extra_and_the_variable(tmp_path, monkeypatch):
    _no_wheels(monkeypatch, tmp_path)  # an empty Menagerie and no wheels
    with pytest.raises(EnvAssetError) as err:
        make("Go1JoystickFlatTerrain")
    for text in ("Go1JoystickFlatTerrain", "unitree_go1", 'jaxrl[robots]', "JAXRL_MENAGERIE_PATH"):
        assert text in str(err.value)


def test_robot_folder_without_its_files_names_the_extra(tmp_path, monkeypatch):
    (tmp_path / "unitree_go1").mkdir()  # the folder is there, its files are not
    _no_wheels(monkeypatch, tmp_path)
    with pytest.raises(EnvAssetError, match=r"jaxrl\[robots\].*JAXRL_MENAGERIE_PATH"):
        make("Go1JoystickFlatTerrain")
