"""The line files records and pools live in: written atomically, a torn last line (an
interrupted writer) repaired, and read the same whether plain or gzip-packed (``.gz``).
"""

from __future__ import annotations

import contextlib
import errno
import gc
import gzip
import json
import logging
import os
import tempfile
import zlib
from pathlib import Path
from typing import Any, BinaryIO, Iterator

from tcl.api.errors import TclError
from tcl.records.staging import fsync_dir

log = logging.getLogger(__name__)


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


def count_lines(path: Path) -> int:
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


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cycle collector paused while many JSON lines are read. Parsed lines are
    millions of small lists that hold no cycles, yet each batch of new containers sets off a
    collection that walks them all: reading data/bundled's 8,000 records took 4.6x as long
    with the collector on (benchmarks/bench_load_records.py)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


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
