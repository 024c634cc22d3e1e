"""Multi-host flags: bad or inconsistent input is a clear error before any device is used."""

from __future__ import annotations

import pytest

from jaxrl.run import cli, distributed


@pytest.mark.parametrize("args, message", [
    (("127.0.0.1:1234", 2, None), "go together"),
    ((None, 2, 0), "go together"),
    (("127.0.0.1", 2, 0), "HOST:PORT"),
    (("127.0.0.1:port", 2, 0), "HOST:PORT"),
    (("127.0.0.1:1234", 0, 0), "must be >= 1"),
    (("127.0.0.1:1234", 2, 2), "outside 0..1"),
    (("127.0.0.1:1234", 2, -1), "outside 0..1"),
])
def test_bad_flags_are_errors(args, message):
    with pytest.raises(ValueError, match=message):
        distributed.check_args(*args)


def test_process_count_must_match_slurm(monkeypatch):
    monkeypatch.setenv("SLURM_NTASKS", "4")
    with pytest.raises(ValueError, match="runs 4 tasks"):
        distributed.check_args("10.0.0.1:1234", 2, 0)
    distributed.check_args("10.0.0.1:1234", 4, 3)


def test_cluster_detection(monkeypatch):
    for var in ("JAX_COORDINATOR_ADDRESS", "SLURM_JOB_ID", "SLURM_NTASKS", "SLURM_PROCID"):
        monkeypatch.delenv(var, raising=False)
    assert not distributed.in_cluster()
    assert distributed.initialize() is False  # one process: nothing to join
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURM_PROCID", "0")
    monkeypatch.setenv("SLURM_NTASKS", "1")
    assert not distributed.in_cluster()  # a one-task allocation is one process
    monkeypatch.setenv("SLURM_NTASKS", "2")
    assert distributed.in_cluster()


def test_cli_rejects_bad_process_flags():
    with pytest.raises(SystemExit) as exit_:
        cli.main(["train", "--coordinator-address", "127.0.0.1:1234", "--num-processes", "2",
                  "--process-id", "5"])
    assert "outside 0..1" in str(exit_.value.code)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["train", "--num-processes", "two"])
    assert "must be an integer" in str(exit_.value.code)
