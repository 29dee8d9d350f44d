"""Evaluating a cost model on records, and loading checkpoints through the plugin registry
(the core reads only the model name from ``config.json``; the plugin reads the rest)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping

import attrs
import numpy as np

from tcl.api import discovery
from tcl.api.errors import TclError
from tcl.api.interfaces import CostModel
from tcl.api.programs import ProgramSet
from tcl.learning.metric_intervals import bootstrap_intervals, chance_scores
from tcl.learning.metrics import best_and_pick, evaluate
from tcl.records.database import RECORD_FILE, find_databases
from tcl.records.manifest import read_manifest
from tcl.records.stored_files import iter_json_lines, stored_file

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
    """The cost model saved at ``path``, by the plugin registered under its model name;
    ``options`` are runtime hints (threads, verbose, ...) the plugin's ``load`` may decline."""
    name = checkpoint_config(path)["model"]
    record = discovery.registry().get("cost_models", name)
    load = record.factory.load
    return load(Path(path), **discovery.declared_hints(load, options))


@attrs.define
class Predictions:
    """A model's scores of the programs of every task that can be scored (two or more
    programs, one of them measured), with what the metrics need; keyed by task key."""

    latencies: dict[str, np.ndarray] = attrs.Factory(dict)
    scores: dict[str, np.ndarray] = attrs.Factory(dict)
    weights: dict[str, float] = attrs.Factory(dict)
    networks: dict[str, list[str]] = attrs.Factory(dict)
    names: dict[str, str] = attrs.Factory(dict)

    def update(self, other: "Predictions") -> None:
        """Add ``other``'s tasks (a task already here keeps its first prediction)."""
        for key in other.latencies:
            if key not in self.latencies:
                for field in ("latencies", "scores", "weights", "networks", "names"):
                    getattr(self, field)[key] = getattr(other, field)[key]


def predict_records(model: CostModel, records: ProgramSet) -> Predictions:
    out = Predictions()
    for task, programs in records:
        if len(programs) < 2 or not any(p.ok for p in programs):
            continue
        out.latencies[task.key] = np.array([p.latency for p in programs])
        out.scores[task.key] = np.asarray(model.predict(task, programs), dtype=np.float64)
        out.weights[task.key] = task.weight
        out.networks[task.key] = list(task.networks) or ["(unknown)"]
        out.names[task.key] = task.name
    return out


def score_records(
    model: CostModel, records: ProgramSet, *, per_task: bool = False, intervals: bool = False
) -> dict[str, Any]:
    """Top-1/Top-5 (pooled over tasks, TLP style, and averaged per network, TenSet style),
    pairwise accuracy, and task/program counts. Failed programs count as infinitely slow.
    ``per_task`` adds each task's own Top-1 (best / latency of the pick), its best latency
    and its share of the pooled Top-1's shortfall, largest share first: the pooled score
    divides by the sum of picked latencies, so a few slow tasks can decide it.
    ``intervals`` adds ``interval`` (95% bootstrap over tasks) and ``chance`` (the expected
    score of a random ranking) per metric."""
    p = predict_records(model, records)
    latencies, scores, weights, networks, names = p.latencies, p.scores, p.weights, p.networks, p.names
    if not latencies:
        raise TclError("no task with two or more programs and a successful measurement to evaluate on")
    result = evaluate(latencies, scores, ks=(1, 5), weights=weights, networks=networks)
    if intervals:
        result["interval"] = bootstrap_intervals(latencies, scores, weights=weights, networks=networks)
        result["chance"] = chance_scores(latencies, weights=weights, networks=networks)
    result.update(tasks=len(latencies), programs=int(sum(len(v) for v in latencies.values())))
    if per_task:
        result["per_task"] = _per_task(latencies, scores, weights, names)
    return result


def _per_task(latencies: Mapping, scores: Mapping, weights: Mapping, names: Mapping) -> list[dict[str, Any]]:
    """Per task: Top-1, best latency, and share of the pooled Top-1's shortfall (weight x
    (picked - best latency) over the sum of them; a failed pick is all of it), largest first."""
    terms = {k: best_and_pick(latencies[k], scores[k]) for k in latencies}
    gaps = {k: (1.0 if weights[k] is None else weights[k]) * (t[1] - t[0]) if t else 0.0 for k, t in terms.items()}
    failed = [k for k, gap in gaps.items() if math.isinf(gap)]
    total = sum(gaps.values())

    def share(k: str) -> float:
        if failed:
            return 1.0 / len(failed) if k in failed else 0.0
        return gaps[k] / total if total > 0 else 0.0

    rows = [
        {
            "task": names[k],
            "weight": weights[k],
            "programs": len(latencies[k]),
            "best_ms": terms[k][0] * 1e3 if terms[k] else None,
            "top1": terms[k][0] / terms[k][1] if terms[k] else None,
            "shortfall_share": share(k),
        }
        for k in latencies
    ]
    return sorted(rows, key=lambda r: -r["shortfall_share"])


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
