"""Candidate pools: distinct schedules of a task drawn from MetaSchedule's design space.

A pool is what samplers choose from and what backends measure. It is generated once per
task and saved, so that the *same* candidates can be measured on several hardware profiles.

Generation (:func:`generate_pool`) follows MetaSchedule's own search:

1. ``TuneContext`` with the target's default space generator (``PostOrderApply``: schedule
   rules, postprocessors and mutators "from-target") gives the design spaces.
2. *Random sampling*, as ``ReplayTrace`` does: a design-space trace (simplified, postprocessing
   removed) with its decisions dropped is replayed on a fresh schedule with a seeded random
   state, so every sampling instruction draws anew; then ``EnterPostproc`` and the target's
   postprocessors run. A candidate a postprocessor rejects (or whose replay raises) is
   skipped, exactly as MetaSchedule's search skips it.
3. When random sampling stops giving new candidates (``patience`` duplicates in a row) or
   has given ``max_random``, *mutation* takes over, as ``EvolutionarySearch`` does: a
   mutator drawn by the target's default probabilities (tile size, compute location, unroll,
   parallel) changes one decision of a parent, and the mutated trace is replayed and
   postprocessed the same way. Without a cost model the parent is any pool member (origin
   ``"mutation"``). With one (``model``), this is *evolutionary search* guided by the model as
   MetaSchedule's is (origin ``"evolutionary"``): each generation draws parents from the
   ``population`` best-predicted candidates so far, mutates twice as many children as it
   keeps, and keeps the better-predicted half; so these candidates gather where a tuner
   guided by that model would look, while the random ones cover the space.
4. Candidates are deduplicated by :func:`program_key` of their full trace with decisions
   (the JSON TVM stores in a tuning record), and come back in the order found; each one's
   origin (``"random"``, ``"mutation"`` or ``"evolutionary"``) is in ``PoolStats.origins``
   and is saved with the pool.

Everything is seeded from ``seed`` (schedule random states and mutator random states are
drawn from one ``random.Random(seed)``), so a seed gives the same pool on every run.

Cost (2-core VM, after ~5 s of ``import tvm`` and x86 intrinsics): 200 candidates of a
512x512x512 matmul in 1.5 s, of a 1x64x56x56 3x3 conv2d+ReLU in 3.3 s (llvm, core-avx2);
200 of a 512^3 matmul for CUDA sm_90 in 37 s including the CUDA intrinsics import, with 93%
of the attempts rejected by the GPU postprocessors (VerifyGPUCode and friends).

Pool directory format (version 2; version 1, without origins, is read too)::

    pool/
      tcl_pool.json        metadata: format, version, target, seed, TVM version, date, and
                           tasks in order: key, name, weight, networks, n (candidates)
      workloads.json       one line per task, in task order: [structural_hash, base64(IR JSON)]
                           (exactly a line of TVM's database_workload.json)
      candidates.json      one line per candidate: [task_index, trace_json, origin], trace_json
                           being trace.as_json() = [insts, decisions] (the trace part of a line
                           of TVM's database_tuning_record.json), origin how it was found
                           (see step 4; the element is left out when unknown); tasks'
                           candidates in order

Lines are in TVM's JSON dialect (:func:`tcl.database.tvm_json_dumps`). The files are
deliberately *not* named like TVM's JSONDatabase files, so a pool is never
mistaken for measured records. Files are written to temporary names and renamed, metadata
last: a half-written pool has no ``tcl_pool.json`` and is refused.

Keys: :func:`program_key` hashes the canonical JSON of a trace (sorted keys, no spaces,
TVM scalar objects as plain numbers, booleans as 0/1 and integral floats as integers, since
TVM's JSONDumps writes ``True`` as ``1`` and ``1.0`` as ``1``; the IndexMap of a
``TransformLayout``, which ``Trace.as_json`` writes as compact IR JSON text and a JSONDatabase
as indented text, as its parsed graph without TVM's metadata). A trace read back from a
TVM tuning record has the same key as the pool entry it was measured from, which is how
measured records are matched back to their pool entries.

Trap (measured on the 2-core VM): ``TuneContext`` imports ``tvm.s_tir.tensor_intrin``, whose
CUDA part parses hundreds of TVMScript intrinsics: 11 s idle, 50-100 s on a busy machine.
:func:`ensure_tensor_intrinsics` registers only the intrinsics the target can use (x86 ones
for an x86 LLVM target, ~1 s) and marks the package as imported; call it (generate_pool
does) before creating a ``TuneContext``. ``TCL_FULL_TENSOR_INTRIN=1`` turns this off.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import random
import sys
import time
import types
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import attrs

from tcl.database import tvm_json_dumps, tvm_version, workload_module, workload_name, write_atomic
from tcl.errors import TclError
from tcl.programs import Program, ProgramSet, Task
from tcl.tasks import as_target
from tcl.trace_json import is_ir_json, plain_json, trace_to_json

log = logging.getLogger(__name__)

POOL_FORMAT = "tcl-pool"
POOL_VERSION = 2
POOL_VERSIONS_READ = (1, 2)
ORIGINS = ("random", "mutation", "evolutionary")
POOL_META = "tcl_pool.json"
POOL_WORKLOADS = "workloads.json"
POOL_CANDIDATES = "candidates.json"


# ---- plain JSON and keys -----------------------------------------------------------------


def _canonical(obj: Any) -> Any:
    if obj is None:
        return obj
    if isinstance(obj, str):
        return _canonical_ir_json(obj) if is_ir_json(obj) else obj
    if isinstance(obj, bool):  # TVM's JSONDumps writes trace booleans as 1 / 0
        return int(obj)
    if isinstance(obj, int):
        return obj
    if isinstance(obj, float):
        if math.isfinite(obj) and obj.is_integer():
            return int(obj)
        return obj
    if isinstance(obj, Mapping):
        return {str(k): _canonical(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_canonical(x) for x in obj]
    return _canonical(plain_json(obj))


def _canonical_ir_json(text: str) -> Any:
    """An IR graph's JSON text (a ``TransformLayout`` IndexMap) as its graph, without TVM's
    metadata (the TVM version): compact and indented texts of one graph get one key."""
    try:
        graph = json.loads(text)
    except ValueError:
        return text
    if not isinstance(graph, dict):
        return text
    return {"ir_graph": _canonical({k: v for k, v in graph.items() if k != "metadata"})}


def canonical_json(obj: Any) -> str:
    """The canonical text of a JSON-like object: sorted keys, no spaces, bools and integral floats as ints."""
    return json.dumps(_canonical(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def program_key(trace_json: Any) -> str:
    """A stable key of a trace: sha256 (first 32 hex digits) of its canonical JSON.

    Accepts the trace JSON (``[insts, decisions]``, a TenSet steps list, or any JSON-like
    object), a ``Trace`` or a ``Schedule``.
    """
    return hashlib.sha256(canonical_json(trace_to_json(trace_json)).encode()).hexdigest()[:32]


# ---- TVM helpers -------------------------------------------------------------------------


def _as_module(mod: Any) -> Any:
    """An IRModule with the PrimFunc as ``main``, as ``TuneContext`` normalizes it."""
    import tvm

    if isinstance(mod, tvm.s_tir.Schedule):
        mod = mod.mod
    if isinstance(mod, tvm.tirx.PrimFunc):
        from tvm.s_tir.meta_schedule.tune_context import _normalize_mod

        return _normalize_mod(mod)
    if isinstance(mod, tvm.IRModule):
        return mod
    raise TclError(f"expected an IRModule or PrimFunc, got {type(mod).__name__}")


def _intrin_modules(target: Any) -> list[str] | None:
    """Submodules of ``tvm.s_tir.tensor_intrin`` a target can use; None = all of them."""
    kind = target.kind.name
    if kind == "llvm":
        text = " ".join(str(target.attrs.get(k, "")) for k in ("mtriple", "mcpu", "mattr")).lower()
        if any(t in text for t in ("aarch64", "arm", "neon", "sve", "cortex", "apple")):
            return ["arm_cpu"]
        if "riscv" in text:
            return ["riscv_cpu"]
        return ["x86"]
    if kind == "cuda":
        return ["cuda"]
    if kind == "rocm":
        return ["rocm"]
    if kind == "hexagon":
        return ["hexagon"]
    if kind == "c":
        return []
    return None


def ensure_tensor_intrinsics(target: Any) -> None:
    """Register the tensor intrinsics ``target`` can use, without importing all of them.

    Leaves ``tvm.s_tir.tensor_intrin`` as a package stub in ``sys.modules`` so that the
    unconditional ``import tvm.s_tir.tensor_intrin`` inside ``TuneContext`` is free; later
    calls for other targets import their submodules into the same stub.
    """
    import importlib

    import tvm.s_tir

    name = "tvm.s_tir.tensor_intrin"
    target = as_target(target)
    wanted = _intrin_modules(target)
    current = sys.modules.get(name)
    if current is not None and not getattr(current, "__tcl_stub__", False):
        return  # the real package is imported: everything is registered
    if current is None and os.environ.get("TCL_FULL_TENSOR_INTRIN"):
        importlib.import_module(name)
        return
    if os.environ.get("TCL_FULL_TENSOR_INTRIN"):
        wanted = None
    if current is None:
        path = [str(Path(tvm.s_tir.__file__).parent / "tensor_intrin")]
        current = types.ModuleType(name, "tvm.s_tir.tensor_intrin, loaded per target by tcl.pools")
        current.__path__ = path  # type: ignore[attr-defined]
        current.__package__ = name
        current.__tcl_stub__ = True  # type: ignore[attr-defined]
        sys.modules[name] = current
        tvm.s_tir.tensor_intrin = current  # type: ignore[attr-defined]
    if wanted is None:
        wanted = ["cuda", "arm_cpu", "x86", "rocm", "hexagon", "riscv_cpu"]
    for sub in wanted:
        importlib.import_module(f"{name}.{sub}")


def tune_context(mod: Any, target: Any, *, seed: int = 0, task_name: str = "main", num_threads: int | str = 1) -> Any:
    """A ``TuneContext`` with the target's default space generator, rules, postprocs, mutators."""
    import tvm.s_tir.meta_schedule as ms

    target = as_target(target)
    ensure_tensor_intrinsics(target)
    return ms.TuneContext(
        mod=_as_module(mod),
        target=target,
        space_generator=ms.space_generator.PostOrderApply(),
        task_name=task_name,
        rand_state=_rand_state(seed),
        num_threads=num_threads,
    )


