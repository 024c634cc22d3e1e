"""Dependency arrows point one way: the core never imports an agent, env or config by name."""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEES_ALL = {"cli.py", "runner.py"}
FORBIDDEN = ("jaxrl.agents", "jaxrl.envs", "jaxrl.configs")


def _imports(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            yield from (f"{node.module}.{a.name}" for a in node.names)


def test_core_imports_no_agent_env_or_config():
    bad = []
    for path in sorted((ROOT / "jaxrl").glob("*.py")):
        if path.name in SEES_ALL:
            continue
        for name in _imports(path):
            if name.startswith(FORBIDDEN):
                if not (path.name == "agent.py" and name == "jaxrl.agents"):  # registry lookup
                    bad.append(f"{path.name}: {name}")
    assert not bad, bad


def test_agents_and_envs_do_not_import_each_other():
    for folder, other in (("agents", "jaxrl.envs"), ("envs", "jaxrl.agents")):
        for path in (ROOT / folder).glob("*.py"):
            assert not any(n.startswith(other) for n in _imports(path)), path
