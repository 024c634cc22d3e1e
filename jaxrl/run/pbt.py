"""Population-based training inside one sweep program (`jaxrl sweep --pbt`).

PBT (Jaderberg et al. 2017, "Population Based Training of Neural Networks", arXiv 1711.09846,
Sec. 3 and 4.1) trains a population and, every few steps, lets its worst members *exploit* a
better one (copy its weights) and *explore* (perturb the copied hyperparameters). Ray Tune's
`PopulationBasedTraining` (truncation selection over a `quantile_fraction` of 0.25, factors
0.8 / 1.2, `resample_probability` 0.25) and the Isaac Gym PBT of Petrenko et al. 2023
(arXiv 2404.03336) run members as processes and move checkpoints through files. Here the
members already train as one program with their float hyperparameters inside the state, so a
round is one small jitted function on the member-stacked state (`make_round`): no restart,
no file, the state never leaves the devices.

A round after chunk c (every `PBTConfig.interval` chunks, never after the last):
1. Score: each member's latest value of `PBTConfig.metric` logged since the previous round
   (default the evaluation's return, which every round has: the interval is a multiple of
   `eval_every`); none, or NaN, counts as the worst, and a round without any score is skipped.
2. Exploit (truncation selection): the `n = max(1, floor(fraction * S))` lowest-scoring members
   each copy the whole agent state (parameters, optimizer, normalizers, target networks, and
   the replay buffer with `replay="copy"`; `"keep"` keeps their own) of a member drawn
   uniformly from the `n` best. Env states, exploration carries and PRNG keys stay each
   member's own, so no two members ever share a key.
3. Explore: every searched hyperparameter of a member that copied is, with probability
   `resample_probability`, drawn afresh from its search range (a `--grid` name: one of its
   values; a `--random` name: its distribution), else multiplied by `perturb[0]` or
   `perturb[1]` (even odds); then clipped to the search range and the agent's `HP_RANGES`.

The round's randomness is `fold_in(PRNGKey(seed), c)`, so a resumed PBT sweep repeats the same
rounds. `Lineage` writes `<sweep_dir>/pbt.jsonl`: one line per member and round (chunk 0: the
initial values) with its parent, score and hyperparameters afterwards.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.engine import contract, loop, parallel
from jaxrl.run import checkpoint, distributed

LINEAGE_FILE = "pbt.jsonl"
METRICS = ("eval/episode_return", "eval/episode_length", "episode/return", "episode/length")
"""Metrics every run logs (`jaxrl.engine.loop`'s episode sums and the evaluator)."""
REPLAY = ("copy", "keep")


@dataclasses.dataclass(frozen=True)
class PBTConfig:
    """Population-based training settings of a sweep (`jaxrl sweep --pbt`; see the module
    docstring)."""

    interval: int = 2
    """Chunks between rounds of exploit and explore."""
    fraction: float = 0.25
    """Bottom fraction of the population that copies a member of the top fraction (at least
    one member; at most 0.5, so the two never overlap)."""
    metric: str = "eval/episode_return"
    """Ranking metric: each member's latest logged value (higher is better)."""
    resample_probability: float = 0.25
    """Chance that a copied hyperparameter is drawn afresh instead of perturbed."""
    perturb: tuple[float, float] = (0.8, 1.25)
    """Factors a copied hyperparameter is multiplied by (one of the two, even odds)."""
    replay: str = "copy"
    """Off-policy agents: `copy` the top member's replay buffer with its state, or `keep` the
    member's own."""
    seed: int = 0
    """Seed of the rounds' draws (parents, perturbations; not of training)."""

    def validate(self, num_members: int, cfg: loop.TrainConfig, run: loop.RunConfig) -> None:
        """Raises ValueError naming the flag (and field) to change, before compiling."""
        if num_members < 2:
            raise ValueError(f"PBT needs a population of at least 2 members (grid points x random "
                             f"draws x seeds), got {num_members}.")
        if not 1 <= self.interval < cfg.num_chunks:
            raise ValueError(f"--pbt-interval (PBTConfig.interval) must be in [1, num_chunks), "
                             f"got {self.interval} with {cfg.num_chunks} chunks: rounds follow "
                             "every interval-th chunk before the last.")
        if not 0.0 < self.fraction <= 0.5:
            raise ValueError(f"--pbt-fraction (PBTConfig.fraction) must be in (0, 0.5] (the "
                             f"bottom fraction copies the top fraction of the same size), got "
                             f"{self.fraction}.")
        if not 0.0 <= self.resample_probability <= 1.0:
            raise ValueError("--pbt-resample-probability (PBTConfig.resample_probability) must "
                             f"be in [0, 1], got {self.resample_probability}.")
        if len(self.perturb) != 2 or not all(math.isfinite(f) and f > 0 for f in self.perturb):
            raise ValueError(f"--pbt-perturb (PBTConfig.perturb) must be two positive factors, "
                             f"got {self.perturb}.")
        if self.replay not in REPLAY:
            raise ValueError(f"--pbt-replay (PBTConfig.replay) must be one of "
                             f"{', '.join(REPLAY)}, got {self.replay!r}.")
        self._check_metric(cfg, run)

    def _check_metric(self, cfg: loop.TrainConfig, run: loop.RunConfig) -> None:
        if self.metric not in METRICS:
            close = difflib.get_close_matches(self.metric, METRICS, n=2)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise ValueError(f"--pbt-metric {self.metric!r} is not one PBT ranks by (those every "
                             f"run logs).{hint} Choose one of: {', '.join(METRICS)}.")
        if not self.metric.startswith("eval/"):
            return
        if cfg.num_eval_envs == 0:
            raise ValueError(f"--pbt-metric {self.metric} needs evaluation, but num_eval_envs "
                             "is 0: set --num-eval-envs or rank by episode/return.")
        if self.interval % run.eval_every:
            raise ValueError(f"--pbt-interval {self.interval} is not a multiple of --eval-every "
                             f"{run.eval_every}: every round needs an evaluation of the members' "
                             "current states.")


@dataclasses.dataclass(frozen=True)
class Dim:
    """One searched hyperparameter: its range `[low, high]`, whether it is drawn log-uniformly,
    and the grid values a resample picks from (empty: a `--random` range)."""

    low: float
    high: float
    log: bool = False
    values: tuple[float, ...] = ()


def search_space(grid: dict, random: dict, hp_ranges: dict) -> dict[str, Dim]:
    """`{name: Dim}` from a sweep's `--grid` (`{name: [values]}`) and `--random`
    (`{name: (dist, low, high)}`), each range cut to the agent's `HP_RANGES`."""
    space = {}
    for name, values in grid.items():
        space[name] = Dim(min(values), max(values), False, tuple(float(v) for v in values))
    for name, (dist, low, high) in random.items():
        space[name] = Dim(float(low), float(high), dist == "loguniform")
    out = {}
    for name, d in space.items():
        lo, hi = hp_ranges.get(name, (-math.inf, math.inf))
        out[name] = dataclasses.replace(d, low=max(d.low, lo), high=min(d.high, hi))
    return out


def check_space(space: dict[str, Dim], agent_cls, group: str) -> None:
    """Raises ValueError when there is nothing to search or a name is only read when the
    state is made (`AgentBase.HP_INIT_ONLY`), so changing it mid-run would do nothing."""
    if not space:
        raise ValueError("PBT searches the swept hyperparameters: give at least one --grid "
                         "NAME=V1,V2 or --random NAME=DIST:LOW:HIGH.")
    fixed = [n for n in space if n in getattr(agent_cls, "HP_INIT_ONLY", ())]
    if fixed:
        raise ValueError(f"{', '.join(f'{group}.{n}' for n in fixed)} is read only when the state "
                         "is made, so PBT cannot change it mid-run: sweep it without --pbt.")


def search_space_of(agent_name: str, cfg: loop.TrainConfig, run: loop.RunConfig, members,
                    search: dict, config: PBTConfig) -> dict[str, Dim]:
    """A sweep's PBT search space (`search_space` of `{"grid", "random"}`) after checking it
    (`check_space`) and the settings (`PBTConfig.validate`), before compiling."""
    agent_cls = contract.lookup(agent_name)[0]
    space = search_space(search["grid"], search["random"], agent_cls.HP_RANGES)
    check_space(space, agent_cls, agent_name.replace("-", "_"))
    config.validate(len(members), cfg, run)
    return space


def population(agent, agent_name, cfg, run, members, sweep_dir, config, search):
    """The rounds (`Population`) of a sweep with PBT settings `config`, else None."""
    if config is None:
        return None
    search = search or {}
    search = {"grid": search.get("grid", {}),
              "random": {k: tuple(v) for k, v in search.get("random", {}).items()}}
    space = search_space_of(agent_name, cfg, run, members, search, config)
    return Population(agent, config, space, [m.name for m in members], sweep_dir,
                      distributed.is_primary())


def saved_config(spec_json: dict) -> PBTConfig | None:
    """The PBT settings saved in a sweep.json (None: not a PBT sweep)."""
    saved = spec_json.get("pbt")
    return checkpoint.config_from_dict(PBTConfig, saved) if saved else None


def num_copied(num_members: int, fraction: float) -> int:
    """Members replaced per round (and size of the top group they copy from)."""
    return max(1, int(math.floor(num_members * fraction)))


def round_key(seed: int, chunk: int) -> jax.Array:
    return jax.random.fold_in(jax.random.PRNGKey(seed), chunk)


def select_parents(scores: jax.Array, key: jax.Array, n: int) -> jax.Array:
    """Truncation selection: `parent[i]` is `i`, except for the `n` lowest `scores [S]` (NaN
    lowest; ties keep the lower index ahead), which get a member drawn uniformly from the `n`
    highest."""
    s = scores.shape[0]
    scores = jnp.where(jnp.isnan(scores), -jnp.inf, scores)
    order = jnp.argsort(-scores, stable=True)  # best first
    top, bottom = order[:n], order[s - n:]
    pick = jax.random.randint(key, (n,), 0, n)
    return jnp.arange(s).at[bottom].set(top[pick])


def explore(hp: dict, copied: jax.Array, space: dict[str, Dim], cfg: PBTConfig,
            key: jax.Array) -> dict:
    """New values `{name: [S]}` of the searched names in `hp` (`[S]` each) for the members
    that `copied` (`[S]` bool); the others keep theirs."""
    out = dict(hp)
    for j, (name, d) in enumerate(sorted(space.items())):
        k_re, k_factor, k_draw = jax.random.split(jax.random.fold_in(key, j), 3)
        old = hp[name]
        shape = old.shape
        factor = jnp.where(jax.random.bernoulli(k_factor, 0.5, shape), cfg.perturb[1],
                           cfg.perturb[0])
        if d.values:
            table = jnp.asarray(d.values, jnp.float32)
            drawn = table[jax.random.randint(k_draw, shape, 0, len(d.values))]
        elif d.log:
            u = jax.random.uniform(k_draw, shape, minval=math.log(d.low), maxval=math.log(d.high))
            drawn = jnp.exp(u)
        else:
            drawn = jax.random.uniform(k_draw, shape, minval=d.low, maxval=d.high)
        resample = jax.random.uniform(k_re, shape) < cfg.resample_probability
        new = jnp.clip(jnp.where(resample, drawn, old * factor), d.low, d.high)
        out[name] = jnp.where(copied, new.astype(old.dtype), old)
    return out


def make_round(agent, space: dict[str, Dim], cfg: PBTConfig, num_members: int):
    """`round(state, scores [S], key) -> (state, parent [S], hp {name: [S]})` on a
    member-stacked `RunState` (see the module docstring); pure, to be jitted."""
    n = num_copied(num_members, cfg.fraction)

    def round_fn(state: loop.RunState, scores, key):
        k_parent, k_explore = jax.random.split(key)
        parent = select_parents(scores, k_parent, n)
        copied = parent != jnp.arange(num_members)
        mine = state.agent_state
        agent_state = jax.tree.map(lambda x: x[parent], mine)
        if agent.has_replay and cfg.replay == "keep":
            agent_state = agent.with_replay(agent_state, agent.replay_of(mine))
        hp = explore(agent_state.hp, copied, space, cfg, k_explore)
        agent_state = jax.vmap(agent.with_hp)(agent_state, hp)
        return state.replace(agent_state=agent_state), parent, hp

    return round_fn


class Population:
    """The rounds of one PBT sweep: the jitted `make_round` (placed as the state is) and the
    lineage it writes (`Lineage`)."""

    def __init__(self, agent, cfg: PBTConfig, space: dict[str, Dim], names: list[str],
                 sweep_dir: str, primary: bool):
        self.cfg, self.space, self.names = cfg, space, names
        self.lineage = Lineage(sweep_dir, primary)
        self._round = make_round(agent, space, cfg, len(names))
        self._compiled = None

    def compile(self, state) -> None:
        """Compiles the round for the placed `state` (its shardings kept; the old state's
        buffers are donated, so a round needs no second copy of a replay buffer)."""
        placed = all(isinstance(x, jax.Array) for x in jax.tree.leaves(state))
        out = ((jax.tree.map(lambda x: x.sharding, state), None, None) if placed else None)
        scores = jax.ShapeDtypeStruct((len(self.names),), jnp.float32)
        jitted = (jax.jit(self._round, out_shardings=out, donate_argnums=0) if placed
                  else jax.jit(self._round))
        self._compiled = jitted.lower(state, scores, round_key(self.cfg.seed, 0)).compile()

    def due(self, chunk: int, num_chunks: int) -> bool:
        """Whether a round follows chunk `chunk` (1-based)."""
        return chunk % self.cfg.interval == 0 and chunk < num_chunks

    def step(self, state, records: list[list[dict]], chunk: int, env_steps: int):
        """One round after `chunk` on the placed state; returns (new state, summary line).
        Scores come from the chunks since the previous round only (a member whose metric was
        not logged since is ranked lowest); without any score the round is skipped."""
        since = chunk - self.cfg.interval
        scores = np.asarray([latest(r, self.cfg.metric, since) for r in records], np.float32)
        if np.isnan(scores).all():
            return state, (f"PBT after chunk {chunk}: skipped, no member logged "
                           f"{self.cfg.metric} since chunk {since}")
        if self._compiled is None:
            self.compile(state)
        state, parent, hp = self._compiled(state, scores, round_key(self.cfg.seed, chunk))
        parent, hp = parallel.fetch((parent, {k: hp[k] for k in self.space}))
        rows = self.lineage.write_round(chunk, env_steps, self.names, scores, parent, hp)
        moved = [f"{r['name'].split('_')[0]}<-{r['parent_name'].split('_')[0]}" for r in rows
                 if r["copied"]]
        return state, (f"PBT after chunk {chunk}: {len(moved)} of {len(rows)} members copied "
                       f"a top member ({', '.join(moved)}) by {self.cfg.metric}")


def latest(records: list[dict], metric: str, since: int = 0) -> float:
    """The member's latest finite value of `metric` in the records of chunks after `since`
    (NaN when there is none)."""
    for r in reversed(records):
        if r["chunk"] <= since:
            break
        v = r.get(metric)
        if isinstance(v, (int, float)) and math.isfinite(v):
            return float(v)
    return math.nan


class Lineage:
    """`<sweep_dir>/pbt.jsonl`: per round (chunk 0: the start) one line per member: `chunk`,
    `env_steps`, `member`, `name`, `parent`, `parent_name`, `copied`, `score` and `hp` (the
    searched values from then on). Only the primary process writes."""

    def __init__(self, sweep_dir: str, primary: bool = True):
        self.path = os.path.join(sweep_dir, LINEAGE_FILE)
        self.primary = primary

    def write_start(self, members) -> None:
        if not self.primary:
            return
        with open(self.path, "w") as f:
            for m in members:
                f.write(json.dumps({"chunk": 0, "env_steps": 0, "member": m.index,
                                    "name": m.name, "parent": m.index, "parent_name": m.name,
                                    "copied": False, "score": None,
                                    "hp": {k: float(np.float32(v))  # as the state holds it
                                           for k, v in sorted(m.values.items())}}) + "\n")

    def write_round(self, chunk, env_steps, names, scores, parent, hp) -> list[dict]:
        rows = []
        for i, name in enumerate(names):
            p = int(parent[i])
            score = float(scores[i])
            rows.append({"chunk": chunk, "env_steps": env_steps, "member": i, "name": name,
                         "parent": p, "parent_name": names[p], "copied": p != i,
                         "score": score if math.isfinite(score) else None,
                         "hp": {k: float(v[i]) for k, v in sorted(hp.items())}})
        if self.primary:
            with open(self.path, "a") as f:
                f.writelines(json.dumps(r) + "\n" for r in rows)
        return rows

    def cut(self, chunk: int) -> None:
        """Keeps the rounds up to `chunk` (a resume from that chunk repeats the later ones)."""
        if not self.primary or not os.path.exists(self.path):
            return
        keep = [r for r in read_lineage(os.path.dirname(self.path)) if r["chunk"] <= chunk]
        with open(self.path + ".tmp", "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in keep)
        os.replace(self.path + ".tmp", self.path)


def read_lineage(sweep_dir: str) -> list[dict]:
    path = os.path.join(sweep_dir, LINEAGE_FILE)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def schedule(rows: list[dict], member: int) -> list[dict]:
    """The history of the state member `member` ends with: per segment `{"chunk": c, "member":
    the slot that trained it from chunk c, "hp": values from c}`, oldest first (following each
    copy back to the parent it came from)."""
    by_round: dict[int, dict[int, dict]] = {}
    for r in rows:
        by_round.setdefault(r["chunk"], {})[r["member"]] = r
    out, cur = [], member
    for chunk in sorted(by_round, reverse=True):
        r = by_round[chunk][cur]
        out.append({"chunk": chunk, "member": r["name"], "hp": r["hp"]})
        cur = r["parent"]
    out.reverse()
    merged = [out[0]] if out else []  # drop rounds that changed nothing
    for seg in out[1:]:
        if seg["hp"] != merged[-1]["hp"] or seg["member"] != merged[-1]["member"]:
            merged.append(seg)
    return merged
