"""`Logger(..., wandb=...)`: the optional W&B sink, offline (no network, no account, no JAX).

What was logged is read back from the offline run's `.wandb` file, the transaction log that
`wandb sync` uploads (wandb 0.31 ships no Python reader for it, so a small one is below).
"""

from __future__ import annotations

import glob
import json
import math
import os
import re
import struct
import subprocess
import sys
import time
import zlib

import pytest

from jaxrl.run.logging import Logger, read_jsonl

wandb = pytest.importorskip("wandb")
from wandb.proto import wandb_internal_pb2  # noqa: E402

from jaxrl.run import wandb_sink  # noqa: E402

METRICS = {"eval/episode_return": 1.5, "perf/sps": 100.0, "episode/return": float("nan"),
           "chunk": 1, "layout": "single"}


def _wandb_core_children() -> list[int]:
    """Pids of wandb-core processes started by this process (Linux /proc)."""
    pids = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                text = f.read()
        except OSError:
            continue
        comm = text[text.index("(") + 1: text.rindex(")")]
        ppid = int(text[text.rindex(")") + 2:].split()[1])
        if ppid == os.getpid() and comm.startswith("wandb-core"):
            pids.append(int(stat.split("/")[2]))
    return pids


@pytest.fixture(scope="module", autouse=True)
def offline_wandb(tmp_path_factory):
    """Offline W&B with its config/cache in a temp folder; stops wandb's service at the end."""
    home = tmp_path_factory.mktemp("wandb_home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WANDB_MODE", "offline")
        for var in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
            mp.setenv(var, str(home / var.lower()))
        mp.setenv("NETRC", str(home / "no-netrc"))  # never read the user's credentials
        mp.delenv("WANDB_API_KEY", raising=False)
        mp.setenv("WANDB__DISABLE_STATS", "true")  # no system-metrics sampler: faster init
        mp.setenv("WANDB__DISABLE_MACHINE_INFO", "true")
        mp.setenv("WANDB_DISABLE_GIT", "true")
        mp.setenv("WANDB_DISABLE_CODE", "true")
        wandb.teardown()  # settings are read once per process: start from these
        yield
        wandb.teardown()
    deadline = time.time() + 10
    while _wandb_core_children() and time.time() < deadline:
        time.sleep(0.1)
    assert not _wandb_core_children(), "wandb-core still running after wandb.teardown()"


