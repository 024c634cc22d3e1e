"""The import graph of jaxrl: no cycles, and dependency arrows point one way.

Every `.py` file of `jaxrl/` (recursively), `agents/`, `envs/` and `configs/` is parsed with
`ast`; `envs/`, `agents/` and `configs/` install as `jaxrl.envs`, `jaxrl.agents` and
`jaxrl.configs`. All imports count, module-level and inside functions (a lazy import is still
an arrow). `from a.b import c` is an arrow to the module `a.b.c` when that is a module or
package, else to `a.b`; `import a.b.c` is an arrow to the longest existing module of the path.
Importing a submodule does not count as an arrow to its parent package (the package is already
importing, or imported, when its submodule runs).

Layers (the arrows allowed):

- `jaxrl.engine` (the contract and the loop) imports only `jaxrl.engine`;
- `jaxrl.learning` (pure functions on data) imports only itself and the engine's data types
  (`jaxrl.engine.types`): never the agent contract, checks, the loop or the wrappers;
- agents (`jaxrl.agents`) and envs (`jaxrl.envs`) import the core (engine, learning) and their
  own package only: never `jaxrl.run` or `jaxrl.deploy`, never each other, and no agent module
  imports another agent module (`jaxrl/agents/__init__.py` registering them all is fine); code
  several agents share lives in `jaxrl.agents.common`, which imports no agent module;
- `jaxrl.configs` (presets) may import the core, agents and envs;
- `jaxrl.run` (assembly, runner, checkpoints, CLI) sees the core, agents, envs and configs; it
  imports `jaxrl.deploy` and `jaxrl.api` only from the CLI modules (`jaxrl.run.cli`,
  `cli_commands`, `cli_sweep`: the CLI sees everything);
- `jaxrl.deploy` (export, render, closed loop) imports the core only: it works on a loaded run
  handed to it and never names `jaxrl.run`, an agent, env or config module;
- `jaxrl.api` (the public API: train, sweep, load_run, evaluate, export, ...) sees everything
  but the CLI; the root package `jaxrl` imports only `jaxrl.api` (lazily, on first use of a
  name) and `jaxrl._version`, which imports nothing.

Only `jaxrl.run` (and `jaxrl.configs` for presets) may thus import `jaxrl.agents`, `jaxrl.envs`
or `jaxrl.configs`. A package `__init__` importing its own submodules is fine as long as no
cycle arises (a submodule importing names back from its package `__init__` is a cycle).
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCES = {"jaxrl": "jaxrl", "agents": "jaxrl.agents", "envs": "jaxrl.envs",
           "configs": "jaxrl.configs"}
CORE = {"engine", "learning"}
ALLOWED = {  # layer -> layers it may import (the root package `jaxrl` is not one of them)
    "root": {"api", "_version"},
    "_version": set(),
    "api": CORE | {"run", "agents", "envs", "configs", "deploy", "_version"},
    "engine": {"engine"},
    "learning": {"engine", "learning"},
    "agents": CORE | {"agents"},
    "envs": CORE | {"envs"},
    "configs": CORE | {"configs", "agents", "envs"},
    "run": CORE | {"run", "agents", "envs", "configs"},
    "deploy": CORE | {"deploy", "_version"},
}
SEES_ALL = {"jaxrl.run.cli", "jaxrl.run.cli_commands", "jaxrl.run.cli_sweep"}
LEARNING_SEES = {"jaxrl.engine.types"}  # of the engine


def _modules() -> dict[str, pathlib.Path]:
    """Module name -> file (`pkg/__init__.py` is the module `pkg`)."""
    out = {}
    for folder, package in SOURCES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join([package, *parts])] = path
    return out


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _resolve(name: str) -> str | None:
    """The longest prefix of dotted `name` that is a jaxrl module (None: not jaxrl)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in MODULES:
            return ".".join(parts[:i])
    return None


