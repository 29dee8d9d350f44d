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
data/dataset); ``--min-ms`` only tasks whose recorded programs take at least that long (median).

``--vary number=3,1`` compares two settings side by side: four passes A, B, A, B (A, B: the
setting with each value; give ``--vary`` again to change several settings together; besides
the ``[measure]`` settings it takes the engine's ``single_run_ms``); it prints each setting's own repeatability (A vs A, B vs B), their
agreement (the mean tau of the four A-B pairs: as high as the repeatability when B ranks
programs as A does) and each setting's programs per second.

    python benchmarks/bench_label_repeatability.py --data data/dataset --min-ms 20 --vary number=3,1
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
    data: Path,
    profile: str,
    tasks: int,
    programs: int,
    seed: int,
    networks: set[str] | None = None,
    min_ms: float = 0.0,
) -> list[tuple[object, list[object]]]:
    """``tasks`` tasks (round-robin over networks, in record order; only tasks of ``networks``
    when given, and whose programs' median latency is at least ``min_ms``) with ``programs``
    measured programs each, drawn at random."""
    records = load_records(data, profile=profile)
    by_network: dict[str, list[tuple[object, list[object]]]] = {}
    for task, progs in records:
        ok = [p for p in progs if p.ok]
        if networks and not networks.intersection(task.networks):
            continue
        if min_ms and (not ok or np.median([p.latency for p in ok]) * 1e3 < min_ms):
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


MEASURE_KEYS = ("number", "repeat", "min_repeat_ms")
ENGINE_KEYS = ("single_run_ms",)  # the local backend's options


def with_measure(profile, **changes):
    """The profile with some ``[measure]`` settings (or engine options) changed."""
    options = {k: v for k, v in changes.items() if k in ENGINE_KEYS}
    measure = {k: v for k, v in changes.items() if k not in ENGINE_KEYS}
    profile = attrs.evolve(profile, backend_options={**profile.backend_options, **options})
    return attrs.evolve(profile, measure=attrs.evolve(profile.measure, **measure))


def taus_between(chosen, a: list[np.ndarray], b: list[np.ndarray]) -> dict[str, float]:
    """Per task, Kendall tau between two passes over the programs both timed."""
    taus = {}
    for (task, _), x, y in zip(chosen, a, b):
        both = np.isfinite(x) & np.isfinite(y)
        taus[task.name] = round(float(kendalltau(x[both], y[both]).statistic), 3)
    return taus


def summary(taus: dict[str, float]) -> dict[str, object]:
    values = np.array(list(taus.values()))
    return {
        "median_kendall_tau": round(float(np.median(values)), 3),
        "worst_kendall_tau": round(float(values.min()), 3),
        "worst_task": min(taus, key=taus.get),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("data/idle"))
    ap.add_argument("--profile", default="x86-avx2")
    ap.add_argument("--side", choices=["engine", "metaschedule"], default="engine")
    ap.add_argument("--networks", help="comma-separated: only tasks of these networks")
    ap.add_argument("--min-ms", type=float, default=0.0, help="only tasks whose programs take this long (median)")
    ap.add_argument("--tasks", type=int, default=10)
    ap.add_argument("--programs", type=int, default=48)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--number", type=int)
    ap.add_argument("--repeat", type=int)
    ap.add_argument("--min-repeat-ms", type=int)
    ap.add_argument(
        "--vary",
        action="append",
        help="SETTING=A,B: compare two values of number, repeat, min_repeat_ms or single_run_ms side by side "
        "(repeatable)",
    )
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
    profile = with_measure(profile, **changes)
    if args.retime_spread:
        profile = attrs.evolve(
            profile, backend_options={**profile.backend_options, "retime_spread": args.retime_spread}
        )
    settings = {"": profile}
    if args.vary:
        sides: list[dict[str, float]] = [{}, {}]
        for vary in args.vary:
            key, _, values = vary.partition("=")
            if key not in MEASURE_KEYS + ENGINE_KEYS or len(values.split(",")) != 2:
                sys.exit(f"--vary takes SETTING=A,B with SETTING one of {', '.join(MEASURE_KEYS + ENGINE_KEYS)}")
            for side, value in zip(sides, values.split(",")):
                side[key] = float(value) if key in ENGINE_KEYS else int(value)
        settings = {",".join(f"{k}={v}" for k, v in side.items()): with_measure(profile, **side) for side in sides}
    networks = set(args.networks.split(",")) if args.networks else None
    chosen = pick(args.data, args.profile, args.tasks, args.programs, args.seed, networks, args.min_ms)
    if not chosen:
        sys.exit(
            f"no task in {args.data} has {args.programs} measured programs"
            + (f" in {args.networks}" if networks else "")
            + (f" taking {args.min_ms} ms or more" if args.min_ms else "")
        )
    total = sum(len(p) for _, p in chosen)
    log(f"{len(chosen)} tasks, {total} programs, side {args.side}, {attrs.asdict(profile.measure)}")
    measurers = {name: measurer(args.side, prof) for name, prof in settings.items()}
    passes: dict[str, list[list[np.ndarray]]] = {name: [] for name in settings}
    seconds: dict[str, float] = {name: 0.0 for name in settings}
    load = 0.0
    try:
        for measure, _ in measurers.values():  # start the workers
            measure(chosen[0][0].module(), [trace_to_schedule(chosen[0][0].module(), chosen[0][1][0].trace)])
        for round_ in range(2):
            for name, (measure, _) in measurers.items():
                latencies, took, seen = measure_all(measure, chosen, args.batch)
                passes[name].append(latencies)
                seconds[name] += took
                load = max(load, seen)
                log(f"pass {round_ + 1} {name or 'as set'}: {took:.0f} s")
    finally:
        for _, close in measurers.values():
            close()
    figures: dict[str, object] = {}
    for name in settings:
        own = taus_between(chosen, *passes[name])
        mine = {**summary(own), "programs_per_s": round(2 * total / seconds[name], 3), "per_task": own}
        figures.update(mine if not args.vary else {name: mine})
    if args.vary:
        a, b = settings
        pairs = [taus_between(chosen, x, y) for x in passes[a] for y in passes[b]]
        between = {task: round(float(np.mean([p[task] for p in pairs])), 3) for task in pairs[0]}
        figures["between"] = {**summary(between), "per_task": between}
        figures["speedup"] = round(seconds[a] / seconds[b], 3)
    print(
        json.dumps(
            {
                "bench": "label_repeatability",
                "profile": args.profile,
                "side": args.side,
                "data": str(args.data),
                "measure": {k: getattr(profile.measure, k) for k in ("number", "repeat", "min_repeat_ms")},
                "vary": args.vary,
                "retime_spread": args.retime_spread,
                "tasks": len(chosen),
                "programs": total,
                **figures,
                "other_cores_max": round(load, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
