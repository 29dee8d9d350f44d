"""Progress of a tuning run: per-task best latencies and the curve of the network's estimated
latency, saved after every batch, with interrupts deferred to the end of a batch.
"""

from __future__ import annotations

import contextlib
import json
import math
import signal
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from tcl.api import discovery
from tcl.measurement.machine_load import BUSY_CORES, OtherLoad
from tcl.records.stored_files import write_atomic

CURVE_FILE = "tune_curve.json"
PLOT_FILE = "tune_curve.png"


class Curve:
    """Per-task best latencies and the curve of the weighted estimate, saved after each batch."""

    def __init__(
        self,
        path: Path,
        method: str,
        tasks: Sequence[Any],
        previous: Mapping[str, Any] | None,
        best: Mapping[str, float],
        spent: int,
    ) -> None:
        self.path = path
        self.method = method
        self.keys = [t.key for t in tasks]
        self.weights = [float(t.weight) for t in tasks]
        self.names = [t.name for t in tasks]
        self.best = [best.get(k, math.inf) for k in self.keys]
        self.points: list[dict[str, Any]] = list((previous or {}).get("points", []))
        self.time_offset = float(self.points[-1]["seconds"]) if self.points else 0.0
        self.trials = spent
        self.started = time.perf_counter()
        self.rounds = len(self.points)

    def estimate(self) -> float | None:
        if not all(math.isfinite(b) for b in self.best):
            return None
        return float(sum(w * b for w, b in zip(self.weights, self.best)))

    def seconds(self) -> float:
        return self.time_offset + time.perf_counter() - self.started

    def add_batch(
        self, task_id: int, run_secs: Sequence[Sequence[float] | None], other_cores: float | None = None
    ) -> dict[str, Any]:
        for secs in run_secs:
            if secs and all(0 < s < 1e9 for s in secs):  # fastest repeat, as Program.latency
                self.best[task_id] = min(self.best[task_id], float(np.min(secs)))
        self.trials += len(run_secs)
        self.rounds += 1
        point = {
            "round": self.rounds,
            "trials": self.trials,
            "seconds": round(self.seconds(), 3),
            "task": self.names[task_id],
            "task_best_s": finite_or_none(self.best[task_id]),
            "estimate_s": self.estimate(),
        }
        if other_cores is not None:  # measured while other processes took that many cores
            point["other_cores"] = round(other_cores, 2)
        self.points.append(point)
        self.save()
        return point

    def as_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "points": self.points,
            "tasks": [
                {"key": k, "name": n, "weight": w, "best_s": finite_or_none(b)}
                for k, n, w, b in zip(self.keys, self.names, self.weights, self.best)
            ],
        }

    def save(self) -> None:
        write_atomic(self.path, json.dumps(self.as_dict(), indent=1) + "\n")


@contextlib.contextmanager
def deferred_interrupt(report: Callable[[str], None]) -> Iterator[threading.Event]:
    """The first Ctrl-C only sets a flag: the batch being measured is then dropped (its
    workers may have been killed by the same signal, which would record false failures) and
    tuning stops before MetaSchedule commits it. A second Ctrl-C stops at once."""
    flag = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handler(*_: Any) -> None:
        if flag.is_set():
            raise KeyboardInterrupt
        flag.set()
        report("interrupted: stopping before the next batch is recorded (Ctrl-C again to stop now)")

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)


def finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def progress_callback(
    curve: Curve, network: str, report: Callable[[str], None], interrupted: threading.Event, load: OtherLoad | None
) -> Any:
    """A MetaSchedule measure callback feeding :class:`Curve` and the ``tcl_on_tuning_round_end``
    hook. It runs before MetaSchedule's own callbacks, so raising here on Ctrl-C keeps the
    interrupted batch out of the database. With ``load`` each round says when other
    processes took the CPU meanwhile (its timings, and the tuning time, are then suspect)."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

    hook = discovery.registry().hook

    @derived_object
    class Progress(PyMeasureCallback):
        def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
            if interrupted.is_set():
                raise KeyboardInterrupt
            secs = [
                None if r.error_msg is not None or not r.run_secs else [float(s) for s in r.run_secs]
                for r in runner_results
            ]
            busy = (load.sample() if load is not None else None) or 0.0  # None: too soon to judge
            point = curve.add_batch(int(task_id), secs, busy if busy >= BUSY_CORES else None)
            failed = sum(s is None for s in secs)
            est = point["estimate_s"]
            best = point["task_best_s"]
            report(
                f"round {point['round']}: {point['trials']} trials, {point['seconds']:.0f}s, task "
                f"{point['task']} best "
                + (f"{best * 1e3:.4f} ms" if best is not None else "none")
                + f" ({failed} failed), estimate "
                + (f"{est * 1e3:.4f} ms" if est is not None else "pending (tasks not yet measured)")
                + (f"; warning: other processes used {busy:.1f} cores" if busy >= BUSY_CORES else "")
            )
            if est is not None:
                hook.tcl_on_tuning_round_end(
                    network=network, round_index=point["round"], trials=point["trials"], best_latency_s=est
                )

    return Progress()


def plot_curves(results: Mapping[str, Mapping[str, Any]], path: Path, *, title: str) -> None:
    """Best estimated latency vs trials and vs seconds, one line per method (headless PNG)."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for label, result in results.items():
        points = [p for p in result["curve"]["points"] if p.get("estimate_s") is not None]
        ms_values = [p["estimate_s"] * 1e3 for p in points]
        axes[0].step([p["trials"] for p in points], ms_values, where="post", label=label, marker=".")
        axes[1].step([p["seconds"] for p in points], ms_values, where="post", label=label, marker=".")
    for ax, xlabel in zip(axes, ("measured trials", "tuning time (s)")):
        ax.set_xlabel(xlabel)
        ax.set_ylabel("estimated latency (ms): sum of weight x task best")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(buffer.getvalue())
    tmp.replace(path)


def model_seconds(stats: Mapping[str, Any] | None) -> float | None:
    """Seconds the cost model's predict and update took (None: nothing was tuned in this run)."""
    return None if stats is None else stats["predict_s"] + stats["update_s"]
