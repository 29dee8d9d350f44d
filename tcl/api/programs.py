"""The program records every stage passes along: tasks, programs and sets of them.

A program is a schedule trace of a task, stored exactly as TVM's JSONDatabase stores it
(``[insts, decisions]``), with its measured run times or its error. A TenSet import keeps
its auto_scheduler steps in the same field with ``source="tenset"``.
"""

from __future__ import annotations

import base64
import math
import struct
from typing import Any, Iterator, Mapping, Sequence

import attrs
import numpy as np

from tcl.api.errors import TclError


@attrs.frozen(kw_only=True)
class Task:
    """A tuning task: one workload (TIR PrimFunc) and how often it occurs in its networks."""

    key: str  # structural hash of the workload, as in database_workload.json
    name: str
    weight: float = 1.0
    networks: tuple[str, ...] = ()
    mod_b64: str | None = None  # base64 IR JSON of the workload; None for TenSet imports

    def module(self) -> Any:
        """The workload IRModule (parsed on each call; callers cache)."""
        if self.mod_b64 is None:
            raise ValueError(f"task {self.name} has no TVM workload (imported records)")
        return workload_module(self.mod_b64)


@attrs.frozen(kw_only=True, eq=False)
class Program:
    """One candidate schedule of a task, measured or not.

    ``schedule`` optionally carries the live ``tvm.s_tir.Schedule`` so featurizers need not
    replay the trace (the tuning bridge passes it; records read from disk do not have it).
    """

    task_key: str
    trace: Any  # [insts, decisions] JSON (source "metaschedule") or steps (source "tenset")
    run_secs: tuple[float, ...] | None = None
    error: str | None = None
    source: str = "metaschedule"
    schedule: Any = None
    location: str | None = None  # "file:line" of the record it was read from, for error messages

    @property
    def latency(self) -> float:
        """Measured seconds, the fastest of the repeats; ``inf`` for a failed or unmeasured program.

        The minimum, not the mean: other work on the machine only ever adds time, and on a
        busy machine one interrupted repeat can make a multi-threaded kernel look tens
        of times slower (docs/measurement.md, "Noise"). With one repeat both are the same.
        """
        if self.error is not None or not self.run_secs:
            return math.inf
        value = float(np.min(self.run_secs))
        return value if math.isfinite(value) and value > 0 else math.inf

    @property
    def ok(self) -> bool:
        return math.isfinite(self.latency)


@attrs.define
class ProgramSet:
    """Programs grouped by task, with the tasks they belong to.

    Labels follow TenSet/TLP: ``label = min latency of the task / latency`` in (0, 1];
    failed programs get label 0 and are excluded from training by :meth:`measured`.
    """

    tasks: dict[str, Task] = attrs.field(factory=dict)
    programs: dict[str, list[Program]] = attrs.field(factory=dict)
    profile: str | None = None

    def add(self, task: Task, programs: Sequence[Program]) -> None:
        self.tasks.setdefault(task.key, task)
        self.programs.setdefault(task.key, []).extend(programs)

    def __iter__(self) -> Iterator[tuple[Task, list[Program]]]:
        for key, task in self.tasks.items():
            yield task, self.programs.get(key, [])

    def __len__(self) -> int:
        return sum(len(p) for p in self.programs.values())

    def labels(self, task_key: str) -> np.ndarray:
        lat = np.array([p.latency for p in self.programs.get(task_key, [])], dtype=np.float64)
        if lat.size == 0 or not np.isfinite(lat).any():
            return np.zeros_like(lat)
        best = lat[np.isfinite(lat)].min()
        return np.where(np.isfinite(lat), best / lat, 0.0)

    def measured(self) -> "ProgramSet":
        """Only successfully measured programs, and only tasks with at least one."""
        out = ProgramSet(profile=self.profile)
        for task, progs in self:
            ok = [p for p in progs if p.ok]
            if ok:
                out.add(task, ok)
        return out

    def subset(
        self, task_keys: Sequence[str] | None = None, indices: Mapping[str, Sequence[int]] | None = None
    ) -> "ProgramSet":
        """Tasks restricted to ``task_keys`` and/or programs to ``indices`` per task."""
        out = ProgramSet(profile=self.profile)
        keys = list(self.tasks) if task_keys is None else list(task_keys)
        for key in keys:
            progs = self.programs.get(key, [])
            if indices is not None:
                progs = [progs[i] for i in indices.get(key, ())]
            out.add(self.tasks[key], progs)
        return out


@attrs.frozen(kw_only=True)
class MeasureResult:
    """The outcome of measuring one candidate. ``error_kind`` is one of
    ``build``, ``run``, ``timeout`` when it failed, else ``None``."""

    run_secs: tuple[float, ...] | None
    error_kind: str | None = None
    error_msg: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_kind is None and bool(self.run_secs)


def workload_ir_json(mod_b64: str) -> str:
    """The IR JSON text inside a workload line's base64 string.

    TVM writes it through ``dmlc::Stream::Write(std::string)``: a little-endian uint64 length,
    then the text (so a plain ``b64decode(...).decode()`` fails on the length bytes).
    """
    try:
        raw = base64.b64decode(mod_b64)
    except (ValueError, TypeError) as exc:
        raise TclError(f"workload is not base64 ({exc})") from None
    # The length prefix is checked first: its low byte can itself be "{" or "[" (a length of
    # 0x1055b starts with "[").
    if len(raw) >= 8:
        (n,) = struct.unpack("<Q", raw[:8])
        if n == len(raw) - 8:
            return raw[8:].decode("utf-8")
    if raw[:1] in (b"{", b"["):
        return raw.decode("utf-8")
    raise TclError("workload is not TVM's base64 IR JSON")


def workload_module(mod_b64: str) -> Any:
    """The workload IRModule of a base64 workload string (needs TVM)."""
    import tvm

    return tvm.ir.load_json(workload_ir_json(mod_b64))
