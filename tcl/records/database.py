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
A damaged ``.gz`` file is an error naming it.
"""

from __future__ import annotations

import errno
import fcntl
import gzip
import json
import logging
import math
import os
import platform
import shutil
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Iterator, Mapping, Sequence

from tcl.api.errors import TclError
from tcl.api.programs import MeasureResult, Program, ProgramSet, Task, workload_ir_json, workload_module
from tcl.records.program_keys import program_key
from tcl.records.staging import fsync_dir, is_staging, staged_directory
from tcl.records.trace_json import plain_json, trace_to_json

log = logging.getLogger(__name__)

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"
ERRORS_FILE = "tcl_errors.json"
MANIFEST_FILE = "tcl_manifest.json"
LOCK_FILE = ".tcl_writer.lock"
TENSET_WORKLOAD_FILE = "tenset_workload.json"
TENSET_RECORD_FILE = "tenset_tuning_record.json"
# the big JSON-lines files that `tcl dataset pack` compresses (pool files are named in tcl.records.pools)
PACKABLE_FILES = frozenset(
    {WORKLOAD_FILE, RECORD_FILE, TENSET_WORKLOAD_FILE, TENSET_RECORD_FILE, "workloads.json", "candidates.json"}
)

#: What MetaSchedule stores as run_secs of a candidate that failed to build or run.
FAILED_RUN_SECS = 1e10
MANIFEST_FORMAT = "tcl-manifest"
MANIFEST_VERSION = 1
ERROR_KINDS = ("build", "run", "timeout", "unknown")
#: The error kind of a stored record whose run_secs is no measurement (NaN, negative, not numbers, ...).
INVALID_KIND = "invalid"


# ---- TVM's JSON dialect --------------------------------------------------------------------


def _escape(text: str) -> str:
    out = []
    for ch in text:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\n":
            out.append("\\n")
        elif o < 0x20 or o == 0x7F:
            # TVM would write \xHH, which neither TVM's parser nor Python's can read back.
            raise ValueError(f"cannot store control character {ch!r} in a TVM JSON string")
        else:
            out.append(ch)  # non-ASCII stays raw UTF-8 (TVM writes \xHH, unreadable; both read raw)
    return '"' + "".join(out) + '"'


def tvm_json_dumps(obj: Any) -> str:
    """``obj`` as TVM's MetaSchedule ``JSONDumps`` writes it (database_utils.cc).

    No spaces; ints as ints; booleans as ``1``/``0`` (what TVM writes for trace attributes);
    floats as C++ ``setprecision(20)`` (= ``%.20g``); dict keys sorted; strings escaped like
    TVM's ``StrEscape``. Non-finite floats are refused (TVM cannot read them back).
    """
    parts: list[str] = []
    _dump(obj, parts)
    return "".join(parts)


def _dump(obj: Any, out: list[str]) -> None:
    if obj is None:
        out.append("null")
    elif isinstance(obj, bool):
        out.append("1" if obj else "0")
    elif isinstance(obj, int):
        out.append(str(int(obj)))
    elif isinstance(obj, float):
        if not math.isfinite(obj):
            raise ValueError(f"cannot store non-finite number {obj} in a TVM JSON file")
        out.append("%.20g" % obj)
    elif isinstance(obj, str):
        out.append(_escape(obj))
    elif isinstance(obj, Mapping):
        out.append("{")
        for i, key in enumerate(sorted(obj, key=str)):
            if i:
                out.append(",")
            out.append(_escape(str(key)))
            out.append(":")
            _dump(obj[key], out)
        out.append("}")
    elif isinstance(obj, (list, tuple)):
        out.append("[")
        for i, x in enumerate(obj):
            if i:
                out.append(",")
            _dump(x, out)
        out.append("]")
    else:
        _dump(plain_json(obj), out)


# ---- workloads -----------------------------------------------------------------------------


def workload_name(mod_b64: str, key: str = "") -> str:
    """A task name from the workload's IR JSON, without TVM: the PrimFunc's ``global_symbol``
    (else its GlobalVar name); ``main`` (what tune_tir and extract_tasks leave) becomes
    ``main_<first 8 digits of the key>`` so tasks stay distinguishable."""
    name = None
    try:
        graph = json.loads(workload_ir_json(mod_b64))
        name = _name_from_graph(graph)
    except (TclError, ValueError, KeyError, IndexError, TypeError):
        pass
    if not name:
        return f"task_{key[:8]}" if key else "task"
    if name == "main" and key:
        return f"main_{key[:8]}"
    return name


def _name_from_graph(graph: Mapping[str, Any]) -> str | None:
    nodes = graph["nodes"]

    def string(i: Any) -> str | None:
        if isinstance(i, int) and 0 <= i < len(nodes) and nodes[i].get("type") == "ffi.String":
            return nodes[i].get("data")
        return None

    root = nodes[graph["root_index"]]
    gvar_name = None
    funcs = nodes[root["data"]["functions"]]["data"]  # Map: [k0, v0, k1, v1, ...]
    for gv_idx, fn_idx in zip(funcs[::2], funcs[1::2]):
        gv = nodes[gv_idx]
        if gvar_name is None and gv.get("type") == "ir.GlobalVar":
            gvar_name = string(gv["data"].get("name_hint"))
        fn = nodes[fn_idx]
        attrs_idx = fn.get("data", {}).get("attrs") if isinstance(fn.get("data"), dict) else None
        if attrs_idx is None:
            continue
        attrs = nodes[attrs_idx]
        dict_idx = attrs.get("data", {}).get("__dict__") if isinstance(attrs.get("data"), dict) else None
        if dict_idx is None:
            continue
        kv = nodes[dict_idx]["data"]
        for k, v in zip(kv[::2], kv[1::2]):
            if string(k) == "global_symbol" and string(v):
                return string(v)
    return gvar_name


# ---- files ---------------------------------------------------------------------------------


def write_atomic(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` through a synced temporary file and a rename."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def _is_complete_json_line(tail: bytes) -> bool:
    try:
        return isinstance(json.loads(tail.decode("utf-8")), (list, dict))
    except (UnicodeDecodeError, ValueError):
        return False


def repair_tail(path: str | os.PathLike) -> int:
    """Repair a line file whose writer was killed mid-line. Returns the bytes cut off.

    A last line without its newline is cut off, unless it is a complete JSON value (a record
    whose newline alone is missing), which gets its newline. Complete lines are never touched.
    """
    path = Path(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return 0
    if size == 0:
        return 0
    with open(path, "r+b") as fh:
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return 0
        # find the start of the last line, reading backwards in blocks
        pos, block = size, 1 << 16
        start = 0
        while pos > 0:
            step = min(block, pos)
            pos -= step
            fh.seek(pos)
            chunk = fh.read(step)
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                start = pos + nl + 1
                break
        fh.seek(start)
        tail = fh.read()
        if _is_complete_json_line(tail):
            fh.seek(size)
            fh.write(b"\n")
            cut = 0
            log.warning("%s: completed the last line (its newline was missing)", path)
        else:
            fh.truncate(start)
            cut = size - start
            log.warning("%s: cut off a torn last line (%d bytes; its writer was killed)", path, cut)
        fh.flush()
        os.fsync(fh.fileno())
    return cut


def _count_lines(path: Path) -> int:
    n = 0
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                n += chunk.count(b"\n")
    except FileNotFoundError:
        return 0
    return n


PACKED_SUFFIX = ".gz"


def stored_file(path: str | os.PathLike) -> Path | None:
    """``path`` itself, or its gzip-packed twin ``path.gz`` (how shipped datasets are kept
    small, see :func:`pack_dir`); None when neither exists."""
    path = Path(path)
    if path.exists():
        return path
    packed = path.with_name(path.name + PACKED_SUFFIX)
    return packed if packed.exists() else None


def open_stored(path: str | os.PathLike) -> BinaryIO:
    """Open ``path`` or its packed twin for binary reading; FileNotFoundError if neither."""
    found = stored_file(path)
    if found is None:
        raise FileNotFoundError(errno.ENOENT, "no such file", str(path))
    return gzip.open(found, "rb") if found.name.endswith(PACKED_SUFFIX) else open(found, "rb")


#: What reading a damaged ``.gz`` raises: not gzip / bad CRC, cut short, flipped bytes.
CORRUPT_GZIP = (gzip.BadGzipFile, EOFError, zlib.error)


def stored_lines(path: str | os.PathLike) -> Iterator[tuple[int, bytes]]:
    """``(line number, raw line)`` of ``path`` or its packed twin; FileNotFoundError if neither.

    The one place stored line files are read: a damaged gzip file or a failing read becomes a
    :class:`TclError` naming the file actually read, never a bare ``EOFError``/``zlib.error``.
    """
    found = stored_file(path)
    if found is None:
        raise FileNotFoundError(errno.ENOENT, "no such file", str(path))
    lineno = 0
    try:
        with open_stored(found) as fh:
            for lineno, raw in enumerate(fh, 1):
                yield lineno, raw
    except CORRUPT_GZIP as exc:
        raise TclError(
            f"{found}: damaged gzip file, unreadable after line {lineno} ({exc}); restore it from a good copy"
        ) from None
    except OSError as exc:
        raise TclError(f"cannot read {found}: {exc.strerror or exc}") from None


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


def iter_json_lines(path: str | os.PathLike, *, allow_torn_tail: bool = True) -> Iterator[tuple[int, Any]]:
    """``(line number, parsed JSON)`` of each non-blank line of ``path`` (or ``path.gz``).

    A corrupt line raises :class:`TclError` ``path:line: ...``; the last line is skipped
    instead when it has no newline (a writer killed or still writing) and ``allow_torn_tail``.
    """
    path = Path(path)
    if stored_file(path) is None:
        return
    loads = json.loads
    for lineno, raw in stored_lines(path):
        try:
            yield lineno, loads(raw)
        except ValueError as exc:
            if not raw.strip():
                continue
            if allow_torn_tail and not raw.endswith(b"\n"):
                log.warning("%s:%d: skipping a torn last line (writer killed or still writing)", path, lineno)
                return
            msg = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            raise TclError(f"{path}:{lineno}: corrupt line ({msg})") from None


# ---- the manifest --------------------------------------------------------------------------


def cpu_model() -> str:
    """The host CPU's model name (``/proc/cpuinfo``), else what ``platform`` says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def tvm_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("apache-tvm")
    except metadata.PackageNotFoundError:
        return None


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def _task_entry(task: Task) -> dict[str, Any]:
    return {"key": task.key, "name": task.name, "weight": task.weight, "networks": list(task.networks)}


