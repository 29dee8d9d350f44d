"""Do labels agree with themselves? The same programs measured twice, per-task Kendall tau.

Takes ``--programs`` programs of each of ``--tasks`` tasks from a record directory (spread
over the networks it holds, programs drawn at random with ``--seed``), measures all of them
once, then all of them again, with the chosen measuring path and settings, and prints one
JSON line: per-task Kendall tau between the two passes (median and worst), programs per
second, and the cores other processes used meanwhile (``other_cores_max``: above about 0.5
the figures are not an idle machine's, measure again).

    python benchmarks/bench_label_repeatability.py --data data/idle --profile x86-avx2
    python benchmarks/bench_label_repeatability.py --profile x86-avx2 --side metaschedule
    python benchmarks/bench_label_repeatability.py --profile x86-avx2 --min-repeat-ms 40 --repeat 5

``--side engine`` is the ``local`` backend's measuring engine (tcl.measurement.local_engine);
``--side metaschedule`` is MetaSchedule's builder and ``LocalRunner`` with the same settings.
``--min-repeat-ms``, ``--repeat`` and ``--number`` override the profile's ``[measure]``;
``--networks`` keeps only the tasks of some networks (e.g. the held-out test networks of
data/dataset).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import attrs
import numpy as np
from scipy.stats import kendalltau

from tcl.api.profiles import get_profile
from tcl.measurement.machine_load import OtherLoad
from tcl.records.database import load_records
from tcl.records.pools import trace_to_schedule


def log(msg: str) -> None:
    print(f"[repeatability] {msg}", file=sys.stderr, flush=True)


def pick(
    data: Path, profile: str, tasks: int, programs: int, seed: int, networks: set[str] | None = None
) -> list[tuple[object, list[object]]]:
    """``tasks`` tasks (round-robin over networks, in record order; only tasks of ``networks``
    when given) with ``programs`` measured programs each, drawn at random."""
    records = load_records(data, profile=profile)
    by_network: dict[str, list[tuple[object, list[object]]]] = {}
    for task, progs in records:
        ok = [p for p in progs if p.ok]
        if networks and not networks.intersection(task.networks):
            continue
        if len(ok) >= programs and task.mod_b64:
            by_network.setdefault(task.networks[0] if task.networks else "?", []).append((task, ok))
    rng = random.Random(seed)
    chosen: list[tuple[object, list[object]]] = []
    queues = [list(v) for _, v in sorted(by_network.items())]
    while len(chosen) < tasks and any(queues):
        for queue in queues:
            if queue and len(chosen) < tasks:
                task, ok = queue.pop(0)
                chosen.append((task, rng.sample(ok, programs)))
    return chosen


def measurer(side: str, profile):
    """A function (mod, schedules) -> list[MeasureResult] and a close function."""
    from tcl_plugins.backends.local import LocalBackend

    backend = LocalBackend(profile)
    if side == "engine":
        return backend.measure, backend.close
    from tcl.api.measure import measure_with

    return (
        lambda mod, schedules: measure_with(backend.builder(), backend.runner(), backend.target(), mod, schedules)
    ), backend.close


def measure_all(measure, chosen, batch: int) -> tuple[list[np.ndarray], float, float]:
    """Latency of every chosen program (inf for a failure), seconds taken, most other cores seen."""
    load = OtherLoad()
    worst = 0.0
    out = []
    start = time.perf_counter()
    for task, progs in chosen:
        mod = task.module()
        lat = []
        for lo in range(0, len(progs), batch):
            schedules = [trace_to_schedule(mod, p.trace) for p in progs[lo : lo + batch]]
            lat += [min(r.run_secs) if r.ok else np.inf for r in measure(mod, schedules)]
            worst = max(worst, load.sample() or 0.0)
        out.append(np.array(lat))
    return out, time.perf_counter() - start, worst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("data/idle"))
    ap.add_argument("--profile", default="x86-avx2")
    ap.add_argument("--side", choices=["engine", "metaschedule"], default="engine")
    ap.add_argument("--networks", help="comma-separated: only tasks of these networks")
    ap.add_argument("--tasks", type=int, default=10)
    ap.add_argument("--programs", type=int, default=48)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--number", type=int)
    ap.add_argument("--repeat", type=int)
    ap.add_argument("--min-repeat-ms", type=int)
    ap.add_argument(
        "--retime-spread",
        type=float,
        default=0.0,
        help="engine: time a candidate again when its repeats spread more than this fraction",
    )
    args = ap.parse_args()

    profile = get_profile(args.profile)
    changes = {
        k: v for k, v in (("number", args.number), ("repeat", args.repeat), ("min_repeat_ms", args.min_repeat_ms)) if v
    }
    profile = attrs.evolve(profile, measure=attrs.evolve(profile.measure, **changes))
    if args.retime_spread:
        profile = attrs.evolve(
            profile, backend_options={**profile.backend_options, "retime_spread": args.retime_spread}
        )
    networks = set(args.networks.split(",")) if args.networks else None
    chosen = pick(args.data, args.profile, args.tasks, args.programs, args.seed, networks)
    if not chosen:
        sys.exit(
            f"no task in {args.data} has {args.programs} measured programs"
            + (f" in {args.networks}" if networks else "")
        )
    total = sum(len(p) for _, p in chosen)
    log(f"{len(chosen)} tasks, {total} programs, side {args.side}, {attrs.asdict(profile.measure)}")
    measure, close = measurer(args.side, profile)
    try:
        measure(
            chosen[0][0].module(), [trace_to_schedule(chosen[0][0].module(), chosen[0][1][0].trace)]
        )  # start workers
        first, t1, load1 = measure_all(measure, chosen, args.batch)
        log(f"pass 1: {t1:.0f} s")
        second, t2, load2 = measure_all(measure, chosen, args.batch)
        log(f"pass 2: {t2:.0f} s")
    finally:
        close()
    taus = {}
    for (task, _), a, b in zip(chosen, first, second):
        both = np.isfinite(a) & np.isfinite(b)
        taus[task.name] = round(float(kendalltau(a[both], b[both]).statistic), 3)
    values = np.array(list(taus.values()))
    print(
        json.dumps(
            {
                "bench": "label_repeatability",
                "profile": args.profile,
                "side": args.side,
                "measure": {k: getattr(profile.measure, k) for k in ("number", "repeat", "min_repeat_ms")},
                "retime_spread": args.retime_spread,
                "tasks": len(chosen),
                "programs": total,
                "median_kendall_tau": round(float(np.median(values)), 3),
                "worst_kendall_tau": round(float(values.min()), 3),
                "worst_task": min(taus, key=taus.get),
                "programs_per_s": round(2 * total / (t1 + t2), 2),
                "other_cores_max": round(max(load1, load2), 2),
                "per_task": taus,
            }
        )
    )


if __name__ == "__main__":
    main()