def _rand_state(seed: int) -> int:
    return int(seed) % (2**31 - 2) + 1  # TVM wants a positive state; -1 means "random"


# ---- generation --------------------------------------------------------------------------


@attrs.define
class PoolStats:
    """What a :func:`generate_pool` call did (returned by :func:`generate_pool_with_stats`)."""

    found_random: int = 0
    found_mutation: int = 0
    found_evolutionary: int = 0
    duplicates: int = 0
    rejected: int = 0  # postprocessor refused or replay raised
    attempts: int = 0
    seconds: float = 0.0
    exhausted: bool = False  # fewer than asked: no more new candidates within the attempt limits
    origins: list[str] = attrs.field(factory=list)  # per candidate returned: one of ORIGINS


def generate_pool(
    mod: Any,
    target: Any,
    size: int,
    seed: int = 0,
    *,
    patience: int | None = None,
    max_attempts: int | None = None,
    max_random: int | None = None,
    model: Any = None,
    population: int = 32,
) -> list[Any]:
    """Up to ``size`` distinct candidate schedules (``tvm.s_tir.Schedule``) of ``mod``.

    See the module doc for the method. ``patience`` (default ``max(64, size // 2)``) is how
    many duplicates in a row (candidates rejected by a postprocessor do not count: on GPUs
    most are) end random sampling, and then mutation; ``max_attempts`` (default ``50 * size + 1000``)
    bounds the total; ``max_random`` caps how many come from random sampling (the rest by
    mutation; default no cap). ``model`` (a :class:`tcl.interfaces.CostModel`) turns the
    mutation phase into evolutionary search guided by its predictions, ``population`` being
    how many best-predicted candidates parents are drawn from. Fewer than ``size`` come back
    only when the space is exhausted. Deterministic for a given ``seed`` (and model).
    """
    return generate_pool_with_stats(
        mod,
        target,
        size,
        seed,
        patience=patience,
        max_attempts=max_attempts,
        max_random=max_random,
        model=model,
        population=population,
    )[0]


