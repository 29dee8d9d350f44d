"""A disk cache of featurizer output, one ``.npz`` file per (featurizer, task, program list).

:func:`cached_features` returns ``{task_key: features}`` for a :class:`~tcl.api.programs.ProgramSet`,
computing only what is not cached. A file is keyed by a fingerprint (sha256) of

* the featurizer's ``name`` and ``version`` (bump ``version`` when features change: old
  files are then simply never read again),
* its ``cache_token`` attribute when it has one (options that change the output, e.g.
  trace-seq's length, per-store's cpu/gpu target); featurizers without one give ``""``,
* the task key, and the list of :func:`tcl.records.program_keys.program_key` of the task's programs, in
  order (the same programs in another order are another entry).

Layout: ``<cache_dir>/<featurizer name>/<fingerprint[:2]>/<fingerprint>.npz``. Default
``cache_dir``: ``$TCL_CACHE_DIR/features`` when ``TCL_CACHE_DIR`` is set, else
``$XDG_CACHE_HOME/tcl/features``, else ``~/.cache/tcl/features`` (:func:`default_cache_dir`).

File contents (``np.savez_compressed``: features are mostly padding and repeats, trace-seq's
shrink about 80x and per-store's 8x, for a few hundredths of a millisecond per program):

* ``meta``: JSON text ``{"format": "tcl-features", "format_version": 1, "featurizer",
  "version", "cache_token", "task", "n_programs", "kind"}``;
* ``kind == "dense"`` (one array for the task, first axis = programs): ``features``;
* ``kind == "ragged"`` (a list of arrays, one per program, e.g. per-store's
  ``(n_stores, 164)``): ``data`` = the arrays concatenated on axis 0, ``offsets`` (int64,
  ``n_programs + 1``): program ``i`` is ``data[offsets[i]:offsets[i+1]]``.

Files are written to a temporary name in the same directory and renamed, so readers never
see half a file; an unreadable or mismatching file counts as a miss and is rewritten.
Features of other shapes (dicts, ...) are computed but not cached.

Size cap: after a call that wrote files, the least recently used files are deleted until the
cache is within ``$TCL_CACHE_MAX_MB`` megabytes (default 1024; 0 turns the cap off). A hit
renews a file's modification time, which is what "recently used" means here. Several
processes may share a cache: a file evicted under another reader is only a miss.

Keys (:func:`tcl.records.program_keys.program_key`: canonical JSON + sha256 of each trace) cost about as much
as computing cheap features, so the cache pays off for expensive featurizers (per-store,
which replays traces); docs/design.md has the figures. Keys are memoized per
:class:`~tcl.api.programs.Program` object, so repeated calls on the same ProgramSet pay once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
import weakref
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from tcl.api.errors import TclError
from tcl.api.interfaces import Featurizer
from tcl.api.programs import Program, ProgramSet
from tcl.records.program_keys import program_key

log = logging.getLogger(__name__)

CACHE_ENV = "TCL_CACHE_DIR"
MAX_MB_ENV = "TCL_CACHE_MAX_MB"
DEFAULT_MAX_MB = 1024.0
_TMP_IN_USE_NS = 3600 * 10**9  # a temporary file younger than this may still be being written
FORMAT = "tcl-features"
FORMAT_VERSION = 1

_KEYS: "weakref.WeakKeyDictionary[Program, str]" = weakref.WeakKeyDictionary()


def default_cache_dir() -> Path:
    """``$TCL_CACHE_DIR/features``, else ``$XDG_CACHE_HOME/tcl/features``, else ``~/.cache/tcl/features``."""
    root = os.environ.get(CACHE_ENV)
    if root:
        return Path(root).expanduser() / "features"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "tcl" / "features"


def max_cache_bytes() -> int | None:
    """The size cap from ``$TCL_CACHE_MAX_MB`` (default 1024 MB); None when it is 0 (no cap)."""
    raw = os.environ.get(MAX_MB_ENV, "").strip()
    try:
        mb = float(raw) if raw else DEFAULT_MAX_MB
    except ValueError:
        raise TclError(f"{MAX_MB_ENV}={raw!r}: expected a number of megabytes (0: no cap)") from None
    if not mb >= 0 or mb == float("inf"):
        raise TclError(f"{MAX_MB_ENV}={raw!r}: expected a number of megabytes >= 0 (0: no cap)")
    return None if mb == 0 else int(mb * 1024 * 1024)


def cache_files(cache_dir: str | os.PathLike) -> list[Path]:
    """The entry files under ``cache_dir`` (``<featurizer>/<xx>/<fingerprint>.npz``) and
    temporary files left by interrupted writers; nothing else is ever counted or deleted."""
    root = Path(cache_dir).expanduser()
    if not root.is_dir():
        return []
    return [p for p in root.glob("*/*/*") if p.is_file() and (p.suffix == ".npz" or p.suffix == ".tmp")]


def cache_usage(cache_dir: str | os.PathLike) -> tuple[int, int]:
    """(number of files, bytes) in ``cache_dir``."""
    sizes = [_size(p) for p in cache_files(cache_dir)]
    return len(sizes), sum(sizes)


def evict(cache_dir: str | os.PathLike, max_bytes: int) -> int:
    """Delete the least recently used files until ``cache_dir`` holds at most ``max_bytes``;
    return how many were deleted."""
    entries = []
    recent = time.time_ns() - _TMP_IN_USE_NS
    for path in cache_files(cache_dir):
        try:
            st = path.stat()
        except FileNotFoundError:  # evicted or renamed by another process
            continue
        if path.suffix == ".tmp" and st.st_mtime_ns > recent:
            continue  # another process may be writing it
        entries.append((st.st_mtime_ns, st.st_size, path))
    total = sum(size for _, size, _ in entries)
    deleted = 0
    for _, size, path in sorted(entries, key=lambda e: (e[0], str(e[2]))):
        if total <= max_bytes:
            break
        if _remove(path):
            deleted += 1
        total -= size
    return deleted


def clear(cache_dir: str | os.PathLike) -> tuple[int, int]:
    """Delete every cache file in ``cache_dir`` (and the folders left empty); return (files, bytes)."""
    files = cache_files(cache_dir)
    sizes = [_size(p) for p in files]
    removed = sum(_remove(p) for p in files)
    root = Path(cache_dir).expanduser()
    for folder in sorted({p.parent for p in files} | {p.parent.parent for p in files}, key=lambda d: -len(d.parts)):
        if folder != root:
            try:
                folder.rmdir()
            except OSError:  # not empty: something that is not ours lives there
                pass
    return removed, sum(sizes)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _remove(path: Path) -> bool:
    try:
        path.unlink()
        return True
    except FileNotFoundError:
        return False


def program_keys(programs: Sequence[Program]) -> list[str]:
    """:func:`tcl.records.program_keys.program_key` of each program's trace (memoized per Program object)."""
    out = []
    for p in programs:
        try:
            k = _KEYS.get(p)
        except TypeError:  # not weak-referenceable
            k = None
        if k is None:
            k = program_key(p.trace)
            try:
                _KEYS[p] = k
            except TypeError:
                pass
        out.append(k)
    return out


