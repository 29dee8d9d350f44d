"""Appending measured programs to a database directory: TVM's workload and tuning-record lines,
our errors file and manifest, one writer at a time (a lock file), resumable after a crash.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import math
import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from tcl.api.errors import TclError
from tcl.api.programs import MeasureResult, Task, workload_module
from tcl.records.database import (
    ERROR_KINDS,
    ERRORS_FILE,
    FAILED_RUN_SECS,
    LOCK_FILE,
    RECORD_FILE,
    TENSET_RECORD_FILE,
    TENSET_WORKLOAD_FILE,
    WORKLOAD_FILE,
    workload_of,
)
from tcl.records.manifest import update_manifest
from tcl.records.program_keys import program_key
from tcl.records.stored_files import count_lines, iter_json_lines, repair_tail, stored_file, write_atomic
from tcl.records.trace_json import plain_json, trace_to_json
from tcl.records.tvm_json import tvm_json_dumps

log = logging.getLogger(__name__)


def _target_json(target: Any) -> Any:
    """TVM's ``Target::ToConfig()`` as plain JSON (what a record stores)."""
    if target is None:
        return None
    import tvm

    if not isinstance(target, tvm.target.Target):
        target = tvm.target.Target(dict(target) if isinstance(target, Mapping) else target)
    return plain_json(target.export())


def _args_info_json(mod_b64: str) -> list[Any]:
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    return [plain_json(a.as_json()) for a in ArgInfo.from_entry_func(workload_module(mod_b64), remove_preproc=True)]


def _lock_directory(path: Path) -> Any:
    """The open lock file at ``path``, exclusively locked, or a TclError when another writer holds it.

    A writer removes the file while it still holds the lock, so no lock file stays behind.
    One that opened the file just before that removal locks a file no longer in the folder:
    it sees the name now points elsewhere (or nowhere) and locks afresh."""
    while True:
        handle = open(path, "a")  # noqa: SIM115 (held until RecordWriter.close)
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            handle.close()
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise TclError(f"{path.parent}: another process is writing records here") from None
            raise
        try:
            current = os.stat(path).st_ino
        except FileNotFoundError:
            current = None
        if current == os.fstat(handle.fileno()).st_ino:
            return handle
        handle.close()


