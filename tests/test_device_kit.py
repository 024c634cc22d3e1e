"""The GPU device kit (`benchmarks/device_kit.py`): its wheel list follows `pyproject.toml`, it
never ships the GPU machine's own jax/CUDA packages, its assets hold what `gpu_check.py` builds,
and its device command installs with no index and parses as `gpu_check.py` arguments."""

import importlib.metadata as md
import json
import os
import shlex
import sys
import tarfile

import pytest

from jaxrl.envs import assets

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
sys.path.insert(0, BENCH)

import device_kit  # noqa: E402
import gpu_check  # noqa: E402


def _pyproject_dependencies() -> list[str]:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    with open(os.path.join(device_kit.REPO, "pyproject.toml"), "rb") as f:
        deps = tomllib.load(f)["project"]["dependencies"]
    return [device_kit.norm(d.split(">")[0].split("=")[0].split("<")[0].strip()) for d in deps]


def test_every_dependency_is_shipped_preinstalled_or_left_out_with_a_reason():
    kit = device_kit.kit_packages()
    for name in _pyproject_dependencies():
        assert (name in kit) + (name in device_kit.PREINSTALLED) + (name in device_kit.LEFT_OUT) \
            == 1, name
    assert {"mujoco", "mujoco-mjx", "brax", "playground", "tyro", "tensorboardx",
            "mujoco-core", "ml-collections", "trimesh"} <= set(kit)


def test_kit_pins_the_tested_versions_and_never_replaces_jax_or_cuda():
    kit = device_kit.kit_packages()
    assert all(kit[name] == md.version(name) for name in kit)
    assert not [n for n in kit if n in ("jax", "jaxlib") or n.startswith(("jax-", "nvidia"))
                or "cuda" in n]
    assert not set(kit) & set(device_kit.LEFT_OUT)


def test_left_out_entries_are_real_requirements():
    """A left-out name that nothing requires any more is stale: it must be removed."""
    required = set()
    for dist in ["jaxrl", *device_kit.kit_packages()]:
        for r in md.distribution(dist).requires or []:
            required.add(device_kit.norm(r.split(";")[0].split("[")[0].split(" ")[0]
                                         .split(">")[0].split("=")[0].split("<")[0]))
    assert set(device_kit.LEFT_OUT) <= required, set(device_kit.LEFT_OUT) - required


def test_menagerie_archive_holds_the_rows_robots_without_images(tmp_path):
    if not assets.wheel_roots():
        pytest.skip("robot asset wheels not installed")
    out = tmp_path / "m.tar.xz"
    assert device_kit.pack_menagerie(gpu_check.ENVS, str(out)) == ["unitree_go1"]
    with tarfile.open(out) as tar:
        names = tar.getnames()
    assert "unitree_go1/LICENSE" in names
    assert any(n.startswith("unitree_go1/assets/") and n.endswith(".stl") for n in names)
    assert not [n for n in names if n.endswith(".png")]
    assert out.stat().st_size < 4 * 2**20


def test_device_command_installs_offline_and_its_gpu_check_arguments_parse():
    cmd = device_kit.device_command(end_s=540)
    assert len(cmd) < 2000  # the device tool's limit
    for flag in ("--no-index", "--no-deps", "--target", ".kit/wheels/*.whl",
                 "JAXRL_MENAGERIE_PATH", "$OUT/gpu_check.json", "timeout"):
        assert flag in cmd
    words = shlex.split(cmd.split("benchmarks/gpu_check.py", 1)[1].split("2>&1")[0])
    args = gpu_check.parse_args(words)
    assert args.end_s == 525 and args.artifacts == "$OUT" and not args.quick
    assert set(gpu_check.ROWS) >= {"raw-go1", "env-go1", "ppo-go1", "seeds-16"}


def test_gpu_check_quick_raw_and_env_stack_rows(tmp_path):
    """The raw and training-env rows run (CPU, tiny sizes) and the stack's ratio is computed."""
    out = tmp_path / "g.json"
    gpu_check.main(["--quick", "--only", "raw-cartpole", "env-cartpole", "--raw-steps", "5",
                    "--out", str(out), "--artifacts", str(tmp_path)])
    rows = json.loads(out.read_text())["rows"]
    raw, stack = rows["raw-cartpole"], rows["env-cartpole"]
    assert raw["sps"] > 0 and stack["sps"] > 0, rows
    assert stack["sps_vs_raw"] == pytest.approx(stack["sps"] / raw["sps"])
    assert stack["num_envs"] == raw["num_envs"] == gpu_check.QUICK_RAW_ENVS["CartpoleBalance"]
    assert (tmp_path / "simulator.log").exists()
