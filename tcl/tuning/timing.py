"""Timing compiled networks, their functions and torch modules on a machine that drifts.

A VM can run in fast and slow phases of seconds each with nothing else running
(benchmarks/bench_timing_phases.py), so two things compared are timed in turns
(:func:`in_turns`) rather than one after the other.
"""

from __future__ import annotations

import collections
import time
from typing import Any, Callable, Mapping, Sequence, TypeVar

import numpy as np

Side = TypeVar("Side")


def in_turns(sides: Mapping[Side, Callable[[], float]], blocks: int, pause_s: float = 0.0) -> dict[Side, float]:
    """Median over ``blocks`` rounds of each side's timing, the sides taking turns in every
    round so that a phase of the machine falls on all of them alike. ``pause_s`` between sides
    lets one runtime's spinning worker threads go to sleep before the next runs."""
    results: dict[Side, list[float]] = {side: [] for side in sides}
    for _ in range(blocks):
        for side, timing in sides.items():
            results[side].append(timing())
            if pause_s:
                time.sleep(pause_s)
    return {side: float(np.median(times)) for side, times in results.items()}


def network_seconds(vm: Any, device: Any, inputs: list[Any], repeats: int) -> float:
    """Median seconds per end-to-end run over ``repeats`` timings of 5 back-to-back runs."""
    timer = vm.time_evaluator("main", device, number=5, repeat=repeats, min_repeat_ms=0)
    return float(np.median(timer(*inputs).results))


def function_seconds(
    vm: Any, inputs: list[Any], runs: int
) -> tuple[dict[str, list[float]], collections.Counter[str], float]:
    """Seconds each compiled function spent per network run, one entry per run
    (``{function name: [seconds of run 1, ...]}``), its calls per run and the mean seconds of an
    instrumented run. The instrument's Python callbacks add a few microseconds per call to
    every function alike."""
    started = [0.0]
    current: collections.Counter[str] = collections.Counter()
    calls: collections.Counter[str] = collections.Counter()

    def instrument(_func: Any, name: str, before: bool, _ret: Any, *_args: Any) -> int:
        if before:
            started[0] = time.perf_counter()
        else:
            current[name] += time.perf_counter() - started[0]
            calls[name] += 1
        return 0

    vm.set_instrument(instrument)
    try:
        for _ in range(3):  # warm-up
            vm["main"](*inputs)
        per_run: dict[str, list[float]] = collections.defaultdict(list)
        calls.clear()
        start = time.perf_counter()
        for _ in range(runs):
            current.clear()
            vm["main"](*inputs)
            for name, seconds in current.items():
                per_run[name].append(seconds)
        seconds = (time.perf_counter() - start) / runs
        return dict(per_run), collections.Counter({name: n // runs for name, n in calls.items()}), seconds
    finally:
        vm.set_instrument(None)


def median_call_s(function: Any, inputs: Sequence[Any], repeats: int, number: int = 5) -> float:
    """Median over ``repeats`` of the seconds per call of ``number`` back-to-back calls, after
    three warm-up calls: a torch module or a compiled function in a hot loop."""
    for _ in range(3):
        function(*inputs)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(number):
            function(*inputs)
        times.append((time.perf_counter() - t0) / number)
    return float(np.median(times))
