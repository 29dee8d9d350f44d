"""How much of the CPU other processes take while we measure.

Timings taken while other work runs are not just slower: on a small machine a multi-threaded
kernel waits for a thread the operating system gave to someone else, so its time grows by
whole scheduler slices and programs swap places. Re-measuring 1,600 programs that had been
timed beside other jobs gave a per-task Kendall tau of 0.12-0.75 against the idle timings
(docs/measurement.md, "Noise"). Collection therefore watches for it and says so.
"""

from __future__ import annotations

import contextlib
import fcntl
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator

import psutil

#: Average cores taken by other processes above which a batch counts as measured under load.
BUSY_CORES = 0.5
#: Shortest interval judged: CPU times tick in 10 ms steps, so over a few milliseconds one
#: tick would read as a whole busy core.
MIN_INTERVAL_S = 1.0


def _tree_cpu_seconds(me: psutil.Process) -> float:
    """CPU seconds of this process tree: each live process's own time plus what its reaped
    children used (so a worker killed for a timeout still counts as ours once it is reaped)."""
    total = 0.0
    for proc in (me, *me.children(recursive=True)):
        try:
            user, system, children_user, children_system = proc.cpu_times()[:4]
        except psutil.Error:  # exited between listing and reading
            continue
        total += user + system + children_user + children_system
    return total


def _busy_cpu_seconds() -> float:
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


class OtherLoad:
    """Cores used by processes outside this process tree, averaged between calls of :meth:`sample`.

    A call less than ``MIN_INTERVAL_S`` after the last judged one returns None and leaves the
    interval open, so quick successive calls (tuning rounds) are judged together.
    """

    def __init__(self) -> None:
        self._me = psutil.Process()
        self.restart()

    def restart(self) -> None:
        """Start a new interval here (what happened before, e.g. waiting for a turn, is not judged)."""
        self._time, self._busy, self._own = time.monotonic(), _busy_cpu_seconds(), _tree_cpu_seconds(self._me)

    def sample(self) -> float | None:
        now = time.monotonic()
        wall = now - self._time
        if wall < MIN_INTERVAL_S:
            return None
        busy, own = _busy_cpu_seconds(), _tree_cpu_seconds(self._me)
        others = (busy - self._busy) - (own - self._own)
        self._time, self._busy, self._own = now, busy, own
        return max(0.0, others / wall)

    def judge(self) -> float:
        """Like :meth:`sample`, but waits out the rest of the shortest interval instead of
        returning None: for callers that must judge every batch (idle-only collection)."""
        time.sleep(max(0.0, MIN_INTERVAL_S - (time.monotonic() - self._time)))
        cores = self.sample()
        assert cores is not None  # the interval is now long enough
        return cores


#: Where idle-only collections on one machine take turns (see :func:`timing_turn`).
TURN_LOCK = Path(tempfile.gettempdir()) / "tcl-idle-timing.lock"


@contextlib.contextmanager
def timing_turn(interrupted: threading.Event, poll_s: float = 0.2, path: Path | None = None) -> Iterator[None]:
    """Hold the machine-wide turn of idle-only collections while one batch is built and timed.

    Two idle-only collections on one machine would each see the other's building and timing
    as load, drop their batches and wait for an idle machine that never comes; taking turns,
    one waits (idle) while the other measures. Load from anything else is still judged."""
    path = path or TURN_LOCK
    try:
        handle = open(path, "a")  # noqa: SIM115 (held for the turn, closed below)
    except PermissionError:  # another user's lock file: reading is enough for flock
        handle = open(path)  # noqa: SIM115
    with handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if interrupted.is_set():
                    raise KeyboardInterrupt from None
                time.sleep(poll_s)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
