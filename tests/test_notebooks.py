"""Notebooks run top to bottom (as in Colab, minus the install cell's pip call)."""

import os
import pathlib

import pytest

nbformat = pytest.importorskip("nbformat", reason="install the `notebooks` extra")
nbclient = pytest.importorskip("nbclient", reason="install the `notebooks` extra")

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


# The locomotion notebook (Go1 with domain randomization, export, closed loop) takes minutes
# on CPU: JAXRL_TEST_ALL_ENVS=1 (its pieces have their own tests in the default suite).
_HEAVY = {"locomotion.ipynb"}
_RUN = [pytest.param(p, id=p.name, marks=pytest.mark.skipif(
            p.name in _HEAVY and not os.environ.get("JAXRL_TEST_ALL_ENVS"),
            reason="set JAXRL_TEST_ALL_ENVS=1")) for p in NOTEBOOKS]


@pytest.mark.slow  # a kernel and a training run: out of the quick loop, in the default suite
@pytest.mark.parametrize("path", _RUN)
def test_notebook_runs(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors


def _install_cell(path) -> str:
    nb = nbformat.read(path, as_version=4)
    return next(c.source for c in nb.cells if c.cell_type == "code")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_install_cell_installs_this_project(path, monkeypatch, tmp_path):
    """In a kernel without jaxrl (as in Colab), the first code cell pip-installs this checkout
    (never the unrelated PyPI project `jaxrl`), from a git URL or path in JAXRL_SOURCE when set,
    and says how to get the code when it finds none."""
    import importlib.util
    import os
    import subprocess

    calls = []
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    monkeypatch.setattr(subprocess, "run", lambda args, check: calls.append(args))
    monkeypatch.delenv("JAXRL_SOURCE", raising=False)
    root = path.resolve().parents[1]
    monkeypatch.chdir(path.parent)  # where Jupyter starts the notebook's kernel
    exec(_install_cell(path), {})
    assert calls[-1][-1] == f"{root}[robots,export]" and calls[-1][1:4] == ["-m", "pip", "install"]
    monkeypatch.setenv("JAXRL_SOURCE", "git+https://example.org/jaxrl.git")
    exec(_install_cell(path), {})
    assert calls[-1][-1] == "jaxrl[robots,export] @ git+https://example.org/jaxrl.git"
    # A CUDA build of jax (a Colab GPU runtime) is upgraded with its plugin, not replaced.
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "jax_cuda12_plugin" else None)
    exec(_install_cell(path), {})
    assert calls[-1][-2:] == ["jaxrl[robots,export] @ git+https://example.org/jaxrl.git",
                              "jax[cuda12]"]
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    monkeypatch.delenv("JAXRL_SOURCE")
    monkeypatch.chdir(tmp_path)  # no checkout here, above or in ./jaxrl
    with pytest.raises(RuntimeError, match="clone its repository"):
        exec(_install_cell(path), {})
    assert len(calls) == 3 and os.getcwd() == str(tmp_path)
