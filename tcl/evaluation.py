"""Evaluating a cost model on records, and loading checkpoints through the plugin registry
(the core reads only the model name from ``config.json``; the plugin reads the rest)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from tcl import discovery
from tcl.database import RECORD_FILE, find_databases, iter_json_lines, read_manifest, stored_file
from tcl.errors import TclError
from tcl.interfaces import CostModel
from tcl.metrics import evaluate, top_k_score
from tcl.programs import ProgramSet

CONFIG_FILE = "config.json"


def checkpoint_config(path: Path) -> dict[str, Any]:
    config_path = Path(path) / CONFIG_FILE
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TclError(f"{path}: not a checkpoint (no {CONFIG_FILE})") from None
    except (OSError, ValueError) as exc:
        raise TclError(f"{config_path}: not valid JSON ({exc})") from None
    if not isinstance(config, dict) or not isinstance(config.get("model"), str):
        raise TclError(f"{config_path}: key 'model' missing; not a tcl checkpoint")
    return config


def require_checkpoint_dir(path: Path) -> None:
    """Refuse, before any training, an output path a checkpoint may not replace: a file, or a
    non-empty directory that is not a checkpoint (e.g. a record directory)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise TclError(f"{path}: is a file; choose a new checkpoint directory")
    if path.is_dir() and any(path.iterdir()) and not (path / CONFIG_FILE).exists():
        raise TclError(f"{path}: is a non-empty directory that is not a checkpoint; choose a new checkpoint directory")


def load_checkpoint(path: Path, **options: Any) -> CostModel:
    """The cost model saved at ``path``, by the plugin registered under its model name."""
    name = checkpoint_config(path)["model"]
    record = discovery.registry().get("cost_models", name)
    return record.factory.load(Path(path), **options)


def score_records(model: CostModel, records: ProgramSet, *, per_task: bool = False) -> dict[str, Any]:
    """Top-1/Top-5 (pooled over tasks, TLP style, and averaged per network, TenSet style),
    pairwise accuracy, and task/program counts. Failed programs count as infinitely slow.
    ``per_task`` adds each task's own Top-1 (best / latency of the pick): the pooled score
    divides by the sum of picked latencies, so one very slow pick can hide the rest."""
    latencies, scores, weights, networks, names = {}, {}, {}, {}, {}
    for task, programs in records:
        if len(programs) < 2 or not any(p.ok for p in programs):
            continue
        latencies[task.key] = np.array([p.latency for p in programs])
        scores[task.key] = np.asarray(model.predict(task, programs), dtype=np.float64)
        weights[task.key] = task.weight
        networks[task.key] = list(task.networks) or ["(unknown)"]
        names[task.key] = task.name
    if not latencies:
        raise TclError("no task with two or more programs and a successful measurement to evaluate on")
    result = evaluate(latencies, scores, ks=(1, 5), weights=weights, networks=networks)
    result.update(tasks=len(latencies), programs=int(sum(len(v) for v in latencies.values())))
    if per_task:
        result["per_task"] = [{"task": names[k], "weight": weights[k], "programs": len(latencies[k]),
                               "top1": top_k_score({k: latencies[k]}, {k: scores[k]}, 1)} for k in latencies]
    return result


def record_targets(path: Path, profile: str | None = None) -> list[dict[str, Any]]:
    """The target configs (as stored in records) of each database under ``path`` (only
    ``profile``'s, if given), read from its first record."""
    found = []
    for db in find_databases(path):
        if profile is not None and (read_manifest(db) or {}).get("profile") != profile:
            continue
        record_file = db / RECORD_FILE
        if stored_file(record_file) is None:
            continue
        for _, line in iter_json_lines(record_file):
            target = line[1][2] if isinstance(line, list) and len(line) == 2 else None
            if isinstance(target, Mapping):
                found.append(dict(target))
            break
    return found


def record_cpus(path: Path, profile: str | None = None) -> set[str]:
    """The ``mcpu`` values records under ``path`` were measured for, to warn when a model
    meets records of another machine."""
    return {str(t.get("mcpu", t.get("kind", "?"))) for t in record_targets(path, profile)}
