"""Assertions shared by tests in several folders (importable by name: pytest puts `tests/` on
`sys.path` for its `conftest.py`)."""

import jax
import numpy as np


def assert_trees_equal(a, b) -> None:
    """Same structure and bit-identical leaves; a mismatch names the leaf's path."""
    leaves_a, tree_a = jax.tree_util.tree_flatten_with_path(a)
    leaves_b, tree_b = jax.tree.flatten(b)
    assert tree_a == tree_b
    for (path, x), y in zip(leaves_a, leaves_b, strict=True):
        assert np.array_equal(np.asarray(x), np.asarray(y)), jax.tree_util.keystr(path)
