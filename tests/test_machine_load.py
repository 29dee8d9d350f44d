"""OtherLoad tells other processes' CPU use apart from our own process tree's."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest
from conftest import foreign_busy_loop

from tcl.measurement.machine_load import BUSY_CORES, OtherLoad


def _busy_seconds() -> float:
    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0)


def test_our_own_busy_child_is_not_counted_and_a_foreign_loop_is():
    load = OtherLoad()
    busy0, start = _busy_seconds(), time.monotonic()
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(1.5)
    finally:
        child.kill()
        child.wait()
    others = load.sample()
    machine = (_busy_seconds() - busy0) / (time.monotonic() - start)
    # the machine was busier than "others" by about the core our child took (less when shared)
    assert machine - others >= 0.3, (machine, others)
    with foreign_busy_loop():
        load.sample()
        time.sleep(1.5)
        assert load.sample() >= BUSY_CORES


def test_calls_closer_than_the_minimum_interval_are_not_judged():
    load = OtherLoad()
    assert load.sample() is None  # milliseconds after the start: one CPU tick would read as a core
    time.sleep(1.1)
    assert isinstance(load.sample(), float)


def test_one_turn_at_a_time_and_a_waiting_turn_can_be_interrupted(tmp_path):
    import threading

    from tcl.measurement.machine_load import timing_turn

    lock = tmp_path / "turn.lock"
    never, order = threading.Event(), []

    def second():
        with timing_turn(never, poll_s=0.01, path=lock):
            order.append("second")

    with timing_turn(never, path=lock):
        waiting = threading.Thread(target=second)
        waiting.start()
        waiting.join(0.3)
        assert waiting.is_alive() and not order  # it waits while the turn is held
        order.append("first")
        stop = threading.Event()
        stop.set()
        with pytest.raises(KeyboardInterrupt):
            with timing_turn(stop, poll_s=0.01, path=lock):
                pass
    waiting.join(5)
    assert order == ["first", "second"]
