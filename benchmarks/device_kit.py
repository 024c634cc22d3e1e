"""Device kit: what a bare GPU machine needs to run `gpu_check.py`, in one folder that travels.

    .venv/bin/python benchmarks/device_kit.py              # build .kit/, print the device command
    .venv/bin/python benchmarks/device_kit.py --rehearse   # ... then install it with no index into
                                                           # a fresh Python 3.12 venv, run --quick

The GPU machine this targets (an H200 lent for 15 minutes, see README "GPU check") starts bare,
reaches no package registry, and has its own Python 3.12 with jax 0.11.2 and its CUDA plugin,
flax, optax, chex, orbax-checkpoint, onnx, onnxruntime and the usual scientific stack
(`PREINSTALLED`), but no MuJoCo, MJX, Brax, Playground, tyro or tensorboardX and no robot assets.
At most 64 MiB travels with the working tree. This script, run on a machine with an index:

1. walks jaxrl's installed requirements (`importlib.metadata`, so the versions are the ones this
   venv was tested with) and, for every package that is neither preinstalled there nor in
   `LEFT_OUT` (not imported by the GPU rows; warp-lang's 149 MB wheel is over the limit, so MJX
   runs its JAX implementation, `jaxrl.envs.registry.default_impl`), downloads the cp312
   manylinux x86_64 wheel with `pip download --no-deps` into `.kit/wheels`; builds jaxrl's own
   wheel from this tree beside them;
2. packs the Menagerie folders the GPU rows read (`gpu_check.ENVS`: Go1's `unitree_go1`, without
   its preview image; CartpoleBalance needs none) from the `[robots]` wheels into
   `.kit/menagerie.tar.xz`;
3. checks that the kit plus the working tree stays under `--max-mib` (48 MiB: well under 64),
   writes `.kit/manifest.json` and prints the one command to paste into the device tool (`carry`
   `.kit`): install with `--no-index --no-deps --target` (the machine's jax and CUDA packages are
   never touched), unpack the assets, set `JAXRL_MENAGERIE_PATH`, and run `gpu_check.py` under
   `timeout` so that it ends inside 9 minutes, its JSON, log and Go1 artifacts in `$OUT`.

`.kit/` is ignored by git; rebuild it after changing code (jaxrl's wheel is built from the tree).
`tests/test_device_kit.py` keeps `PREINSTALLED`, `LEFT_OUT` and the wheel list in sync with
`pyproject.toml`.
"""

from __future__ import annotations

import argparse
import glob
import importlib.metadata as md
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile

from packaging.requirements import Requirement

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KIT = os.path.join(REPO, ".kit")
PYTHON_VERSION = "3.12"
PLATFORMS = ("manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_24_x86_64",
             "manylinux_2_27_x86_64", "manylinux_2_28_x86_64", "manylinux_2_31_x86_64",
             "manylinux_2_34_x86_64", "manylinux_2_35_x86_64", "manylinux1_x86_64")
# The GPU machine's own packages (the device tool's KINDS.md, "Python packages already there",
# read 2026-11-17), as far as jaxrl's requirements reach them: never shipped, never replaced.
PREINSTALLED = frozenset("""
absl-py aiofiles attrs chex click contourpy cycler etils flatbuffers flax fonttools fsspec
humanize imageio jax jaxlib jinja2 kiwisolver lxml markdown-it-py markupsafe matplotlib mdurl
ml-dtypes msgpack numpy onnx onnxruntime opt-einsum optax orbax-checkpoint packaging pillow
prometheus-client protobuf psutil pygments pyparsing python-dateutil pyyaml rich scipy
simplejson six tensorstore toolz tqdm treescope typing-extensions uvloop werkzeug zipp
""".split())
# Requirements of our requirements that the GPU rows never import, with the reason.
LEFT_OUT = {
    "warp-lang": "149 MB wheel, over the 64 MiB that travels: MJX's JAX implementation runs "
                 "instead (jaxrl.envs.registry.default_impl falls back when warp is absent)",
    "mujoco-studio": "MuJoCo's interactive viewer (`mujoco` imports it only for the viewer)",
    "glfw": "windowed rendering", "pyopengl": "rendering (`jaxrl render`; the GPU rows render "
                                              "nothing)",
    "mediapy": "Playground's video helpers, not imported by its envs",
    "flask": "Brax's web viewer", "flask-cors": "Brax's web viewer",
}
ROBOT_FILES_SKIPPED = (".png", ".jpg", "CHANGELOG.md", "README.md")


