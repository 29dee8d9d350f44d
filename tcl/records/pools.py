"""Candidate pools: distinct schedules of a task drawn from MetaSchedule's design space.

A pool is what samplers choose from and what backends measure. It is generated once per
task and saved, so that the *same* candidates can be measured on several hardware profiles.

Pool directory format (version 2; version 1, without origins, is read too)::

    pool/
      tcl_pool.json        metadata: format, version, target, seed, TVM version, date,
                           tasks in order: key, name, weight, networks, n (candidates), and
                           stored: the lines and bytes of each data file it commits
      workloads.json       one line per task, in task order: [structural_hash, base64(IR JSON)]
                           (exactly a line of TVM's database_workload.json)
      candidates.json      one line per candidate: [task_index, trace_json, origin], trace_json
                           being trace.as_json() = [insts, decisions] (the trace part of a line
                           of TVM's database_tuning_record.json), origin how it was found
                           (:mod:`tcl.measurement.candidates`; left out when unknown); tasks'
                           candidates in order

Lines are in TVM's JSON dialect (:func:`tcl.records.tvm_json.tvm_json_dumps`). The files are
deliberately *not* named like TVM's JSONDatabase files, so a pool is never
mistaken for measured records. Files are written to temporary names and renamed, metadata
last: a half-written pool has no ``tcl_pool.json`` and is refused. A pool that grows task by
task is appended to (:func:`extend_pool`); readers take only the committed lines, so an
interrupted append is never read and the next one cuts it off.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import attrs

from tcl.api.errors import TclError
from tcl.api.programs import Program, ProgramSet, Task, workload_module
from tcl.records.manifest import timestamp, tvm_version
from tcl.records.program_keys import program_key
from tcl.records.stored_files import gc_paused, stored_lines, write_atomic
from tcl.records.trace_json import plain_json, trace_shape_problem, trace_to_json
from tcl.records.tvm_json import tvm_json_dumps, workload_name

log = logging.getLogger(__name__)

POOL_FORMAT = "tcl-pool"
POOL_VERSION = 2
POOL_VERSIONS_READ = (1, 2)
ORIGINS = ("random", "mutation", "evolutionary")
POOL_META = "tcl_pool.json"
POOL_WORKLOADS = "workloads.json"
POOL_CANDIDATES = "candidates.json"


def as_ir_module(mod: Any) -> Any:
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


# ---- tasks -------------------------------------------------------------------------------


def workload_json(mod: Any) -> tuple[str, str]:
    """``(structural_hash, base64 IR JSON)`` of a workload, exactly TVM's workload line."""
    from tvm.s_tir.meta_schedule.database import Workload

    shash, b64 = Workload(as_ir_module(mod)).as_json()
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
    ``origins[key]`` how each was found (one of ORIGINS, or None when not known). A loaded pool
    knows the file line of each candidate it read, so an error can point at it."""

    tasks: dict[str, Task] = attrs.field(factory=dict)
    traces: dict[str, list[Any]] = attrs.field(factory=dict)
    origins: dict[str, list[str | None]] = attrs.field(factory=dict)
    meta: dict[str, Any] = attrs.field(factory=dict)
    _keys: dict[str, list[str]] = attrs.field(factory=dict, repr=False)
    _lines: dict[str, list[int]] = attrs.field(factory=dict, repr=False)  # candidates file line, when read
    _source: Path | None = attrs.field(default=None, repr=False)  # the candidates file read

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
            tj = stored_form(trace_to_json(cand))
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

    def programs(self, task_key: str) -> list[Program]:
        """``task_key``'s candidates as unmeasured :class:`Program` s (what samplers select
        from), each with the ``file:line`` it was read from when the pool was loaded."""
        lines = self._lines.get(task_key, [])
        return [
            Program(
                task_key=task_key,
                trace=t,
                location=f"{self._source}:{lines[i]}" if i < len(lines) else None,
            )
            for i, t in enumerate(self.traces.get(task_key, []))
        ]

    def program_set(self, profile: str | None = None) -> ProgramSet:
        """Every task's :meth:`programs`."""
        out = ProgramSet(profile=profile)
        for task in self.tasks.values():
            out.add(task, self.programs(task.key))
        return out

    def schedule(self, task_key: str, i: int, mod: Any = None) -> Any:
        """Candidate ``i`` of ``task_key`` replayed into a ``tvm.s_tir.Schedule``."""
        return trace_to_schedule(mod if mod is not None else self.tasks[task_key].mod_b64, self.traces[task_key][i])