def _imports(module: str):
    """(line, imported name as written, resolved jaxrl module or None) for every import."""
    tree = ast.parse(MODULES[module].read_text())
    package = module if _is_package(module) else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, _resolve(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                target = full if full in MODULES else _resolve(base)
                yield node.lineno, full if full in MODULES else base, target


def _graph() -> dict[str, dict[str, int]]:
    """jaxrl module -> {imported jaxrl module: first line}."""
    graph = {m: {} for m in MODULES}
    for module in MODULES:
        for line, _, target in _imports(module):
            if target is not None and target != module:
                graph[module].setdefault(target, line)
    return graph


GRAPH = _graph()


def _layer(module: str) -> str:
    parts = module.split(".")
    return "root" if len(parts) == 1 else parts[1]


def _arrow(src: str, dst: str) -> str:
    return f"{src} -> {dst} ({MODULES[src].relative_to(ROOT)}:{GRAPH[src][dst]})"


def _cycles() -> list[list[str]]:
    """Cycle paths `[a, b, ..., a]`: in each strongly connected component (Tarjan), the
    shortest cycle through each of its modules."""
    index, low, stack, on_stack, sccs = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(GRAPH[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                scc.add(w)
                if w == v:
                    break
            if len(scc) > 1:
                sccs.append(scc)

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    out = []
    for scc in sccs:  # the shortest cycle through each module of a component, deduplicated
        for start in sorted(scc):
            paths, seen = [[start]], {start}
            while paths:
                path = paths.pop(0)
                nxt = [w for w in sorted(GRAPH[path[-1]]) if w in scc]
                if start in nxt:
                    i = path.index(min(path))  # rotate to start at its smallest name
                    cycle = path[i:] + path[:i]
                    if cycle + cycle[:1] not in out:
                        out.append(cycle + cycle[:1])
                    break
                for w in nxt:
                    if w not in seen:
                        seen.add(w)
                        paths.append(path + [w])
    return out


def test_sources_found():
    for name in ("jaxrl.engine.loop", "jaxrl.agents.sac", "jaxrl.envs.toy", "jaxrl.configs",
                 "jaxrl.learning.replay", "jaxrl.learning.replay.storage", "jaxrl.run.cli"):
        assert name in MODULES, name
    assert "jaxrl.learning.replay" in GRAPH["jaxrl.agents.common.offpolicy"]  # from .. import


def test_no_import_cycles():
    cycles = _cycles()
    text = ["  " + " -> ".join(c) + "\n    " + "\n    ".join(
        _arrow(a, b) for a, b in zip(c, c[1:], strict=False)) for c in cycles]
    assert not cycles, (
        "import cycles among jaxrl modules (a submodule importing names back from the package "
        "__init__ that imports it: move those names to a submodule both import):\n"
        + "\n".join(text))


def test_layers_import_only_downwards():
    bad = []
    for src, targets in GRAPH.items():
        for dst in targets:
            layer, other = _layer(src), _layer(dst)
            if other in ALLOWED[layer]:
                continue
            if layer == "run" and other in ("deploy", "api") and src in SEES_ALL:
                continue
            bad.append(f"{_arrow(src, dst)}: {layer} may import only "
                       f"{', '.join(sorted(ALLOWED[layer]))}")
    assert not bad, "imports against the layering (see the module docstring):\n" + "\n".join(bad)


def test_learning_imports_only_engine_data_types():
    bad = [_arrow(src, dst) for src, targets in GRAPH.items() for dst in targets
           if _layer(src) == "learning" and _layer(dst) == "engine" and dst not in LEARNING_SEES]
    assert not bad, ("jaxrl.learning imports only " + ", ".join(sorted(LEARNING_SEES)) +
                     " of the engine (agent bases belong in jaxrl.agents.common):\n"
                     + "\n".join(bad))


def _shared(module: str) -> bool:
    return module == "jaxrl.agents.common" or module.startswith("jaxrl.agents.common.")


def test_no_agent_module_imports_another():
    bad = [_arrow(src, dst) for src, targets in GRAPH.items() for dst in targets
           if src.startswith("jaxrl.agents.") and
           (dst == "jaxrl.agents" or dst.startswith("jaxrl.agents.")) and
           dst.split(".")[2:3] != src.split(".")[2:3] and not _shared(dst)]
    assert not bad, "agent modules importing other agents:\n" + "\n".join(bad)


def test_agents_and_envs_do_not_import_each_other():
    bad = [_arrow(src, dst) for src, targets in GRAPH.items() for dst in targets
           if {_layer(src), _layer(dst)} == {"agents", "envs"}]
    assert not bad, "agents and envs importing each other:\n" + "\n".join(bad)


def _defined(module: str) -> set[str] | None:
    """Top-level names bound in `module` (None when it defines `__getattr__`)."""
    names = set()
    for node in ast.parse(MODULES[module].read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        else:
            names.update(n.id for n in ast.walk(node)
                         if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return None if "__getattr__" in names else names


def test_jaxrl_imports_resolve():
    """`from jaxrl.x import name` names a module or a top-level name of `jaxrl.x` (a wrong
    name would otherwise only fail when that code path runs, e.g. a lazy import)."""
    bad = []
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module in MODULES:
                defined = _defined(node.module)
                bad += [f"{path.relative_to(ROOT)}:{node.lineno}: from {node.module} import "
                        f"{a.name}" for a in node.names
                        if f"{node.module}.{a.name}" not in MODULES and defined is not None
                        and a.name != "*" and a.name not in defined]
            elif isinstance(node, ast.Import):
                bad += [f"{path.relative_to(ROOT)}:{node.lineno}: import {a.name}"
                        for a in node.names
                        if a.name.startswith("jaxrl.") and a.name not in MODULES]
    assert not bad, "imports of jaxrl names that do not exist:\n" + "\n".join(bad)


def test_every_package_is_installed():
    """Each folder of the sources with an `__init__.py` is listed in pyproject's `packages`
    (a missing one imports from a checkout but not from an installed wheel)."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    packages = {m for m in MODULES if _is_package(m)}
    assert packages - listed == set(), "packages missing from pyproject.toml"
    assert listed - packages == set(), "pyproject.toml lists packages that do not exist"


def _private_uses(module: str):
    """(line, what) for each private name of another jaxrl module that `module` imports or
    reads (`from jaxrl.x import _name`, `x._name`)."""
    tree = ast.parse(MODULES[module].read_text())
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("jaxrl"):
            for a in node.names:
                if f"{node.module}.{a.name}" in MODULES:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name in MODULES and a.asname:
                    aliases[a.asname] = a.name
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("jaxrl"):
            yield from ((node.lineno, f"from {node.module} import {a.name}") for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")
                        and f"{node.module}.{a.name}" not in MODULES)
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in aliases and node.attr.startswith("_")
                and not node.attr.startswith("__") and aliases[node.value.id] != module):
            yield node.lineno, f"{node.value.id}.{node.attr}"


def test_no_module_uses_another_modules_private_names():
    """Shared code is public in one place (train and sweep once called each other's private
    helpers; the one run session, `jaxrl.run.session`, now holds them)."""
    bad = [f"{MODULES[m].relative_to(ROOT)}:{line}: {name}" for m in MODULES
           for line, name in _private_uses(m)]
    assert not bad, "private names used across modules:\n" + "\n".join(bad)


def test_one_mesh_builder_and_one_place_for_axis_names():
    """Meshes are built by `jaxrl.engine.parallel` only, and its constants name the axes."""
    bad = []
    for module, path in MODULES.items():
        if module == "jaxrl.engine.parallel":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            name = getattr(node.func, "attr", getattr(node.func, "id", "")) \
                if isinstance(node, ast.Call) else ""
            if name == "Mesh":
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: Mesh(...)")
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id.endswith("_AXIS") for t in node.targets):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: an axis name defined")
    assert not bad, "meshes and axis names belong to jaxrl.engine.parallel:\n" + "\n".join(bad)



REPLAY_FIELDS = ("batch_size", "buffer_size", "learning_starts")


def test_replay_fields_are_declared_once():
    """The replay settings live in `agents/common/offpolicy.ReplayConfig`, which every replay
    agent's config subclasses; a class in an agent config's hierarchy may override their
    defaults (PQL's, WarpSAC's) only as a `ReplayConfig` itself."""
    import jaxrl.agents  # noqa: F401  (registers them)
    from jaxrl.agents.common.offpolicy import ReplayConfig
    from jaxrl.engine import contract

    bad = []
    for name in contract.list_agents():
        agent_cls, config_cls = contract.lookup(name)
        if agent_cls.has_replay and not issubclass(config_cls, ReplayConfig):
            bad.append(f"{name}: {config_cls.__name__} is not a ReplayConfig")
        for cls in config_cls.__mro__:
            declared = set(vars(cls).get("__annotations__", {})) & set(REPLAY_FIELDS)
            if declared and not issubclass(cls, ReplayConfig):
                bad.append(f"{name}: {cls.__name__} declares {sorted(declared)}")
    assert not bad, "replay fields declared outside ReplayConfig:\n" + "\n".join(bad)