def _records(path: str):
    """The protobuf `Record`s of a `.wandb` file (LevelDB-log framing: 32 KiB blocks, each
    chunk a 7-byte header `crc32, length, type` with type 1 full, 2 first, 3 middle, 4 last)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 7:  # not written yet
        return
    assert data[:4] == b":W&B" and struct.unpack("<HB", data[4:7]) == (0xBEE1, 0)
    pos, parts, block = 7, [], 32768
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # block trailer: padding
            pos += block - pos % block
            continue
        crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0:  # zero padding up to the block's end
            pos += block - pos % block
            continue
        chunk = data[pos + 7:pos + 7 + length]
        if len(chunk) < length:  # still being written
            return
        assert zlib.crc32(bytes([kind]) + chunk) & 0xFFFFFFFF == crc
        pos += 7 + length
        parts = [chunk] if kind in (1, 2) else parts + [chunk]
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(b"".join(parts))
            yield record


def _complete_records(path: str, timeout: float = 10.0) -> list:
    """The records of a finished run's `.wandb` file, once its closing `exit` record is there.

    `run.finish()` returns when wandb-core has handled the exit, and its writer may flush
    the file a few ms later (seen in 0.31: right after finish() the file often holds only
    its 7-byte header).
    """
    deadline = time.time() + timeout
    while True:
        records = list(_records(path))
        if records and records[-1].WhichOneof("record_type") == "exit":
            return records
        assert time.time() < deadline, f"{path} has no exit record"
        time.sleep(0.01)


def _read_run(run_folder: str) -> tuple[object, list[dict]]:
    """(the `run` record, history rows as {key: value}) of one offline run folder."""
    (path,) = glob.glob(os.path.join(run_folder, "run-*.wandb"))
    run, rows = None, []
    for r in _complete_records(path):
        kind = r.WhichOneof("record_type")
        if kind == "run":
            run = r.run
        elif kind == "history":
            rows.append({it.key or "/".join(it.nested_key): json.loads(it.value_json)
                         for it in r.history.item})
    assert run is not None
    return run, rows


def _offline_runs(run_dir) -> list[str]:
    return sorted(glob.glob(os.path.join(str(run_dir), "wandb", "offline-run-*")))


def _member(name: str, **extra) -> dict:
    return {"name": name, "group": "sweep-x", "config": {"a": 1}, **extra}


def test_logger_writes_offline_wandb_run(tmp_path):
    run_dir = tmp_path / "run"
    logger = Logger(str(run_dir), 30, progress=False, wandb=_member("m0"))
    for steps in (10, 20, 30):
        logger.log({"env_steps": steps, "wall_time": 0.1 * steps, **METRICS})
    logger.close()
    logger.close()  # closing twice finishes the W&B run once

    (folder,) = _offline_runs(run_dir)
    assert folder.endswith("-" + (run_dir / "wandb_id.txt").read_text().strip())
    run, rows = _read_run(folder)
    assert (run.display_name, run.run_group, run.project) == ("m0", "sweep-x", "jaxrl")
    config = {u.key: json.loads(u.value_json) for u in run.config.update}
    assert config["a"] == 1
    assert [row["_step"] for row in rows] == [10, 20, 30]
    for row in rows:
        assert row["eval/episode_return"] == 1.5 and row["perf/sps"] == 100.0
        assert "episode/return" not in row  # NaN: nothing to plot
        user_keys = [k for k in row if not k.startswith("_")]
        assert all("/" in k for k in user_keys), user_keys  # no chunk, layout, env_steps
        assert all(math.isfinite(v) for k, v in row.items() if k in user_keys)
    assert len(read_jsonl(str(run_dir / "metrics.jsonl"))) == 3  # the other sinks still write
    assert os.listdir(run_dir / "tb")


def test_two_members_open_at_once_log_independently(tmp_path):
    a = Logger(str(tmp_path / "m0"), 30, progress=False, wandb=_member("m0"))
    b = Logger(str(tmp_path / "m1"), 30, progress=False, wandb=_member("m1"))
    for steps in (10, 20):
        a.log({"env_steps": steps, "eval/episode_return": 1.0})
        b.log({"env_steps": steps * 2, "eval/episode_return": -1.0})
    a.close()
    b.log({"env_steps": 60, "eval/episode_return": -2.0})  # still open after a's finish
    b.close()

    run_a, rows_a = _read_run(_offline_runs(tmp_path / "m0")[0])
    run_b, rows_b = _read_run(_offline_runs(tmp_path / "m1")[0])
    assert run_a.run_id != run_b.run_id
    assert (run_a.display_name, run_b.display_name) == ("m0", "m1")
    assert run_a.run_group == run_b.run_group == "sweep-x"
    assert [(r["_step"], r["eval/episode_return"]) for r in rows_a] == [(10, 1.0), (20, 1.0)]
    assert [(r["_step"], r["eval/episode_return"]) for r in rows_b] == [
        (20, -1.0), (40, -1.0), (60, -2.0)]


def test_reopened_run_dir_continues_the_same_run(tmp_path):
    run_dir = str(tmp_path / "run")
    first = Logger(run_dir, 20, progress=False, wandb=_member("m0", project="jaxrl-test"))
    first.log({"env_steps": 10, "eval/episode_return": 1.0})
    first.close()
    run_id = open(os.path.join(run_dir, "wandb_id.txt")).read().strip()
    second = Logger(run_dir, 20, progress=False, wandb=_member("m0", project="jaxrl-test"))
    assert second._wandb.id == run_id
    second.log({"env_steps": 20, "eval/episode_return": 2.0})
    second.close()

    folders = _offline_runs(run_dir)
    assert len(folders) == 2  # one per session; `wandb sync` sends both to run `run_id`
    runs = [_read_run(f) for f in folders]
    assert {run.run_id for run, _ in runs} == {run_id}
    assert {run.project for run, _ in runs} == {"jaxrl-test"}
    assert sorted(row["_step"] for _, rows in runs for row in rows) == [10, 20]


def test_missing_wandb_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` now fails
    with pytest.raises(ImportError, match=re.escape(
            "`--logger wandb` needs the wandb package: pip install 'jaxrl[wandb]'")):
        Logger(str(tmp_path / "run"), 10, progress=False, wandb=_member("m0"))
    assert not (tmp_path / "run" / "metrics.jsonl").exists()  # failed before opening files


def test_without_wandb_argument_wandb_is_not_imported(tmp_path):
    code = ("import sys; from jaxrl.run.logging import Logger; "
            f"log = Logger({str(tmp_path)!r}, 10, progress=False); "
            "log.log({'env_steps': 10, 'eval/episode_return': 1.0}); log.close(); "
            "assert 'wandb' not in sys.modules, 'wandb imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_mode_is_offline_without_account(monkeypatch):
    wandb.teardown()  # the mode check reads wandb's per-process settings afresh
    try:
        monkeypatch.delenv("WANDB_MODE")
        assert wandb_sink.resolve_mode() == "offline"  # no key, no netrc: no login prompt
        monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
        assert wandb_sink.resolve_mode() is None  # credentials: wandb's default (online)
        monkeypatch.setenv("WANDB_MODE", "disabled")
        assert wandb_sink.resolve_mode() == "disabled"
    finally:
        monkeypatch.undo()
        wandb.teardown()


@pytest.mark.slow  # compiles a small two-member sweep
def test_sweep_members_are_one_wandb_group(tmp_path):
    from jaxrl.run import cli

    sweep_dir = tmp_path / "lr-sweep"
    cli.main(["sweep", "--preset", "ppo-toy-cpu", "--grid", "ppo.learning_rate=1e-3,3e-3",
              "--num-chunks", "2", "--total-env-steps", "4096", "--logger", "wandb",
              "--sweep-dir", str(sweep_dir), "--no-progress"])
    members = sorted((sweep_dir / "members").iterdir())
    assert len(members) == 2
    for member in members:
        (folder,) = _offline_runs(member)
        run, rows = _read_run(folder)
        assert run.run_group == "lr-sweep" and run.display_name == member.name
        assert [r["_step"] for r in rows] == [2048, 4096]
        assert all(math.isfinite(r["eval/episode_return"]) for r in rows)