class RecordWriter:
    """Appends measured candidates to a record directory in TVM's JSONDatabase format.

    One writer per directory at a time (an advisory lock enforces it). Usage::

        with RecordWriter(work_dir, profile="x86-avx2") as w:
            w.add(task, [(schedule_or_trace_json, MeasureResult(...)), ...], target=target)

    ``target`` is a ``tvm.target.Target`` or its dict; ``args_info`` the ArgInfo JSON of the
    workload's parameters, computed from the workload when omitted (both need TVM). Tasks
    added are listed in the manifest (name, weight, networks) on first sight.

    ``flavor="tenset"`` writes a TenSet import (files ``tenset_*.json``; workloads carry the
    auto_scheduler workload key instead of TVM IR, traces are step lists): see tcl.records.tenset.
    """

    def __init__(
        self,
        work_dir: str | os.PathLike,
        *,
        profile: str | None = None,
        networks: Mapping[str, Any] | None = None,
        flavor: str = "metaschedule",
        manifest: bool = True,
    ) -> None:
        if flavor not in ("metaschedule", "tenset"):
            raise ValueError(f"unknown record flavor {flavor!r}")
        self.dir = Path(work_dir)
        self.flavor = flavor
        self.dir.mkdir(parents=True, exist_ok=True)
        if flavor == "tenset":
            self.workload_path, self.record_path = self.dir / TENSET_WORKLOAD_FILE, self.dir / TENSET_RECORD_FILE
        else:
            self.workload_path, self.record_path = self.dir / WORKLOAD_FILE, self.dir / RECORD_FILE
        self.errors_path = self.dir / ERRORS_FILE
        for path in (self.workload_path, self.record_path):
            if not path.exists() and stored_file(path) is not None:
                raise TclError(
                    f"{self.dir} holds a packed (gzip) database; unpack it first: "
                    f"tcl dataset unpack {self.dir} --out NEW_DIR"
                )
        self._lock = _lock_directory(self.dir / LOCK_FILE)
        try:
            self._open()
            self._use_manifest = manifest
            if manifest:
                update_manifest(
                    self.dir, profile=profile, networks=networks, source="tenset" if flavor == "tenset" else None
                )
        except BaseException:
            self.close()
            raise
        self._targets: dict[int, Any] = {}
        self._args_info: dict[str, Any] = {}
        self._keys: dict[str, set[str]] | None = None

    # -- opening and repair
    def _open(self) -> None:
        for path in (self.workload_path, self.record_path, self.errors_path):
            repair_tail(path)
        self.workload_index: dict[str, int] = {}
        self._workload_keys: list[str] = []
        for lineno, line in iter_json_lines(self.workload_path, allow_torn_tail=False):
            if not (isinstance(line, list) and len(line) == 2 and isinstance(line[0], str)):
                raise TclError(f"{self.workload_path}:{lineno}: expected [structural_hash, workload]")
            self.workload_index.setdefault(line[0], len(self._workload_keys))
            self._workload_keys.append(line[0])
        self.n_records = count_lines(self.record_path)
        # error lines written before a crash lost their records: drop them
        errors = list(iter_json_lines(self.errors_path, allow_torn_tail=False))
        kept = [
            e
            for _, e in errors
            if isinstance(e, dict) and isinstance(e.get("line"), int) and e["line"] <= self.n_records
        ]
        if len(kept) != len(errors):
            log.warning(
                "%s: dropping %d error lines of records never written", self.errors_path, len(errors) - len(kept)
            )
            write_atomic(self.errors_path, "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in kept))
        for path in (self.workload_path, self.record_path):
            path.touch(exist_ok=True)  # an empty database, as TVM creates it

    def close(self) -> None:
        lock = getattr(self, "_lock", None)
        if lock is not None and not lock.closed:
            try:
                (self.dir / LOCK_FILE).unlink(missing_ok=True)  # still held: see _lock_directory
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
            finally:
                lock.close()

    def __enter__(self) -> "RecordWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- appending
    @staticmethod
    def _append(path: Path, lines: Sequence[str]) -> None:
        if not lines:
            return
        data = "".join(line + "\n" for line in lines).encode("utf-8")
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)

    def add_workload(self, task: Task, payload: str | None = None) -> int:
        """The workload index of ``task`` (appending its workload line the first time)."""
        if task.key in self.workload_index:
            return self.workload_index[task.key]
        payload = payload if payload is not None else task.mod_b64
        if payload is None:
            raise TclError(f"task {task.name} has no workload to record")
        self._append(self.workload_path, [tvm_json_dumps([task.key, payload])])
        idx = self.workload_index[task.key] = len(self._workload_keys)
        self._workload_keys.append(task.key)
        if self._use_manifest:
            update_manifest(self.dir, tasks=[task])
        return idx

    def add(
        self,
        task: Task,
        entries: Iterable[tuple[Any, MeasureResult]],
        *,
        target: Any,
        args_info: Sequence[Any] | None = None,
        payload: str | None = None,
    ) -> list[int]:
        """Append one batch of ``(trace, result)`` of ``task``; returns their record line numbers.

        ``trace`` is a Schedule, a Trace or trace JSON (TenSet: a steps list). A failed result
        is stored with run_secs ``[1e10]`` and its kind/message go to ``tcl_errors.json``.
        """
        widx = self.add_workload(task, payload)
        if self.flavor == "tenset":
            target_json = target if isinstance(target, str) or target is None else str(target)
            info = None if args_info is None else list(args_info)
        else:
            tid = id(target)
            if tid not in self._targets:
                self._targets[tid] = (target, _target_json(target))
            target_json = self._targets[tid][1]
            if args_info is None:
                if task.key not in self._args_info:
                    self._args_info[task.key] = _args_info_json(task.mod_b64) if task.mod_b64 else None
                info = self._args_info[task.key]
            else:
                info = [plain_json(a.as_json() if hasattr(a, "as_json") else a) for a in args_info]
        record_lines, error_lines, numbers = [], [], []
        line_no = self.n_records
        for trace, result in entries:
            tj = trace_to_json(trace)
            line_no += 1
            if result.ok:
                run_secs = [float(s) for s in result.run_secs]
                if not all(math.isfinite(s) and s > 0 for s in run_secs):
                    raise ValueError(f"run_secs must be positive and finite, got {run_secs}")
            else:
                run_secs = [FAILED_RUN_SECS]
                kind = result.error_kind if result.error_kind in ERROR_KINDS else "unknown"
                error_lines.append(
                    json.dumps(
                        {
                            "line": line_no,
                            "workload": task.key,
                            "key": program_key(tj),
                            "kind": kind,
                            "msg": result.error_msg or "",
                        },
                        ensure_ascii=False,
                    )
                )
            record_lines.append(tvm_json_dumps([widx, [tj, run_secs, target_json, info]]))
            numbers.append(line_no)
            if self._keys is not None:
                self._keys.setdefault(task.key, set()).add(program_key(tj))
        self._append(self.errors_path, error_lines)  # first: see the module doc
        self._append(self.record_path, record_lines)
        self.n_records = line_no
        return numbers

    def measured_keys(self) -> dict[str, set[str]]:
        """Program keys already recorded, per task key (for resuming a measurement)."""
        if self._keys is None:
            names = self._workload_keys
            keys: dict[str, set[str]] = {}
            for lineno, line in iter_json_lines(self.record_path, allow_torn_tail=False):
                try:
                    widx, trace = line[0], line[1][0]
                except (KeyError, IndexError, TypeError):
                    raise TclError(f"{self.record_path}:{lineno}: not a tuning record") from None
                key = workload_of(widx, names, self.record_path, lineno)
                keys.setdefault(key, set()).add(program_key(trace))
            self._keys = keys
        return self._keys
