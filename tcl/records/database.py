"""Measured records: TVM MetaSchedule JSONDatabase files, written and read by us.

Our records *are* TVM's. A record directory holds:

``database_workload.json``
    TVM's: one line per workload, ``[structural_hash, base64(IR JSON)]``.
``database_tuning_record.json``
    TVM's: one line per measured candidate,
    ``[workload_index, [[insts, decisions], run_secs, target_config, args_info]]``.
``tcl_errors.json`` (ours)
    why failed candidates failed, one JSON object per line:
    ``{"line": N, "workload": hash, "key": program_key, "kind": "build|run|timeout", "msg": ...}``
    where ``N`` is the (1-based) line of the record in ``database_tuning_record.json``.
``tcl_manifest.json`` (ours)
    tasks (key, name, weight, networks), networks, profile, TVM version, CPU model, dates;
    written atomically (temporary file + rename).

Failed candidates are stored as MetaSchedule itself stores failed runs: TVM 0.27's
``AddToDatabase`` measure callback (src/s_tir/meta_schedule/measure_callback/add_to_database.cc)
commits a record for every candidate, and when the runner gave no ``run_secs`` (build error,
run error or timeout) it writes ``run_secs = [1e10]`` (a float32 ``FloatImm``, printed
``10000000000``); ``TuningRecord::IsValid`` and ``GetTopK`` skip such records
(``SortTuningRecordByMeanRunSecs::kMaxMeanTime = 1e10``). TVM keeps no reason; ours goes in
``tcl_errors.json``.

Writing (:class:`RecordWriter`) reproduces TVM's ``JSONDumps`` byte for byte (no spaces,
floats ``%.20g``, booleans as ``1``/``0``, sorted dict keys, TVM's string escapes), appends
whole batches, flushes and fsyncs them. Workload lines are written once per workload. Error
lines are written (and synced) *before* their records, so a crash leaves at worst error lines
that point past the end of the record file; those are dropped when the directory is next
opened. A process killed mid-write leaves a torn last line: opening a writer cuts it off (or,
if the tail is a complete record missing only its newline, completes it), so no complete
record is lost or duplicated. The loader skips a torn *last* line (a writer may be busy) and
raises :class:`TclError` naming ``file:line`` for any other corrupt line.

Reading (:func:`load_records`) walks a directory tree, finds every JSONDatabase exactly as
``ms.tune_tir(work_dir=...)`` / ``tune_relax`` write them (and TenSet imports, see
:mod:`tcl.records.tenset`), and parses the JSON itself: no TVM objects are built, tasks keep their
base64 workload. Task key = the structural hash as stored; weight/name/networks from the
manifest if present, else weight 1 and the name of the PrimFunc (its ``global_symbol``).
A record whose ``run_secs`` is no measurement (null, empty, NaN, infinite, zero, negative,
not numbers) is kept as a failed program of error kind ``invalid`` with the reason, and
counted in a warning; a workload index naming no workload is an error naming ``file:line``.
A damaged ``.gz`` file is an error naming it."""

from __future__ import annotations

import gzip
import json
import logging
import math
import os
import shutil
from pathlib import Path
from typing import Any, Mapping, Sequence

from tcl.api.errors import TclError
from tcl.api.programs import Program, ProgramSet, Task
from tcl.records.manifest import read_manifest
from tcl.records.program_keys import program_key
from tcl.records.staging import is_staging, staged_directory
from tcl.records.stored_files import (
    CORRUPT_GZIP,
    PACKED_SUFFIX,
    gc_paused,
    iter_json_lines,
    open_stored,
    stored_file,
)
from tcl.records.timing_cpus import cpus_of_records, keep_one_cpu_per_task
from tcl.records.trace_json import trace_shape_problem
from tcl.records.tvm_json import workload_name

log = logging.getLogger(__name__)

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"
ERRORS_FILE = "tcl_errors.json"
LOCK_FILE = ".tcl_writer.lock"
TENSET_WORKLOAD_FILE = "tenset_workload.json"
TENSET_RECORD_FILE = "tenset_tuning_record.json"


# the big JSON-lines files that `tcl dataset pack` compresses (pool files are named in tcl.records.pools)
PACKABLE_FILES = frozenset(
    {WORKLOAD_FILE, RECORD_FILE, TENSET_WORKLOAD_FILE, TENSET_RECORD_FILE, "workloads.json", "candidates.json"}
)


#: What MetaSchedule stores as run_secs of a candidate that failed to build or run.
FAILED_RUN_SECS = 1e10
ERROR_KINDS = ("build", "run", "timeout", "unknown")
#: The error kind of a stored record whose run_secs is no measurement (NaN, negative, not numbers, ...).
INVALID_KIND = "invalid"


