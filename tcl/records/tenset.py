"""Importing TenSet (auto_scheduler) measurement records, with no TVM needed.

TenSet's records are auto_scheduler log lines::

    {"i": [[workload_key, target_str, hw_params, target_host, layout_rewrite, input_names],
           [[], steps]],
     "r": [[cost_s, ...], error_no, all_cost, timestamp], "v": "v0.6"}

with steps like ``["SP", 2, 0, 512, [1, 64, 8], 1]``. A run failed when ``error_no != 0``
(its costs are ``[1e10]``); latency = mean of the costs.

On-disk format of an import (read by :func:`tcl.records.database.load_records`): the same layout
and line shapes as a MetaSchedule JSONDatabase, under *different file names*, because there
is no TVM workload IR and TVM must never try to read these as its own database::

    out_dir/
      tenset_workload.json        [task_key, workload_key]        one line per task
      tenset_tuning_record.json   [task_index, [steps, costs, target_str, null]]
      tcl_errors.json             failed runs, as for our own records:
                                  {"line", "workload", "key", "kind", "msg"}
      tcl_manifest.json           source "tenset", profile, targets, tasks (name, weight)

* ``task_key`` = ``"tenset-"`` + first 20 hex digits of sha256(workload_key): TenSet's
  workload key (``'["<dag hash>", 1, 56, 56, 64, ...]'``) identifies a task, but it is long
  and not a TVM structural hash, so it is kept verbatim as the workload payload instead.
* ``steps`` is the auto_scheduler step list, verbatim: it becomes ``Program.trace`` with
  ``Program.source == "tenset"``.
* ``costs`` are TenSet's seconds; failed runs store ``[1e10]`` exactly as MetaSchedule stores
  failed runs, and the reason (``error_no`` mapped to build / run / timeout / unknown, and
  its auto_scheduler name) goes to ``tcl_errors.json``.
* Lines are written in TVM's JSON dialect by the same :class:`tcl.records.record_writer.RecordWriter`,
  so a killed import is repaired like any record directory.

One import is one platform: input holding several target strings is refused unless
``target=`` picks one. Task names default to ``tenset_<first 8 digits of the DAG hash>``;
``tasks_info`` (workload_key -> {"name", "weight", "networks"}) overrides them.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterator, Mapping

import attrs

from tcl.api.errors import TclError
from tcl.api.programs import MeasureResult, Task
from tcl.records.manifest import update_manifest
from tcl.records.record_writer import RecordWriter
from tcl.records.staging import require_new_directory, staged_directory

#: auto_scheduler's MeasureErrorNo, and the kind of failure each is for us.
ERROR_NAMES = {
    0: "NO_ERROR",
    1: "INSTANTIATION_ERROR",
    2: "COMPILE_HOST",
    3: "COMPILE_DEVICE",
    4: "RUNTIME_DEVICE",
    5: "WRONG_ANSWER",
    6: "BUILD_TIMEOUT",
    7: "RUN_TIMEOUT",
    8: "UNKNOWN_ERROR",
}
ERROR_KINDS = {1: "build", 2: "build", 3: "build", 4: "run", 5: "run", 6: "timeout", 7: "timeout"}
BATCH = 4096


@attrs.frozen
class TensetRecord:
    """One parsed TenSet line."""

    workload_key: str
    target: str
    steps: list[Any]
    costs: tuple[float, ...]
    error_no: int


@attrs.frozen
class ImportSummary:
    out_dir: Path
    tasks: int
    records: int
    failed: int
    target: str | None
    files: int


def tenset_task_key(workload_key: str) -> str:
    return "tenset-" + hashlib.sha256(workload_key.encode("utf-8")).hexdigest()[:20]


def tenset_task_name(workload_key: str) -> str:
    try:
        dag_hash = json.loads(workload_key)[0]
        if isinstance(dag_hash, str) and dag_hash:
            return f"tenset_{dag_hash[:8]}"
    except (ValueError, IndexError, KeyError, TypeError):
        pass
    return "tenset_" + hashlib.sha256(workload_key.encode("utf-8")).hexdigest()[:8]


def parse_line(obj: Any) -> TensetRecord:
    """A TenSet record from one parsed JSON line; ValueError says what is wrong."""
    if not isinstance(obj, dict) or "i" not in obj or "r" not in obj:
        raise ValueError('expected an object with "i" and "r"')
    inp, res = obj["i"], obj["r"]
    if not (isinstance(inp, list) and len(inp) >= 2 and isinstance(inp[0], list) and len(inp[0]) >= 2):
        raise ValueError('"i" must be [[workload_key, target, ...], [[], steps]]')
    workload_key, target = inp[0][0], inp[0][1]
    if not isinstance(workload_key, str) or not isinstance(target, str):
        raise ValueError('"i"[0] must start with the workload key and target strings')
    state = inp[1]
    if not (isinstance(state, list) and len(state) >= 2 and isinstance(state[1], list)):
        raise ValueError('"i"[1] must be [[], steps]')
    steps = state[1]
    if not all(isinstance(s, list) and s and isinstance(s[0], str) for s in steps):
        raise ValueError('every step must be a list starting with its kind, like ["SP", 2, 0, 512, [1, 64, 8], 1]')
    if not (isinstance(res, list) and len(res) >= 2 and isinstance(res[0], list) and isinstance(res[1], int)):
        raise ValueError('"r" must be [[costs...], error_no, all_cost, timestamp]')
    costs = res[0]
    if not all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in costs):
        raise ValueError("costs must be numbers")
    return TensetRecord(workload_key, target, steps, tuple(float(c) for c in costs), int(res[1]))


def _input_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in (".json", ".log", ".jsonl"))
        if not files:
            raise TclError(f"{path}: no TenSet record files (*.json) in it")
        return files
    raise TclError(f"no such file or directory: {path}")


def read_tenset(path: str | os.PathLike) -> Iterator[TensetRecord]:
    """TenSet records of a file or of every ``*.json`` under a directory, in file order.

    A malformed line raises TclError naming ``file:line``; blank lines and ``#`` comments
    are skipped.
    """
    for file in _input_files(Path(path)):
        with open(file, "rb") as fh:
            for lineno, raw in enumerate(fh, 1):
                text = raw.strip()
                if not text or text.startswith(b"#"):
                    continue
                try:
                    yield parse_line(json.loads(text))
                except ValueError as exc:
                    msg = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
                    raise TclError(f"{file}:{lineno}: not a TenSet record ({msg})") from None


def _result(rec: TensetRecord) -> MeasureResult:
    if rec.error_no == 0 and rec.costs and all(0 < c < 1e10 for c in rec.costs):
        return MeasureResult(run_secs=rec.costs)
    kind = ERROR_KINDS.get(rec.error_no, "unknown")
    name = ERROR_NAMES.get(rec.error_no, "UNKNOWN")
    detail = f"auto_scheduler error_no {rec.error_no} ({name})" if rec.error_no else "no valid cost"
    return MeasureResult(run_secs=None, error_kind=kind, error_msg=detail)


def import_tenset(
    path: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    profile: str | None = None,
    target: str | None = None,
    tasks_info: Mapping[str, Mapping[str, Any]] | None = None,
) -> ImportSummary:
    """Convert TenSet record file(s) at ``path`` into the new record directory ``out_dir``,
    written whole or not at all (:mod:`tcl.records.staging`).

    ``profile`` names the platform in the manifest (e.g. ``"tenset-e5-2673"``); ``target``
    keeps only records of that exact target string (required when the input has several).
    Input without a single record is an error.
    """
    out = Path(out_dir)
    require_new_directory(out, "import")
    files = _input_files(Path(path))
    # first pass: which targets are there (cheap next to writing; keeps the import one-platform)
    targets: dict[str, int] = {}
    for rec in read_tenset(path):
        targets[rec.target] = targets.get(rec.target, 0) + 1
    if not targets:
        raise TclError(f"{path}: no TenSet records in {'it' if len(files) == 1 else f'its {len(files)} files'}")
    if target is None and len(targets) > 1:
        listed = "; ".join(f"{t!r} ({n} records)" for t, n in targets.items())
        raise TclError(f"{path} holds records of several targets: {listed}. Import one platform at a time (target=...)")
    if target is not None and target not in targets:
        raise TclError(
            f"{path} has no records of target {target!r} (it has: {', '.join(map(repr, targets)) or 'none'})"
        )
    chosen = target if target is not None else next(iter(targets), None)
    info = dict(tasks_info or {})
    tasks: dict[str, Task] = {}
    n_records = n_failed = 0
    with staged_directory(out, "import") as staging, RecordWriter(staging, profile=profile, flavor="tenset") as writer:
        update_manifest(staging, source="tenset", target=chosen, imported_from=str(Path(path).resolve()))
        batch: list[tuple[Any, MeasureResult]] = []
        current: TensetRecord | None = None

        def flush() -> None:
            if batch and current is not None:
                writer.add(tasks[current.workload_key], batch, target=current.target, payload=current.workload_key)
                batch.clear()

        for rec in read_tenset(path):
            if rec.target != chosen:
                continue
            if current is None or rec.workload_key != current.workload_key or len(batch) >= BATCH:
                flush()
                current = rec
            if rec.workload_key not in tasks:
                extra = info.get(rec.workload_key, {})
                tasks[rec.workload_key] = Task(
                    key=tenset_task_key(rec.workload_key),
                    name=str(extra.get("name") or tenset_task_name(rec.workload_key)),
                    weight=float(extra.get("weight", 1.0)),
                    networks=tuple(extra.get("networks", ())),
                    mod_b64=None,
                )
            result = _result(rec)
            n_failed += not result.ok
            n_records += 1
            batch.append((rec.steps, result))
        flush()
    return ImportSummary(
        out_dir=out, tasks=len(tasks), records=n_records, failed=n_failed, target=chosen, files=len(files)
    )
