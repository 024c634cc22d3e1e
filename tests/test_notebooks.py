"""Notebooks run top to bottom (as in Colab, minus the install cell's pip call)."""

import pathlib

import pytest

nbformat = pytest.importorskip("nbformat", reason="install the `notebooks` extra")
nbclient = pytest.importorskip("nbclient", reason="install the `notebooks` extra")

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.slow  # a kernel and a training run: out of the quick loop, in the default suite
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