def stored_form(trace_json: Any) -> Any:
    """The trace as reading it back from a pool file gives it (TVM's JSON writes booleans as
    1 / 0), so a pool in memory equals the same pool loaded and need not be reloaded."""
    return json.loads(tvm_json_dumps(trace_json))


def trace_to_schedule(mod: Any, trace_json: Any) -> Any:
    """Replay a trace JSON (decisions included, postprocessing kept) on a workload.

    ``mod`` is an IRModule/PrimFunc or the base64 workload string of a JSONDatabase line.
    """
    import tvm
    from tvm.s_tir.schedule import Trace

    if isinstance(mod, str):
        mod = workload_module(mod)
    sch = tvm.s_tir.Schedule(as_ir_module(mod), seed=1, debug_mask=0, error_render_level="detail")
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
    workloads, lines = _task_lines(pool, 0)
    write_atomic(root / POOL_WORKLOADS, "".join(workloads))
    write_atomic(root / POOL_CANDIDATES, "".join(lines))
    return _commit(root, pool, meta)


def extend_pool(path: str | os.PathLike, pool: Pool, *, meta: Mapping[str, Any] | None = None) -> Path:
    """Save ``pool`` to the pool directory at ``path`` that holds its first tasks, appending
    the tasks it lacks rather than rewriting every candidate (a pool grows task by task during
    a collection; rewriting it whole each time costs time quadratic in its size). Falls back to
    :func:`save_pool` when the directory is not such a prefix of ``pool``. The metadata, written
    last, says how many lines are committed, so an interrupted append is never read."""
    root = Path(path)
    try:
        on_disk = json.loads((root / POOL_META).read_text(encoding="utf-8"))
        committed = {name: int(on_disk["stored"][name]["bytes"]) for name in (POOL_WORKLOADS, POOL_CANDIDATES)}
        done = [(t["key"], t["n"]) for t in on_disk["tasks"]]
    except (OSError, ValueError, KeyError, TypeError):
        return save_pool(root, pool, meta=meta)
    ours = [(key, len(pool.traces.get(key, []))) for key in pool.tasks]
    intact = all(
        (root / name).is_file() and (root / name).stat().st_size >= committed[name]
        for name in (POOL_WORKLOADS, POOL_CANDIDATES)
    )  # plain files (not packed) holding at least what the metadata committed
    if not intact or ours[: len(done)] != done:
        return save_pool(root, pool, meta=meta)
    workloads, lines = _task_lines(pool, len(done))
    for name, new in ((POOL_WORKLOADS, workloads), (POOL_CANDIDATES, lines)):
        with open(root / name, "r+b") as fh:
            fh.truncate(committed[name])  # drop what an interrupted append left
            fh.seek(0, os.SEEK_END)
            fh.write("".join(new).encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
    return _commit(root, pool, meta)


def _task_lines(pool: Pool, first: int) -> tuple[list[str], list[str]]:
    """The workloads.json and candidates.json lines of the pool's tasks from index ``first`` on."""
    workloads, lines = [], []
    for i, (task, traces) in enumerate(pool):
        if i < first:
            continue
        if task.mod_b64 is None:
            raise TclError(f"task {task.name} has no TVM workload; a pool needs one")
        workloads.append(tvm_json_dumps([task.key, task.mod_b64]) + "\n")
        origins = pool.origins.get(task.key) or []
        for j, t in enumerate(traces):
            origin = origins[j] if j < len(origins) else None
            lines.append(tvm_json_dumps([i, t] if origin is None else [i, t, origin]) + "\n")
    return workloads, lines


def _commit(root: Path, pool: Pool, meta: Mapping[str, Any] | None) -> Path:
    """Write ``tcl_pool.json`` for the data files as they are: the tasks, and the lines and bytes stored."""
    tasks = [
        {"key": task.key, "name": task.name, "weight": task.weight, "networks": list(task.networks), "n": len(traces)}
        for task, traces in pool
    ]
    info = {**dict(pool.meta), **dict(meta or {})}
    info.update(format=POOL_FORMAT, version=POOL_VERSION, tasks=tasks)
    info["stored"] = {
        POOL_WORKLOADS: {"lines": len(tasks), "bytes": (root / POOL_WORKLOADS).stat().st_size},
        POOL_CANDIDATES: {"lines": sum(t["n"] for t in tasks), "bytes": (root / POOL_CANDIDATES).stat().st_size},
    }
    info.setdefault("created", timestamp())
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
    with gc_paused():
        return _load_pool(Path(path))


def _load_pool(root: Path) -> Pool:
    """:func:`load_pool`'s reading, with the cycle collector paused."""
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
    stored = meta.get("stored") if isinstance(meta.get("stored"), dict) else {}
    workloads = list(_read_json_lines(root / POOL_WORKLOADS, _committed_lines(stored, POOL_WORKLOADS)))
    if len(workloads) != len(entries):
        raise TclError(f"{root / POOL_WORKLOADS}: {len(workloads)} workloads, {POOL_META} lists {len(entries)} tasks")
    lines: dict[str, list[int]] = {}
    pool = Pool(meta=meta, lines=lines, source=root / POOL_CANDIDATES)
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
        lines[task.key] = []
        order.append(task.key)
    for lineno, line in _read_json_lines(root / POOL_CANDIDATES, _committed_lines(stored, POOL_CANDIDATES)):
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
        shape = trace_shape_problem(line[1])
        if shape is not None:
            raise TclError(f"{root / POOL_CANDIDATES}:{lineno}: not a candidate: {shape}")
        pool.traces[order[line[0]]].append(line[1])
        pool.origins[order[line[0]]].append(line[2] if len(line) == 3 else None)
        lines[order[line[0]]].append(lineno)
    for entry, key in zip(entries, order):
        if "n" in entry and entry["n"] != len(pool.traces[key]):
            raise TclError(
                f"{root / POOL_CANDIDATES}: task {entry.get('name')} has {len(pool.traces[key])} candidates, {POOL_META} says {entry['n']}"
            )
    return pool


def _committed_lines(stored: Mapping[str, Any], name: str) -> int | None:
    """How many lines of data file ``name`` the metadata committed (None: all; older pools)."""
    lines = (stored.get(name) or {}).get("lines") if isinstance(stored.get(name), dict) else None
    return lines if isinstance(lines, int) and not isinstance(lines, bool) and lines >= 0 else None


def _read_json_lines(path: Path, limit: int | None = None) -> Iterator[tuple[int, Any]]:
    """Parsed non-blank lines of ``path``, the first ``limit`` of them when given (what follows
    is an append the metadata never committed)."""
    read = 0
    try:
        for lineno, raw in stored_lines(path):
            if limit is not None and read >= limit:
                return
            if not raw.strip():
                continue
            read += 1
            try:
                yield lineno, json.loads(raw)
            except ValueError as exc:
                raise TclError(f"{path}:{lineno}: corrupt line ({getattr(exc, 'msg', exc)})") from None
    except FileNotFoundError:
        raise TclError(f"cannot read {path}: no such file") from None
