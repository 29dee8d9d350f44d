"""The manifest beside a database (``tcl_manifest.json``): tasks, network, profile, machine and
counts; our metadata never goes inside TVM's files.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any, Iterable, Mapping

from tcl.api.errors import TclError
from tcl.api.programs import Task
from tcl.records.stored_files import write_atomic

MANIFEST_FILE = "tcl_manifest.json"
MANIFEST_FORMAT = "tcl-manifest"
MANIFEST_VERSION = 1


def cpuinfo_value(*keys: str) -> str | None:
    """The value of the first ``/proc/cpuinfo`` line whose key starts with one of ``keys``
    (lower case); None where there is no such line or no such file."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith(keys):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_model() -> str:
    """The host CPU's model name (``/proc/cpuinfo``), else what ``platform`` says."""
    return (
        cpuinfo_value("model name", "hardware", "cpu model") or platform.processor() or platform.machine() or "unknown"
    )


def tvm_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("apache-tvm")
    except metadata.PackageNotFoundError:
        return None


def source_revision() -> str:
    """The git commit of the tcl sources when they are a checkout (with ``+dirty`` for local
    changes), else the installed version: what a record's provenance can name."""
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        from importlib import metadata

        try:
            return f"tcl {metadata.version('tcl')}"
        except metadata.PackageNotFoundError:
            return "unknown"
    return head + ("+dirty" if dirty else "")


def timestamp() -> str:
    """Local time with its UTC offset, the form every file we write records times in."""
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
    now = timestamp()
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


def add_run(work_dir: str | os.PathLike, run: Mapping[str, Any]) -> None:
    """Append one collection run's provenance (commit, CPU, settings, load seen) to the
    manifest's ``runs`` list, so every shard says how and where each part was measured."""
    manifest = read_manifest(work_dir) or make_manifest()
    manifest["runs"] = [*manifest.get("runs", []), dict(run)]
    manifest["updated"] = timestamp()
    write_manifest(work_dir, manifest)


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
        manifest["updated"] = timestamp()
        write_manifest(work_dir, manifest)
    return manifest