def fingerprint(featurizer: Featurizer, task_key: str, keys: Sequence[str]) -> str:
    """The cache key of ``featurizer``'s output for programs ``keys`` of ``task_key``."""
    h = hashlib.sha256()
    head = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "featurizer": featurizer.name,
        "version": str(featurizer.version),
        "cache_token": str(featurizer.cache_token or ""),
        "task": task_key,
        "n": len(keys),
    }
    h.update(json.dumps(head, sort_keys=True).encode())
    for k in keys:
        h.update(b"\n")
        h.update(k.encode())
    return h.hexdigest()


def _entry_path(cache_dir: Path, featurizer: Featurizer, fp: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in featurizer.name) or "featurizer"
    return cache_dir / safe / fp[:2] / f"{fp}.npz"


def _meta(featurizer: Featurizer, task_key: str, n: int, kind: str) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "featurizer": featurizer.name,
        "version": str(featurizer.version),
        "cache_token": str(featurizer.cache_token or ""),
        "task": task_key,
        "n_programs": n,
        "kind": kind,
    }


def _pack(features: Any, n: int) -> tuple[str, dict[str, np.ndarray]] | None:
    """Arrays to store for ``features`` of ``n`` programs, or None when not cacheable."""
    if isinstance(features, np.ndarray):
        if features.ndim >= 1 and features.shape[0] == n and features.dtype != object:
            return "dense", {"features": features}
        return None
    if (
        isinstance(features, (list, tuple))
        and len(features) == n
        and all(isinstance(a, np.ndarray) and a.dtype != object for a in features)
    ):
        if n == 0:
            return "ragged", {"data": np.zeros((0,), dtype=np.float32), "offsets": np.zeros(1, dtype=np.int64)}
        tails = {a.shape[1:] for a in features}
        dtypes = {a.dtype for a in features}
        if len(tails) != 1 or len(dtypes) != 1 or any(a.ndim == 0 for a in features):
            return None
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum([a.shape[0] for a in features], out=offsets[1:])
        return "ragged", {"data": np.concatenate(features, axis=0), "offsets": offsets}
    return None