def norm(name: str) -> str:
    """PEP 503 normalized project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def kit_packages(root: str = "jaxrl") -> dict[str, str]:
    """`{name: installed version}` of the packages the kit ships: `root`'s requirements, walked
    through installed metadata, stopping at `PREINSTALLED` and `LEFT_OUT` packages.

    Raises:
        RuntimeError: a requirement on the walk is not installed here.
    """
    found: dict[str, str] = {}
    todo = [req for req in md.distribution(root).requires or []]
    while todo:
        req = Requirement(todo.pop())
        name = norm(req.name)
        if req.marker and not req.marker.evaluate({"extra": ""}):
            continue
        if name in found or name in PREINSTALLED or name in LEFT_OUT:
            continue
        try:
            dist = md.distribution(req.name)
        except md.PackageNotFoundError as e:
            raise RuntimeError(f"{req.name} (required on the way from {root}) is not installed "
                               "here: install the project first (`pip install -e .`).") from e
        found[name] = dist.version
        todo.extend(dist.requires or [])
    return dict(sorted(found.items()))


def download_wheels(packages: dict[str, str], dest: str) -> list[str]:
    """Downloads each `name==version` for cp312 manylinux x86_64 (no deps) into `dest`, drops
    wheels of other versions, and builds jaxrl's wheel from the tree; returns the wheel files."""
    os.makedirs(dest, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
           "--python-version", PYTHON_VERSION, "--implementation", "cp", "-d", dest]
    for p in PLATFORMS:
        cmd += ["--platform", p]
    subprocess.run(cmd + [f"{n}=={v}" for n, v in packages.items()], check=True)
    for f in os.listdir(dest):
        if f.startswith("jaxrl-"):
            os.remove(os.path.join(dest, f))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", REPO, "-w", dest],
                   check=True)
    wanted = {norm(n): v for n, v in packages.items()} | {"jaxrl": md.version("jaxrl")}
    kept = []
    for f in sorted(os.listdir(dest)):
        name, version = f.split("-")[:2]
        if wanted.get(norm(name)) == version:
            kept.append(f)
        else:
            os.remove(os.path.join(dest, f))
    missing = set(wanted) - {norm(f.split("-")[0]) for f in kept}
    if missing:
        raise RuntimeError(f"no wheel downloaded for {', '.join(sorted(missing))}")
    return kept


def pack_menagerie(env_names, out: str) -> list[str]:
    """Packs the Menagerie folders `env_names` read into the tar.xz `out`; returns the folders."""
    from jaxrl.envs import assets

    have = assets.robots(assets.sources())
    folders = sorted({f for name in env_names for f in assets.robot_folders(name)})
    missing = [f for f in folders if f not in have]
    if missing:
        raise RuntimeError(f"robot folders {missing} not found: " + assets.install_hint())
    with tarfile.open(out, "w:xz") as tar:
        for folder in folders:
            tar.add(have[folder], arcname=folder,
                    filter=lambda t: None if t.name.endswith(ROBOT_FILES_SKIPPED) else t)
    return folders


