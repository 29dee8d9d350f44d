"""A program's latency is the fastest of its repeats; labels follow from it."""

from __future__ import annotations

import math

from tcl.api.programs import Program, ProgramSet, Task


def test_latency_is_the_fastest_repeat_and_labels_use_it():
    task = Task(key="t", name="t")
    # the second program's one slow repeat (another process took the core) must not count
    fast = Program(task_key="t", trace=[], run_secs=(2e-4, 2.1e-4, 2.2e-4))
    interrupted = Program(task_key="t", trace=[], run_secs=(9e-3, 1e-4, 1.1e-4))
    failed = Program(task_key="t", trace=[], run_secs=None, error="run")
    assert interrupted.latency == 1e-4 and fast.latency == 2e-4
    assert math.isinf(failed.latency) and not failed.ok
    records = ProgramSet()
    records.add(task, [fast, interrupted, failed])
    assert records.labels("t").tolist() == [0.5, 1.0, 0.0]