def pack_dir(src: str | os.PathLike, dst: str | os.PathLike, *, packed: bool) -> list[Path]:
    """Copy a record or pool directory tree, gzip-compressing its JSON-lines files
    (``packed=True``) or expanding them again (``packed=False``). Small metadata files are
    copied as they are. The tree is written under a temporary sibling of ``dst`` and renamed
    at the end, so an interrupted run leaves no half-filled ``dst``."""
    src, dst = Path(src), Path(dst)
    if not src.is_dir():
        raise TclError(f"no such directory: {src}")
    with staged_directory(dst, "copy") as staging:
        return _copy_tree(src, staging, dst, packed)


def _copy_tree(src: Path, staging: Path, dst: Path, packed: bool) -> list[Path]:
    """pack_dir's copy into ``staging``; returns the paths the files will have under ``dst``."""
    written = []
    for dirpath, _dirnames, filenames in os.walk(src):
        rel = Path(dirpath).relative_to(src)
        (staging / rel).mkdir(parents=True, exist_ok=True)
        for name in sorted(filenames):
            if name == LOCK_FILE:
                continue
            base = name[: -len(PACKED_SUFFIX)] if name.endswith(PACKED_SUFFIX) else name
            out_name = base + PACKED_SUFFIX if packed and base in PACKABLE_FILES else base
            try:
                with open_stored(Path(dirpath) / base) as fin, open(staging / rel / out_name, "wb") as raw:
                    # no name or time in the gzip header: the same records pack to the same bytes
                    fout = (
                        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0)
                        if out_name.endswith(PACKED_SUFFIX)
                        else raw
                    )
                    with fout:
                        shutil.copyfileobj(fin, fout, 1 << 20)
            except CORRUPT_GZIP as err:
                raise TclError(f"{Path(dirpath) / name}: not a readable gzip file ({err})") from None
            written.append(dst / rel / out_name)
    return written


def find_databases(path: str | os.PathLike) -> list[Path]:
    """Every record directory under ``path`` (itself included), sorted: directories holding
    ``database_workload.json`` (TVM JSONDatabase) or ``tenset_workload.json`` (TenSet import)."""
    root = Path(path)
    if root.is_file():
        root = root.parent
    if not root.is_dir():
        raise TclError(f"no such directory: {root}")
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not is_staging(d))  # unfinished results
        names = {n[: -len(PACKED_SUFFIX)] if n.endswith(PACKED_SUFFIX) else n for n in filenames}
        if WORKLOAD_FILE in names or TENSET_WORKLOAD_FILE in names:
            found.append(Path(dirpath))
    return found


def _failed(run_secs: Sequence[Any]) -> bool:
    return all(s >= FAILED_RUN_SECS for s in run_secs)


def run_secs_problem(run_secs: Any) -> str | None:
    """Why a stored ``run_secs`` is no measurement (None when it is one: a non-empty list of
    finite positive seconds, MetaSchedule's failure marker included)."""
    if run_secs is None:
        return "run_secs is null (never measured)"
    if not isinstance(run_secs, list) or not run_secs:
        return f"run_secs {json.dumps(run_secs)[:40]} is not a list of seconds"
    for s in run_secs:
        if isinstance(s, bool) or not isinstance(s, (int, float)):
            return f"run_secs holds {json.dumps(s)[:40]}, not a number"
        if not (math.isfinite(s) and s > 0):
            return f"run_secs holds {s}, not a finite positive time"
    return None


def workload_of(widx: Any, workloads: Sequence[Any], rec_path: Path, lineno: int) -> Any:
    """The workload a record's index names; a bad index is an error, never another task's."""
    if isinstance(widx, bool) or not isinstance(widx, int) or not 0 <= widx < len(workloads):
        raise TclError(
            f"{rec_path}:{lineno}: workload index {json.dumps(widx)[:40]} names none of the "
            f"{len(workloads)} workloads of this database"
        )
    return workloads[widx]


def _read_errors(path: Path) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for lineno, e in iter_json_lines(path):
        if not (isinstance(e, dict) and isinstance(e.get("line"), int)):
            raise TclError(f'{path}:{lineno}: expected {{"line": N, "kind": ..., "msg": ...}}')
        out[e["line"]] = e
    return out