def _unpack(z: Any, kind: str, n: int) -> Any:
    if kind == "dense":
        arr = z["features"]
        if arr.shape[0] != n:
            raise ValueError("wrong number of programs")
        return arr
    if kind == "ragged":
        data, offsets = z["data"], z["offsets"]
        if offsets.shape != (n + 1,) or offsets[0] != 0 or offsets[-1] != data.shape[0]:
            raise ValueError("bad offsets")
        return [data[offsets[i] : offsets[i + 1]] for i in range(n)]
    raise ValueError(f"unknown kind {kind!r}")


def _read(path: Path, expect: dict[str, Any]) -> Any:
    """Cached features at ``path``, or None (missing, unreadable, or not what we expect)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            if any(
                meta.get(k) != expect[k]
                for k in ("format", "format_version", "featurizer", "version", "cache_token", "task", "n_programs")
            ):
                log.warning("feature cache: %s does not match its key; recomputing", path)
                return None
            return _unpack(z, meta.get("kind"), expect["n_programs"])
    except FileNotFoundError:
        return None
    except Exception as exc:  # corrupt zip, missing member, bad JSON...
        log.warning("feature cache: cannot read %s (%s); recomputing", path, exc)
        return None


def _write(path: Path, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem[:16]}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez_compressed(fh, meta=np.array(json.dumps(meta, sort_keys=True)), **arrays)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def cached_features(
    featurizer: Featurizer,
    records: ProgramSet,
    cache_dir: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """``{task_key: featurizer.featurize(task, programs)}`` for every task of ``records``,
    read from ``cache_dir`` (default :func:`default_cache_dir`) where a file with the same
    fingerprint exists, computed and written otherwise. Failing to write (read-only or full
    disk) is logged and the computed features are still returned. After writing, the cache
    is cut back to its size cap (module doc)."""
    root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    cap = max_cache_bytes()
    wrote = False
    out: dict[str, Any] = {}
    for task, programs in records:
        keys = program_keys(programs)
        fp = fingerprint(featurizer, task.key, keys)
        path = _entry_path(root, featurizer, fp)
        expect = _meta(featurizer, task.key, len(programs), "")
        features = _read(path, expect)
        if features is not None:
            _touch(path)
        else:
            features = featurizer.featurize(task, programs)
            packed = _pack(features, len(programs))
            if packed is None:
                log.info(
                    "feature cache: %s output of type %s is not cacheable", featurizer.name, type(features).__name__
                )
            else:
                kind, arrays = packed
                try:
                    _write(path, _meta(featurizer, task.key, len(programs), kind), arrays)
                    wrote = True
                except OSError as exc:
                    log.warning("feature cache: cannot write %s (%s)", path, exc)
        out[task.key] = features
    if wrote and cap is not None:
        evicted = evict(root, cap)
        if evicted:
            log.info(
                "feature cache: evicted %d least recently used files to stay within %s=%g",
                evicted,
                MAX_MB_ENV,
                cap / 1024 / 1024,
            )
    return out


def _touch(path: Path) -> None:
    """Mark a hit as recently used (for eviction); a read-only cache stays usable."""
    try:
        os.utime(path)
    except OSError:
        pass
