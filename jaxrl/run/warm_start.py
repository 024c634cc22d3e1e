"""Warm start: a `jaxrl train` run's compiled programs kept on disk.

JAX's persistent compilation cache (`jaxrl.run.process`) skips XLA's compile on a second run,
but not what comes before it: importing the simulator (`import mujoco.mjx` alone is 6-9 s on 2
CPU cores) and tracing and lowering the programs (~2 s per MJX trace). This store keeps the
three compiled programs of a run, the placed init, the chunk and the evaluator, as serialized
executables (`jax.experimental.serialize_executable`) with their argument trees. A second run
of the same config loads them and starts training without building the env or tracing
anything: the env is never imported.

An entry is keyed by everything that can change a program: agent, env, the training and agent
configs (except `seed`, an argument of the programs), the hyperparameters given, the source of
every jaxrl module, the versions of jax, jaxlib, the simulators and libraries, JAX's numeric
flags, `XLA_FLAGS`, the devices and the CPU's instruction set. Only envs of the built-in
families qualify (a family added with `register_family` runs code the key cannot see); a
multi-process run never uses the store. Entries are written atomically (a temporary folder
renamed into place) and the newest `MAX_ENTRIES` are kept. Like JAX's cache, the store
trusts its folder: loading runs the code in it.

Argument trees are stored with every node type from outside jaxrl, JAX, flax, optax and the
standard library replaced by `Opaque` (same children, same order), so loading them imports
none of the simulator's modules; a checkpoint (leaves in flatten order, `checkpoint.pack`)
reads the same either way.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.metadata
import json
import os
import pickle
import platform
import shutil
import tempfile
from concurrent import futures

import jax
import jax.numpy as jnp

STORE_VERSION = 2  # 2: each program's devices
FOLDER = "jaxrl-programs"
MAX_ENTRIES = 16
PROGRAMS = ("init", "chunk", "evaluator")
BUILTIN_FAMILIES = ("toy", "goal", "playground", "brax")
_OWN_MODULES = ("builtins", "collections", "jaxrl", "jax", "jaxlib", "flax", "optax", "numpy")
_PACKAGES = ("jax", "jaxlib", "numpy", "ml_dtypes", "flax", "optax", "mujoco", "mujoco-mjx",
             "playground", "brax", "warp-lang")
_JAX_FLAGS = ("jax_enable_x64", "jax_default_prng_impl", "jax_threefry_partitionable",
              "jax_default_matmul_precision", "jax_numpy_rank_promotion")


class Opaque:
    """Stand-in for a pytree node of a foreign type (an `mjx.Data`): the type's name and the
    node's children, flattened in the original order."""

    def __init__(self, name: str, children):
        self.name, self.children = name, list(children)

    def __repr__(self) -> str:
        return f"Opaque({self.name}, {len(self.children)} children)"


jax.tree_util.register_pytree_node(
    Opaque, lambda o: (o.children, o.name), lambda name, children: Opaque(name, children))


def skeleton(treedef):
    """`treedef` with every foreign node type replaced by `Opaque` (same leaf order); node
    types of jaxrl, JAX, flax, optax and the standard library are kept."""
    return jax.tree.structure(_convert(jax.tree.unflatten(treedef, range(treedef.num_leaves))))


def _convert(x):
    if x is None:
        return None
    children, one_level = jax.tree.flatten(x, is_leaf=lambda y: y is not x)
    if jax.tree_util.treedef_is_leaf(one_level):
        return x
    kind = one_level.node_data()[0]
    converted = [_convert(c) for c in children]
    if kind.__module__.split(".")[0] in _OWN_MODULES:
        return jax.tree.unflatten(one_level, converted)
    return Opaque(f"{kind.__module__}.{kind.__qualname__}", converted)


