"""The docs cannot drift from the code: marked snippets run, named files and imports exist.

A fenced block right after a `<!-- runnable -->` line in README.md or docs/*.md is run: per
file, its runnable Python blocks in order as one script, then its runnable bash blocks in order
as one `bash -e` script (the `jaxrl` command on PATH), both in one fresh folder. Keep them small
(toy env, tens of thousands of steps). Unmarked blocks are still checked: every
`from jaxrl... import name` in a Python block of README.md, docs/*.md and benchmarks/RESULTS.md
must resolve, and every repository path they name (`tests/...py`, `agents/...py`, ...) exist.
"""

from __future__ import annotations

import ast
import importlib
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CHECKED = [*DOCS, ROOT / "benchmarks" / "RESULTS.md"]
MARK = "<!-- runnable -->"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
# Modules a page tells the reader to create (not in the repository).
HYPOTHETICAL = {"jaxrl.agents.pg"}
HYPOTHETICAL_FILES = {"agents/pg.py"}
PATH = re.compile(r"(?<![\w/.])((?:tests|agents|envs|configs|jaxrl|benchmarks|notebooks|docs)"
                  r"/[\w/.-]+\.(?:py|md|ipynb))")


def blocks(path: pathlib.Path) -> list[tuple[str, str, bool]]:
    """(language, code, runnable) of every fenced block of `path`, in order."""
    text = path.read_text()
    out = []
    for m in FENCE.finditer(text):
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        out.append((m.group(1), m.group(2), before.strip() == MARK))
    return out


def test_marker_only_before_blocks():
    """A marker not followed by a fence would silently run nothing."""
    for path in DOCS:
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if line.strip() == MARK:
                assert i + 1 < len(lines) and lines[i + 1].startswith("```"), (
                    f"{path.name}:{i + 1}: {MARK} must directly precede a fenced block")


def _runnable(path):
    code = [(lang, src) for lang, src, run in blocks(path) if run]
    return ("\n".join(s for lang, s in code if lang == "python"),
            "\n".join(s for lang, s in code if lang == "bash"))


RUNNABLE = [p for p in DOCS if any(_runnable(p))]


def test_some_docs_are_runnable():
    assert {p.name for p in RUNNABLE} >= {"README.md", "add_an_agent.md", "add_an_env_family.md"}


@pytest.mark.slow  # trains small runs: out of the quick loop, in the default suite
@pytest.mark.parametrize("path", RUNNABLE, ids=[p.name for p in RUNNABLE])
def test_runnable_snippets(path, tmp_path):
    python, bash = _runnable(path)
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep
               + os.environ.get("PATH", ""))
    for cmd, code in (([sys.executable, "-"], python), (["bash", "-e", "-o", "pipefail", "-s"],
                                                        bash)):
        if not code:
            continue
        out = subprocess.run(cmd, input=code, capture_output=True, text=True, cwd=tmp_path,
                             env=env, timeout=900)
        assert out.returncode == 0, (f"{path.name}: runnable {cmd[0]} blocks failed\n"
                                     f"{out.stdout[-3000:]}\n{out.stderr[-3000:]}")


def _imports(code: str):
    try:
        tree = ast.parse(code)
    except SyntaxError:  # a fragment (e.g. a call shown on its own): nothing to check
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("jaxrl"):
            yield node.module, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            yield from ((a.name, []) for a in node.names if a.name.startswith("jaxrl"))


def _python_lines(lang: str, code: str) -> str:
    """The Python of a block: a python block, or the `python -c "..."` body of a shell one."""
    if lang == "python":
        return code
    m = re.search(r'python[\w./]* -c "\n?(.*?)"', code, re.S)
    return m.group(1) if m else ""


def test_imports_in_docs_resolve():
    bad = []
    for path in CHECKED:
        for lang, code, _ in blocks(path):
            for module, names in _imports(_python_lines(lang, code)):
                if module in HYPOTHETICAL:
                    continue
                try:
                    mod = importlib.import_module(module)
                except ImportError as err:
                    bad.append(f"{path.name}: import {module}: {err}")
                    continue
                bad += [f"{path.name}: from {module} import {n}" for n in names
                        if not hasattr(mod, n)
                        and importlib.util.find_spec(f"{module}.{n}") is None]
    assert not bad, "docs import names that do not exist:\n" + "\n".join(bad)


def test_paths_in_docs_exist():
    bad = [f"{path.name}: {p}" for path in CHECKED for p in PATH.findall(path.read_text())
           if not (ROOT / p).exists() and p not in HYPOTHETICAL_FILES]
    assert not bad, "docs name files that do not exist:\n" + "\n".join(bad)