def tree_bytes() -> int:
    """Bytes of the working tree that travels: tracked and untracked-not-ignored files."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO,
                           capture_output=True, check=True).stdout.decode().split("\0")
    return sum(os.path.getsize(os.path.join(REPO, f)) for f in files
               if f and os.path.isfile(os.path.join(REPO, f)))


def folder_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def device_command(end_s: int = 540) -> str:
    """The one command for the device tool (run from the repository root, `carry` `.kit`)."""
    return (
        "set -o pipefail; python3 -m pip install -q --no-index --no-deps --no-compile "
        "--no-cache-dir --target /tmp/kit-site .kit/wheels/*.whl 2>&1 | tee $OUT/install.log "
        "&& export PYTHONPATH=/tmp/kit-site JAXRL_MENAGERIE_PATH=/tmp/kit-menagerie "
        "PYTHONUNBUFFERED=1 && python3 -c \"import tarfile; "
        "tarfile.open('.kit/menagerie.tar.xz').extractall('/tmp/kit-menagerie')\" && "
        f"timeout -k 10 {end_s} python3 benchmarks/gpu_check.py --end-s {end_s - 15} "
        "--out $OUT/gpu_check.json --artifacts $OUT 2>&1 | tee $OUT/gpu_check.log")


def build(max_mib: float) -> dict:
    """Builds `.kit/` and returns its manifest (also written to `.kit/manifest.json`)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gpu_check

    packages = kit_packages()
    wheels = download_wheels(packages, os.path.join(KIT, "wheels"))
    folders = pack_menagerie(gpu_check.ENVS, os.path.join(KIT, "menagerie.tar.xz"))
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                            text=True).stdout.strip()
    kit_b, tree_b = folder_bytes(KIT), tree_bytes()
    manifest = {"packages": packages, "wheels": wheels, "menagerie_folders": folders,
                "commit": commit, "kit_bytes": kit_b, "tree_bytes": tree_b,
                "left_out": LEFT_OUT, "command": device_command()}
    with open(os.path.join(KIT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
    total = (kit_b + tree_b) / 2**20
    if total > max_mib:
        raise SystemExit(f"error: kit {kit_b / 2**20:.1f} MiB + tree {tree_b / 2**20:.1f} MiB "
                         f"= {total:.1f} MiB, over --max-mib {max_mib:g}.")
    print(f"kit: {len(wheels)} wheels + {', '.join(folders)} = {kit_b / 2**20:.1f} MiB; "
          f"with the working tree {total:.1f} MiB (limit 64 MiB)")
    return manifest


def find_python() -> str:
    """The first `python3.12` on PATH that runs (a pyenv shim may exist without its version
    selected), else this interpreter."""
    pyenv = sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{PYTHON_VERSION}.*/bin/"
                                                "python")), reverse=True)
    for candidate in (shutil.which(f"python{PYTHON_VERSION}"), *pyenv):
        if candidate and subprocess.run([candidate, "--version"], capture_output=True
                                        ).returncode == 0:
            return candidate
    return sys.executable


def rehearse(python: str, venv: str) -> None:
    """Installs the GPU machine's preinstalled set (CPU jax 0.11.2) into a fresh venv at `venv`,
    then the kit with no index, and runs `gpu_check.py --quick` there."""
    if not os.path.exists(os.path.join(venv, "bin", "python")):
        subprocess.run([python, "-m", "venv", venv], check=True)
        pre = sorted(PREINSTALLED - {"jax", "jaxlib"}) + ["jax==0.11.2", "jaxlib==0.11.2"]
        subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q", *pre], check=True)
    site = tempfile.mkdtemp(prefix="kit-site-")
    wheels = os.path.join(KIT, "wheels")
    subprocess.run([os.path.join(venv, "bin", "python"), "-m", "pip", "install", "-q",
                    "--no-index", "--no-deps", "--no-compile", "--target", site,
                    *[os.path.join(wheels, w) for w in sorted(os.listdir(wheels))]], check=True)
    assets_dir = tempfile.mkdtemp(prefix="kit-menagerie-")
    with tarfile.open(os.path.join(KIT, "menagerie.tar.xz")) as tar:
        tar.extractall(assets_dir, filter="data")
    env = dict(os.environ, PYTHONPATH=site, JAXRL_MENAGERIE_PATH=assets_dir,
               HOME=tempfile.mkdtemp(prefix="kit-home-"), JAX_PLATFORMS="cpu")
    out = os.path.join(tempfile.mkdtemp(prefix="kit-out-"), "gpu_check.json")
    subprocess.run([os.path.join(venv, "bin", "python"),
                    os.path.join(REPO, "benchmarks", "gpu_check.py"), "--quick", "--out", out,
                    "--artifacts", os.path.dirname(out)], env=env, check=True, cwd=REPO)
    shutil.rmtree(site, ignore_errors=True)
    print(f"rehearsal passed: {out}")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--max-mib", type=float, default=48.0,
                   help="largest kit + working tree (the device tool carries 64 MiB)")
    p.add_argument("--rehearse", action="store_true",
                   help="install the kit into a fresh venv with no index and run --quick")
    p.add_argument("--python", default=None,
                   help="interpreter for the rehearsal venv (default: the first python3.12 on "
                        "PATH that runs, else this one; the GPU machine has 3.12)")
    p.add_argument("--venv", default=os.path.join(REPO, ".venv-kit"),
                   help="rehearsal venv (created once)")
    args = p.parse_args(argv)
    manifest = build(args.max_mib)
    print("\ndevice command (device tool `run`, carry [\".kit\"], timeout_s 580):\n")
    print(manifest["command"])
    if args.rehearse:
        rehearse(args.python or find_python(), args.venv)


if __name__ == "__main__":
    main()