def _digest(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def source_digest() -> str:
    """sha256 over every jaxrl module's source (the `jaxrl`, `envs`, `agents` and `configs`
    folders, however installed)."""
    import jaxrl.agents
    import jaxrl.configs
    import jaxrl.envs

    h = hashlib.sha256()
    for pkg in (jaxrl, jaxrl.envs, jaxrl.agents, jaxrl.configs):
        for root in pkg.__path__:
            for folder, dirs, files in sorted(os.walk(root)):
                dirs.sort()
                for name in sorted(f for f in files if f.endswith(".py")):
                    path = os.path.join(folder, name)
                    h.update(os.path.relpath(path, root).encode())
                    with open(path, "rb") as f:
                        h.update(f.read())
    return h.hexdigest()


def _environment() -> dict:
    """What outside the config can change a compiled program (see the module docstring)."""
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    devices = [(d.platform, d.device_kind, d.id) for d in jax.devices()]
    return {"versions": versions, "jaxrl_source": source_digest(), "devices": devices,
            "flags": {k: str(getattr(jax.config, k)) for k in _JAX_FLAGS},
            "xla_flags": os.environ.get("XLA_FLAGS", ""), "cpu": _cpu_features(),
            "menagerie": os.environ.get("JAXRL_MENAGERIE_PATH"),
            "python": platform.python_version()}


def _cpu_features() -> str:
    """The host CPU's instruction-set flags (Linux), else its machine name: a CPU executable
    compiled for AVX-512 must not load on a node without it."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line for line in f if line.startswith("flags")), "")
    except OSError:
        flags = ""
    return _digest(flags or platform.machine() + platform.processor())


def program_key(agent_name: str, env_name: str, cfg, agent_config, hp: dict | None,
                kind: str = "train") -> str | None:
    """The store key of a run, or None when the run cannot use the store: an env outside the
    built-in families, or several processes. `hp` None means the agent's defaults; `kind`
    tells a `jaxrl train` run's programs from a sweep's (its evaluator takes a key per
    member)."""
    from jaxrl.envs import registry

    family = registry.find_family(env_name)
    if family.name not in BUILTIN_FAMILIES or jax.process_count() > 1:
        return None
    factory = ""
    if family.name in ("toy", "goal"):  # our own envs: the class the name builds
        from jaxrl.envs import goal, toy

        fn = {**toy.TOY_ENVS, **goal.GOAL_ENVS}[env_name]
        factory = f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', repr(fn))}"
    train = dataclasses.asdict(cfg)  # the program's settings only (no `RunConfig` field)
    what = {"store": STORE_VERSION, "kind": kind, "agent": agent_name, "env": env_name,
            "factory": factory,
            "train": train, "agent_config": dataclasses.asdict(agent_config),
            "hp": None if hp is None else {k: float(v) for k, v in sorted(hp.items())},
            "environment": _environment()}
    return _digest(json.dumps(what, sort_keys=True, default=repr))


class ProgramStore:
    """The entries under `folder` (`<compile cache>/jaxrl-programs`)."""

    def __init__(self, folder: str):
        self.folder = folder

    def path(self, key: str) -> str:
        return os.path.join(self.folder, key)

    def meta(self, key: str) -> dict | None:
        """The entry's small part (spec, argument trees, info), or None when absent or
        unreadable; it imports none of the simulator's modules."""
        try:
            with open(os.path.join(self.path(key), "meta.pkl"), "rb") as f:
                meta = pickle.load(f)
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
            return None
        return meta if meta.get("version") == STORE_VERSION else None

    def start_load(self, key: str, meta: dict) -> dict[str, futures.Future]:
        """Deserializes the entry's programs in two background threads, the chunk in one, the
        init and then the evaluator in the other (XLA loads them without holding the GIL, so
        the caller's own set-up goes on meanwhile); `{name: future of jax.stages.Compiled or
        None}` for each of `PROGRAMS`."""
        pool = futures.ThreadPoolExecutor(2, thread_name_prefix="jaxrl-programs")
        loads = {name: pool.submit(self._load, key, meta, name)
                 for name in ("chunk", "init", "evaluator")}
        pool.shutdown(wait=False)
        return loads

    def _load(self, key: str, meta: dict, name: str):
        from jax.experimental import serialize_executable

        if meta["trees"].get(name) is None:
            return None
        if name == "init":
            _initialize_lapack()
            os.utime(self.path(key))  # newest-used entries survive `_evict`
        with open(os.path.join(self.path(key), f"{name}.xla"), "rb") as f:
            payload = f.read()
        by_id = {d.id: d for d in jax.devices()}
        devices = [by_id[i] for i in meta["devices"][name]]  # a program on 2 of 3 devices
        return serialize_executable.deserialize_and_load(payload, *meta["trees"][name],
                                                         execution_devices=devices)

    def save(self, key: str, compiled: dict, spec, info: dict) -> None:
        """Writes an entry atomically: `compiled` maps each of `PROGRAMS` to a
        `jax.stages.Compiled` (or None). An entry that is already there is left as it is.

        Raises:
            ValueError, NotImplementedError: a program that cannot be serialized (closed-over
                constants passed as arguments, a backend without serialization).
        """
        from jax.experimental import serialize_executable

        if os.path.isdir(self.path(key)):
            return
        os.makedirs(self.folder, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=f".{key[:16]}-", dir=self.folder)
        try:
            trees, devices = {}, {}
            for name in PROGRAMS:
                if compiled.get(name) is None:
                    trees[name] = None
                    continue
                payload, in_tree, out_tree = serialize_executable.serialize(compiled[name])
                trees[name] = (skeleton(in_tree), skeleton(out_tree))
                runs_on = compiled[name].runtime_executable().local_devices()
                devices[name] = [d.id for d in runs_on]
                with open(os.path.join(tmp, f"{name}.xla"), "wb") as f:
                    f.write(payload)
            with open(os.path.join(tmp, "meta.pkl"), "wb") as f:
                pickle.dump({"version": STORE_VERSION, "trees": trees, "devices": devices,
                             "spec": spec, "info": info}, f)
            os.rename(tmp, self.path(key))
        except OSError:  # another process wrote the same entry first
            pass
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self._evict()

    def _evict(self) -> None:
        """Deletes all but the `MAX_ENTRIES` most recently used entries."""
        entries = [e for e in os.scandir(self.folder) if e.is_dir() and not e.name.startswith(".")]
        entries.sort(key=lambda e: e.stat().st_mtime, reverse=True)
        for e in entries[MAX_ENTRIES:]:
            shutil.rmtree(e.path, ignore_errors=True)


@contextlib.contextmanager
def fresh_compiles():
    """JAX's persistent compilation cache off for the compiles inside (and on again after):
    programs for the store must come from a real compile, because an executable read from that
    cache serializes incompletely (jaxlib 0.10.2, CPU: the reloaded copy fails when run with
    `NOT_FOUND: Function ..._fusion not found`)."""
    from jax.experimental.compilation_cache import compilation_cache

    on = jax.config.jax_enable_compilation_cache
    jax.config.update("jax_enable_compilation_cache", False)
    compilation_cache.reset_cache()
    try:
        yield
    finally:
        jax.config.update("jax_enable_compilation_cache", on)
        compilation_cache.reset_cache()


def _initialize_lapack() -> None:
    """Sets up jaxlib's CPU LAPACK kernels, which jax otherwise does while lowering a LAPACK
    call: a loaded program that factorizes (MJX's Cholesky) would call a null pointer."""
    jax.jit(jnp.linalg.cholesky).lower(jnp.eye(2, dtype=jnp.float32))


@dataclasses.dataclass
class WarmStart:
    """One `runner.train` call's use of the store (`lookup`): `key` None when the run cannot
    use it, `meta` None when nothing is stored for it yet."""

    store: ProgramStore | None = None
    key: str | None = None
    meta: dict | None = None
    loading: dict[str, futures.Future] | None = None

    def compiling(self):
        """Context of a cold run's compiles: `fresh_compiles` when they are to be stored."""
        return fresh_compiles() if self.key is not None else contextlib.nullcontext()

    @property
    def where(self) -> str:
        return self.store.path(self.key) if self.store and self.key else ""

    def prepare(self, keys, hps, cold):
        """`session.run_session`'s prepare for a stored run: waits for the programs and runs the
        init; `cold(note)` compiles instead when the entry fails to load (and replaces it)."""

        def prepare(note):
            try:
                init, chunk = self.loading["init"].result(), self.loading["chunk"].result()
            except Exception as err:  # noqa: BLE001  (a broken or foreign entry: compile)
                note(f"the stored programs did not load ({type(err).__name__}: {err}); "
                     "compiling")
                shutil.rmtree(self.where, ignore_errors=True)
                return cold(note, None)
            evaluator = self.loading["evaluator"]
            evaluator = _Later(evaluator) if self.meta["trees"].get("evaluator") else None
            from jaxrl.run.session import Program

            return Program(init(keys, hps), chunk, evaluator, self.meta["info"]["members"],
                           "loaded the compiled programs")

        return prepare

    def store_programs(self, init, chunk, evaluator, runner, cfg, spec, members: str, note,
                       eval_keys=None):
        """Stores a freshly compiled run (`init`, `chunk`: `jax.stages.Compiled`; `evaluator`
        the jitted evaluator or None, compiled here for the run's eval key, or for
        `eval_keys` when given: a sweep's per-member keys); returns the evaluator to use. A
        program that cannot be serialized (a host callback, constants passed as arguments) is
        said through `note` and the run goes on."""
        if evaluator is not None:
            from jaxrl.run.assemble import eval_key

            key = eval_key(runner.key, 0, 0) if eval_keys is None else eval_keys  # shape
            evaluator = evaluator.lower(runner.agent_state, key).compile()
        try:
            self.store.save(self.key, {"init": init, "chunk": chunk, "evaluator": evaluator},
                            spec, {"members": members})
        except Exception as err:  # noqa: BLE001  (host callbacks, constants...: train on)
            note(f"no warm start for this config ({type(err).__name__}: {err})")
        return evaluator


def lookup(folder: str | None, agent_name: str, env_name: str, cfg, agent_config,
           hp: dict | None, kind: str = "train") -> WarmStart:
    """The store's view of a run (`WarmStart`); starts loading its programs in the background
    when they are stored. `folder` None: no store."""
    if folder is None:
        return WarmStart()
    key = program_key(agent_name, env_name, cfg, agent_config, hp, kind)
    if key is None:
        return WarmStart()
    store = ProgramStore(folder)
    meta = store.meta(key)
    loading = store.start_load(key, meta) if meta is not None else None
    return WarmStart(store, key, meta, loading)


class _Later:
    """A program still loading (`ProgramStore.start_load`): the first call waits for it."""

    def __init__(self, future: futures.Future):
        self.future = future

    def __call__(self, *args):
        return self.future.result()(*args)
