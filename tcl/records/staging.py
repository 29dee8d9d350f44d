"""Result directories that appear whole or not at all.

A command that writes a new directory of results (``tcl sample``, ``tcl dataset
import-tenset``, ``tcl dataset pack``) builds it under ``<name>.partial`` next to it and
renames it into place when done: a run killed at any moment leaves no directory that looks
complete, and its ``.partial`` leftover is removed by the next run and skipped by readers.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Iterator

from tcl.api.errors import TclError

STAGING_SUFFIX = ".partial"


def is_staging(path: str | os.PathLike) -> bool:
    """Whether ``path`` is an unfinished result directory (readers skip it)."""
    return Path(path).name.endswith(STAGING_SUFFIX)


def require_new_directory(dst: Path, what: str) -> None:
    """Refuse a ``dst`` that is a file or a directory with something in it."""
    if dst.exists() and not dst.is_dir():
        raise TclError(f"{dst} is a file; choose a new directory for the {what}")
    if dst.is_dir() and any(dst.iterdir()):
        raise TclError(f"{dst} is not empty; choose a new directory for the {what}")


@contextlib.contextmanager
def staged_directory(dst: str | os.PathLike, what: str) -> Iterator[Path]:
    """Yield an empty staging directory; on normal exit it becomes ``dst`` (which must be
    new or empty), on an exception it is removed. ``what`` names the contents in errors."""
    dst = Path(dst)
    require_new_directory(dst, what)
    staging = dst.with_name(dst.name + STAGING_SUFFIX)
    shutil.rmtree(staging, ignore_errors=True)  # left by an interrupted run
    staging.mkdir(parents=True)
    try:
        yield staging
        require_new_directory(dst, what)  # something else may have written there meanwhile
        if dst.exists():
            dst.rmdir()
        os.replace(staging, dst)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    fsync_dir(dst.parent)


def fsync_dir(path: Path) -> None:
    """Make a rename or a new file in ``path`` durable (best effort)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