def generate_pool_with_stats(
    mod: Any,
    target: Any,
    size: int,
    seed: int = 0,
    *,
    patience: int | None = None,
    max_attempts: int | None = None,
    max_random: int | None = None,
    model: Any = None,
    population: int = 32,
) -> tuple[list[Any], PoolStats]:
    """:func:`generate_pool` and what it took."""
    import tvm
    from tvm.s_tir.meta_schedule import _ffi_api as ms_ffi
    from tvm.s_tir.schedule import Trace

    if size < 0:
        raise TclError(f"pool size must be >= 0, got {size}")
    if population < 1:
        raise TclError(f"population must be >= 1, got {population}")
    start = time.perf_counter()
    stats = PoolStats()
    rng = random.Random(seed)
    ctx = tune_context(mod, target, seed=seed)
    space_gen = ctx.space_generator
    mod = ctx.mod
    postprocs = list(space_gen.postprocs)
    # a TVM Map iterates in pointer-hash order: sort so the roulette is the same in every process
    mutators = sorted(
        ((m, float(plain_json(p))) for m, p in dict(space_gen.mutator_probs).items()),
        key=lambda mp: type(mp[0]).__name__,
    )
    spaces = [Trace(s.trace.simplified(remove_postproc=True).insts, {}) for s in ctx.generate_design_space()]
    if not spaces:
        raise TclError("MetaSchedule generated no design space for this workload")
    patience = max(64, size // 2) if patience is None else patience
    max_attempts = 50 * size + 1000 if max_attempts is None else max_attempts

    found: list[Any] = []
    seen: set[str] = set()

    def replay(trace: Any) -> Any | None:
        sch = tvm.s_tir.Schedule(mod, seed=_rand_state(rng.randrange(2**31)), debug_mask=0, error_render_level="none")
        try:
            trace.apply_to_schedule(sch, remove_postproc=True)
            sch.enter_postproc()
            for postproc in postprocs:
                if not postproc.apply(sch):
                    return None
        except (tvm.TVMError, ValueError, RuntimeError, IndexError):
            return None
        return sch

    def offer(sch: Any | None, origin: str, keep: bool = True) -> int:
        """1: new; 0: rejected (says nothing about exhaustion); -1: a duplicate."""
        stats.attempts += 1
        if sch is None:
            stats.rejected += 1
            return 0
        key = program_key(sch.trace)
        if key in seen:
            stats.duplicates += 1
            return -1
        seen.add(key)
        if keep:
            found.append(sch)
            stats.origins.append(origin)
        return 1

    def mutate(parent: Any) -> Any | None:
        x, mutator = rng.random() * total_p, mutators[-1][0]
        for m, p in mutators:
            if x < p:
                mutator = m
                break
            x -= p
        new_trace = ms_ffi.MutatorApply(mutator, parent.trace, _rand_state(rng.randrange(2**31)))
        return replay(new_trace) if new_trace is not None else None

    # phase 1: random sampling from the design spaces
    random_size = size if max_random is None else min(size, max_random)
    misses = 0
    while len(found) < random_size and misses < patience and stats.attempts < max_attempts:
        outcome = offer(replay(spaces[rng.randrange(len(spaces))]), "random")
        if outcome > 0:
            stats.found_random += 1
            misses = 0
        elif outcome < 0:
            misses += 1
    # phase 2: mutation of pool members, or evolutionary search guided by a model
    misses = 0
    total_p = sum(p for _, p in mutators)
    if model is not None and found and mutators and total_p > 0:
        _evolve(found, stats, size, patience, max_attempts, population, rng, mutate, offer, schedule_scorer(model, mod))
    while (
        model is None
        and found
        and mutators
        and total_p > 0
        and len(found) < size
        and misses < patience
        and stats.attempts < max_attempts
    ):
        outcome = offer(mutate(found[rng.randrange(len(found))]), "mutation")
        if outcome > 0:
            stats.found_mutation += 1
            misses = 0
        elif outcome < 0:
            misses += 1
    stats.exhausted = len(found) < size
    stats.seconds = time.perf_counter() - start
    if stats.exhausted:
        log.warning("pool: only %d of %d distinct candidates after %d attempts", len(found), size, stats.attempts)
    return found, stats


def schedule_scorer(model: Any, mod: Any) -> Any:
    """A function giving the scores of live schedules of ``mod`` by a :class:`tcl.interfaces.CostModel`
    (higher = predicted faster; non-finite scores as -inf), which evolutionary search ranks by."""
    import numpy as np

    task = make_task(mod)

    def predict(schedules: Sequence[Any]) -> list[float]:
        import torch

        programs = [Program(task_key=task.key, trace=trace_to_json(s), schedule=s) for s in schedules]
        with torch.no_grad():
            scores = np.asarray(model.predict(task, programs), dtype=np.float64).reshape(len(programs))
        return [float(x) if math.isfinite(x) else -math.inf for x in scores]

    return predict


def _evolve(
    found: list[Any],
    stats: PoolStats,
    size: int,
    patience: int,
    max_attempts: int,
    population: int,
    rng: random.Random,
    mutate: Any,
    offer: Any,
    predict: Any,
) -> None:
    """Evolutionary search (module doc, step 3): generations of mutated children of the
    best-predicted candidates, the better-predicted half of each generation kept."""
    scores = predict(found)
    misses = 0
    while len(found) < size and misses < patience and stats.attempts < max_attempts:
        elite = sorted(range(len(found)), key=lambda i: -scores[i])[:population]
        want = min(population, size - len(found))
        children: list[Any] = []
        tries = 0
        while len(children) < 2 * want and tries < 8 * want and stats.attempts < max_attempts:
            tries += 1
            child = mutate(found[elite[rng.randrange(len(elite))]])
            if offer(child, "evolutionary", keep=False) > 0:
                children.append(child)
        if not children:
            misses += tries
            continue
        child_scores = predict(children)
        best = sorted(range(len(children)), key=lambda i: -child_scores[i])[:want]
        for i in sorted(best):  # in the order they were found
            found.append(children[i])
            stats.origins.append("evolutionary")
            scores.append(child_scores[i])
        stats.found_evolutionary += len(best)
        misses = 0


# ---- tasks -------------------------------------------------------------------------------


def workload_json(mod: Any) -> tuple[str, str]:
    """``(structural_hash, base64 IR JSON)`` of a workload, exactly TVM's workload line."""
    from tvm.s_tir.meta_schedule.database import Workload

    shash, b64 = Workload(_as_module(mod)).as_json()
    return str(shash), str(b64)


def make_task(mod: Any, name: str | None = None, weight: float = 1.0, networks: Sequence[str] = ()) -> Task:
    """A :class:`Task` of a workload: key and IR as a JSONDatabase stores them."""
    shash, b64 = workload_json(mod)
    if name is None:
        name = workload_name(b64, shash)
    return Task(key=shash, name=name, weight=float(weight), networks=tuple(networks), mod_b64=b64)


# ---- saving and loading ------------------------------------------------------------------


@attrs.define
class Pool:
    """Candidates per task, in order. ``traces[key]`` are trace JSONs (``[insts, decisions]``),
    ``origins[key]`` how each was found (one of ORIGINS, or None when not known)."""

    tasks: dict[str, Task] = attrs.field(factory=dict)
    traces: dict[str, list[Any]] = attrs.field(factory=dict)
    origins: dict[str, list[str | None]] = attrs.field(factory=dict)
    meta: dict[str, Any] = attrs.field(factory=dict)
    _keys: dict[str, list[str]] = attrs.field(factory=dict, repr=False)

    def __iter__(self) -> Iterator[tuple[Task, list[Any]]]:
        for key, task in self.tasks.items():
            yield task, self.traces.get(key, [])

    def __len__(self) -> int:
        return sum(len(t) for t in self.traces.values())

    def add(self, task: Task, candidates: Iterable[Any], origins: Sequence[str | None] | None = None) -> None:
        """Append candidates (Schedules, Traces or trace JSON) to ``task``, skipping ones it has;
        ``origins`` (parallel to ``candidates``) says how each was found."""
        self.tasks.setdefault(task.key, task)
        traces = self.traces.setdefault(task.key, [])
        keys = self.keys(task.key)
        kept = self.origins.setdefault(task.key, [])
        kept.extend([None] * (len(traces) - len(kept)))
        have = set(keys)
        candidates = list(candidates)
        if origins is not None and len(origins) != len(candidates):
            raise TclError(f"{len(origins)} origins for {len(candidates)} candidates")
        for i, cand in enumerate(candidates):
            tj = trace_to_json(cand)
            k = program_key(tj)
            if k not in have:
                have.add(k)
                traces.append(tj)
                keys.append(k)
                kept.append(origins[i] if origins is not None else None)

    def keys(self, task_key: str) -> list[str]:
        """Program keys of ``task_key``'s candidates, in pool order."""
        traces = self.traces.get(task_key, [])
        keys = self._keys.get(task_key)
        if keys is None or len(keys) != len(traces):
            keys = [program_key(t) for t in traces]
            self._keys[task_key] = keys
        return keys

    def index(self, task_key: str) -> dict[str, int]:
        """Program key -> position in the pool, for matching measured records back."""
        return {k: i for i, k in enumerate(self.keys(task_key))}

    def program_set(self, profile: str | None = None) -> ProgramSet:
        """The candidates as unmeasured :class:`Program` s (what samplers select from)."""
        out = ProgramSet(profile=profile)
        for task, traces in self:
            out.add(task, [Program(task_key=task.key, trace=t) for t in traces])
        return out

    def schedule(self, task_key: str, i: int, mod: Any = None) -> Any:
        """Candidate ``i`` of ``task_key`` replayed into a ``tvm.s_tir.Schedule``."""
        return trace_to_schedule(mod if mod is not None else self.tasks[task_key].mod_b64, self.traces[task_key][i])


def trace_to_schedule(mod: Any, trace_json: Any) -> Any:
    """Replay a trace JSON (decisions included, postprocessing kept) on a workload.

    ``mod`` is an IRModule/PrimFunc or the base64 workload string of a JSONDatabase line.
    """
    import tvm
    from tvm.s_tir.schedule import Trace

    if isinstance(mod, str):
        mod = workload_module(mod)
    sch = tvm.s_tir.Schedule(_as_module(mod), seed=1, debug_mask=0, error_render_level="detail")
    Trace.apply_json_to_schedule(trace_json, sch)
    return sch


def save_pool(
    path: str | os.PathLike, pool: Pool | Iterable[tuple[Task, Sequence[Any]]], *, meta: Mapping[str, Any] | None = None
) -> Path:
    """Write a pool directory (format in the module doc); replaces a pool already there.

    ``pool`` is a :class:`Pool` or ``(task, candidates)`` pairs (candidates: Schedules,
    Traces or trace JSON). ``meta`` adds fields to ``tcl_pool.json`` (target, seed, ...).
    """
    if not isinstance(pool, Pool):
        p = Pool()
        for task, cands in pool:
            p.add(task, cands)
        pool = p
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    (root / POOL_META).unlink(missing_ok=True)  # a pool without metadata is "being written"
    workloads, lines, tasks = [], [], []
    for i, (task, traces) in enumerate(pool):
        if task.mod_b64 is None:
            raise TclError(f"task {task.name} has no TVM workload; a pool needs one")
        workloads.append(tvm_json_dumps([task.key, task.mod_b64]))
        origins = pool.origins.get(task.key) or []
        for j, t in enumerate(traces):
            origin = origins[j] if j < len(origins) else None
            lines.append(tvm_json_dumps([i, t] if origin is None else [i, t, origin]))
        tasks.append(
            {
                "key": task.key,
                "name": task.name,
                "weight": task.weight,
                "networks": list(task.networks),
                "n": len(traces),
            }
        )
    write_atomic(root / POOL_WORKLOADS, "".join(w + "\n" for w in workloads))
    write_atomic(root / POOL_CANDIDATES, "".join(line + "\n" for line in lines))
    info = {**dict(pool.meta), **dict(meta or {})}
    info.update(format=POOL_FORMAT, version=POOL_VERSION, tasks=tasks)
    info.setdefault("created", time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    info.setdefault("tvm_version", tvm_version())
    if "target" in info and not isinstance(info["target"], (dict, str, type(None))):
        info["target"] = plain_json(info["target"].export())
    write_atomic(root / POOL_META, json.dumps(info, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    pool.meta = info
    return root


def is_pool(path: str | os.PathLike) -> bool:
    return (Path(path) / POOL_META).is_file()


def load_pool(path: str | os.PathLike) -> Pool:
    """Read a pool directory written by :func:`save_pool`. Broken files raise TclError."""
    root = Path(path)
    meta_path = root / POOL_META
    if not meta_path.is_file():
        raise TclError(f"{root} is not a candidate pool (no {POOL_META}; unfinished or wrong directory)")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TclError(f"{meta_path}: not valid JSON ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != POOL_FORMAT:
        raise TclError(
            f"{meta_path}: not a tcl pool file (format {meta.get('format') if isinstance(meta, dict) else None!r})"
        )
    if meta.get("version") not in POOL_VERSIONS_READ:
        raise TclError(
            f"{meta_path}: pool format version {meta.get('version')!r}, this tcl reads "
            f"{', '.join(map(str, POOL_VERSIONS_READ))}"
        )
    entries = meta.get("tasks", [])
    workloads = list(_read_json_lines(root / POOL_WORKLOADS))
    if len(workloads) != len(entries):
        raise TclError(f"{root / POOL_WORKLOADS}: {len(workloads)} workloads, {POOL_META} lists {len(entries)} tasks")
    pool = Pool(meta=meta)
    order: list[str] = []
    for (lineno, wl), entry in zip(workloads, entries):
        if not (isinstance(wl, list) and len(wl) == 2 and all(isinstance(x, str) for x in wl)) or wl[0] != entry.get(
            "key"
        ):
            raise TclError(f'{root / POOL_WORKLOADS}:{lineno}: expected ["{entry.get("key")}", base64 workload]')
        task = Task(
            key=wl[0],
            name=str(entry.get("name") or wl[0]),
            weight=float(entry.get("weight", 1.0)),
            networks=tuple(entry.get("networks", ())),
            mod_b64=wl[1],
        )
        pool.tasks[task.key] = task
        pool.traces[task.key] = []
        pool.origins[task.key] = []
        order.append(task.key)
    for lineno, line in _read_json_lines(root / POOL_CANDIDATES):
        if not (
            isinstance(line, list)
            and len(line) in (2, 3)
            and isinstance(line[0], int)
            and 0 <= line[0] < len(order)
            and (len(line) == 2 or line[2] in ORIGINS)
        ):
            raise TclError(
                f"{root / POOL_CANDIDATES}:{lineno}: expected [task_index, trace] or "
                f"[task_index, trace, origin] with origin one of {', '.join(ORIGINS)}"
            )
        pool.traces[order[line[0]]].append(line[1])
        pool.origins[order[line[0]]].append(line[2] if len(line) == 3 else None)
    for entry, key in zip(entries, order):
        if "n" in entry and entry["n"] != len(pool.traces[key]):
            raise TclError(
                f"{root / POOL_CANDIDATES}: task {entry.get('name')} has {len(pool.traces[key])} candidates, {POOL_META} says {entry['n']}"
            )
    return pool


def _read_json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    from tcl.database import stored_lines

    try:
        for lineno, raw in stored_lines(path):
            if not raw.strip():
                continue
            try:
                yield lineno, json.loads(raw)
            except ValueError as exc:
                raise TclError(f"{path}:{lineno}: corrupt line ({getattr(exc, 'msg', exc)})") from None
    except FileNotFoundError:
        raise TclError(f"cannot read {path}: no such file") from None