def _load_one(db: Path, out: ProgramSet, manifest: Mapping[str, Any] | None) -> None:
    tenset = stored_file(db / TENSET_WORKLOAD_FILE) is not None and stored_file(db / WORKLOAD_FILE) is None
    wl_path = db / (TENSET_WORKLOAD_FILE if tenset else WORKLOAD_FILE)
    rec_path = db / (TENSET_RECORD_FILE if tenset else RECORD_FILE)
    source = "tenset" if tenset else "metaschedule"
    info = {t["key"]: t for t in (manifest or {}).get("tasks", [])}
    workloads: list[Task] = []
    for lineno, line in iter_json_lines(wl_path):
        if not (isinstance(line, list) and len(line) == 2 and isinstance(line[0], str) and isinstance(line[1], str)):
            raise TclError(f"{wl_path}:{lineno}: expected [structural_hash, workload]")
        key, payload = line
        if key in out.tasks:
            workloads.append(out.tasks[key])
            continue
        entry = info.get(key, {})
        if tenset:
            name = entry.get("name") or f"tenset_{key[:8]}"
            mod_b64 = None
        else:
            name = entry.get("name") or workload_name(payload, key)
            mod_b64 = payload
        task = Task(
            key=key,
            name=str(name),
            weight=float(entry.get("weight", 1.0)),
            networks=tuple(entry.get("networks", ())),
            mod_b64=mod_b64,
        )
        out.add(task, [])
        workloads.append(task)
    errors = _read_errors(db / ERRORS_FILE)
    programs = out.programs
    invalid: list[tuple[int, str]] = []
    for lineno, line in iter_json_lines(rec_path):
        try:
            widx, (trace, run_secs, _target, _args) = line
        except (ValueError, TypeError):
            raise TclError(
                f"{rec_path}:{lineno}: not a tuning record [workload_index, [trace, run_secs, target, args_info]]"
            ) from None
        task = workload_of(widx, workloads, rec_path, lineno)
        shape = None if tenset else trace_shape_problem(trace)
        if shape is not None:
            raise TclError(f"{rec_path}:{lineno}: not a tuning record: {shape}")
        error = None
        problem = run_secs_problem(run_secs)
        if problem is not None:
            secs, error = None, f"{INVALID_KIND}: {problem}"
            invalid.append((lineno, problem))
        elif _failed(run_secs):
            secs = None
            e = errors.get(lineno)
            if e is not None and e.get("key") == program_key(trace):
                kind, msg = e.get("kind") or "unknown", e.get("msg") or ""
                error = f"{kind}: {msg}" if msg else kind
            else:
                error = "unknown"
        else:
            secs = tuple(float(s) for s in run_secs)
        programs[task.key].append(
            Program(
                task_key=task.key,
                trace=trace,
                run_secs=secs,
                error=error,
                source=source,
                location=f"{rec_path}:{lineno}",
            )
        )
    if invalid:
        log.warning(
            "%s: %d records hold no usable time and count as failed (%s), first at line %d: %s",
            rec_path,
            len(invalid),
            INVALID_KIND,
            *invalid[0],
        )


def load_records(path: str | os.PathLike, *, profile: str | None = None, one_cpu_per_task: bool = True) -> ProgramSet:
    """All records under ``path`` as one :class:`ProgramSet` (see the module doc).

    Databases are read in sorted path order; tasks with the same key merge. With
    ``profile``, only directories whose manifest names that profile are read. Directories of
    different profiles in one call are refused: one ProgramSet is one platform. A task
    whose records several CPU models timed (the manifests' runs say which) keeps those of
    the CPU that timed it last (:mod:`tcl.records.timing_cpus`), with a warning, unless
    ``one_cpu_per_task`` is false.
    """
    dbs = find_databases(path)
    chosen: list[tuple[Path, dict[str, Any] | None]] = []
    profiles: dict[str, Path] = {}
    others: set[str] = set()
    for db in dbs:
        manifest = read_manifest(db)
        p = (manifest or {}).get("profile")
        if profile is not None and p != profile:
            if p:
                others.add(p)
            continue
        if p is not None:
            profiles.setdefault(p, db)
        chosen.append((db, manifest))
    if not chosen and others:  # most likely a misspelt profile: say which ones are there
        raise TclError(f"{path} holds no records of profile '{profile}'; it holds {', '.join(sorted(others))}")
    if len(profiles) > 1:
        names = ", ".join(f"{p} ({d})" for p, d in profiles.items())
        raise TclError(
            f"{path} holds records of several profiles: {names}; choose one (--profile on the command line, profile= in Python)"
        )
    out = ProgramSet(profile=next(iter(profiles), profile))
    with gc_paused():
        for db, manifest in chosen:
            _load_one(db, out, manifest)
    cpus = cpus_of_records(out, {db: manifest for db, manifest in chosen if manifest}) if one_cpu_per_task else None
    if cpus is None:
        return out
    out, dropped = keep_one_cpu_per_task(out, cpus)
    if dropped:
        log.warning(
            "%s: %d task(s) were timed on several CPU models; each keeps the records of the CPU that timed it "
            "last (%d programs left out until a collection times them again; `tcl dataset info` names the tasks)",
            path,
            len(dropped),
            sum(dropped.values()),
        )
    return out