def make_manifest(
    *,
    tasks: Iterable[Task] = (),
    networks: Mapping[str, Any] | None = None,
    profile: str | None = None,
    source: str = "metaschedule",
    **extra: Any,
) -> dict[str, Any]:
    """A new manifest (see :func:`write_manifest`) with provenance filled in."""
    now = _now()
    manifest = {
        "format": MANIFEST_FORMAT,
        "version": MANIFEST_VERSION,
        "source": source,
        "profile": profile,
        "tvm_version": tvm_version(),
        "cpu_model": cpu_model(),
        "created": now,
        "updated": now,
        "networks": dict(networks or {}),
        "tasks": [_task_entry(t) for t in tasks],
    }
    manifest.update(extra)
    return manifest


def write_manifest(work_dir: str | os.PathLike, manifest: Mapping[str, Any]) -> Path:
    """Write ``tcl_manifest.json`` atomically. Format::

    {"format": "tcl-manifest", "version": 1, "source": "metaschedule" | "tenset",
     "profile": name | null, "tvm_version": "0.27.0.post1", "cpu_model": "...",
     "created": ISO date, "updated": ISO date,
     "networks": {name: {...free-form...}},
     "tasks": [{"key": hash, "name": str, "weight": float, "networks": [names]}], ...}
    """
    path = Path(work_dir) / MANIFEST_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(dict(manifest), indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return path


def read_manifest(work_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The manifest of a record directory, or None when it has none."""
    path = Path(work_dir) / MANIFEST_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise TclError(f"cannot read {path}: {exc.strerror}") from None
    try:
        manifest = json.loads(text)
    except ValueError as exc:
        raise TclError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise TclError(f'{path}: not a tcl manifest (expected "format": "{MANIFEST_FORMAT}")')
    if manifest.get("version") != MANIFEST_VERSION:
        raise TclError(f"{path}: manifest version {manifest.get('version')!r}, this tcl reads {MANIFEST_VERSION}")
    tasks = manifest.get("tasks", [])
    if not isinstance(tasks, list) or not all(isinstance(t, dict) and isinstance(t.get("key"), str) for t in tasks):
        raise TclError(f'{path}: "tasks" must be a list of {{"key": ..., "name": ..., "weight": ...}}')
    for t in tasks:
        w = t.get("weight", 1.0)
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not w > 0:
            raise TclError(f"{path}: task {t['key']}: weight must be a positive number, got {w!r}")
    if not isinstance(manifest.get("networks", {}), dict):
        raise TclError(f'{path}: "networks" must be an object {{name: info}}')
    return manifest


def update_manifest(
    work_dir: str | os.PathLike,
    *,
    tasks: Iterable[Task] = (),
    networks: Mapping[str, Any] | None = None,
    profile: str | None = None,
    source: str | None = None,
    replace_tasks: bool = False,
    **extra: Any,
) -> dict[str, Any]:
    """Merge into the directory's manifest (creating it): tasks by key, networks by name.

    Existing task entries are kept as they are (a writer adding records never renames or
    re-weights a task); ``replace_tasks=True`` overwrites them with ``tasks``. A different
    ``profile`` than the one recorded is an error: one directory holds one platform's records.
    """
    current = read_manifest(work_dir)
    manifest = current if current is not None else make_manifest(profile=profile, source=source or "metaschedule")
    changed = current is None
    if profile is not None and manifest.get("profile") != profile:
        if manifest.get("profile") is not None:
            raise TclError(
                f"{Path(work_dir) / MANIFEST_FILE}: records of profile {manifest['profile']!r}; "
                f"refusing to add records of profile {profile!r} (use one directory per profile)"
            )
        manifest["profile"] = profile
        changed = True
    if source is not None and manifest.get("source") != source:
        manifest["source"] = source
        changed = True
    entries = {t["key"]: t for t in manifest.get("tasks", [])}
    for task in tasks:
        if task.key not in entries or replace_tasks:
            entries[task.key] = _task_entry(task)
            changed = True
    manifest["tasks"] = list(entries.values())
    if networks:
        manifest.setdefault("networks", {}).update(networks)
        changed = True
    for k, v in extra.items():
        if manifest.get(k) != v:
            manifest[k] = v
            changed = True
    if changed:
        manifest["updated"] = _now()
        write_manifest(work_dir, manifest)
    return manifest


# ---- writing -------------------------------------------------------------------------------


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
        self._lock = open(self.dir / LOCK_FILE, "a")
        try:
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            self._lock.close()
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise TclError(f"{self.dir}: another process is writing records here") from None
            raise
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
        self.n_records = _count_lines(self.record_path)
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
                key = _workload_of(widx, names, self.record_path, lineno)
                keys.setdefault(key, set()).add(program_key(trace))
            self._keys = keys
        return self._keys


# ---- reading -------------------------------------------------------------------------------


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


def _workload_of(widx: Any, workloads: Sequence[Any], rec_path: Path, lineno: int) -> Any:
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
        task = _workload_of(widx, workloads, rec_path, lineno)
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
        programs[task.key].append(Program(task_key=task.key, trace=trace, run_secs=secs, error=error, source=source))
    if invalid:
        log.warning(
            "%s: %d records hold no usable time and count as failed (%s), first at line %d: %s",
            rec_path,
            len(invalid),
            INVALID_KIND,
            *invalid[0],
        )


def load_records(path: str | os.PathLike, *, profile: str | None = None) -> ProgramSet:
    """All records under ``path`` as one :class:`ProgramSet` (see the module doc).

    Databases are read in sorted path order; tasks with the same key merge. With
    ``profile``, only directories whose manifest names that profile are read. Directories of
    different profiles in one call are refused: one ProgramSet is one platform.
    """
    dbs = find_databases(path)
    chosen: list[tuple[Path, dict[str, Any] | None]] = []
    profiles: dict[str, Path] = {}
    for db in dbs:
        manifest = read_manifest(db)
        p = (manifest or {}).get("profile")
        if profile is not None and p != profile:
            continue
        if p is not None:
            profiles.setdefault(p, db)
        chosen.append((db, manifest))
    if len(profiles) > 1:
        names = ", ".join(f"{p} ({d})" for p, d in profiles.items())
        raise TclError(
            f"{path} holds records of several profiles: {names}; choose one (--profile on the command line, profile= in Python)"
        )
    out = ProgramSet(profile=next(iter(profiles), profile))
    for db, manifest in chosen:
        _load_one(db, out, manifest)
    return out
