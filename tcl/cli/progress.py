"""Progress display for long work (rich): programs done, failures, rate and time left."""

from __future__ import annotations

import sys
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn


class RichReporter:
    """Reporter for :func:`tcl.learning.collect.collect`; plain lines when stderr is not a terminal."""

    def __init__(self) -> None:
        self.console = Console(stderr=True)
        self.progress: Progress | None = None
        self.failed = 0
        self.done = 0
        self.total = 0
        self.started = 0.0
        self.last_line = 0.0

    def status(self, text: str) -> None:
        self.console.print(f"[dim]{text}[/dim]" if self.console.is_terminal else text, highlight=False)

    def start(self, total: int, tasks: int) -> None:
        self.total, self.started = total, time.perf_counter()
        self.status(f"measuring {total} programs of {tasks} tasks")
        if self.console.is_terminal:
            self.progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]:.2f} prog/s, {task.fields[failed]} failed"),
                TimeRemainingColumn(),
                console=self.console,
            )
            self.progress.start()
            self.bar = self.progress.add_task("programs", total=total, rate=0.0, failed=0)

    def task(self, position: int, count: int, name: str) -> None:
        if self.progress is not None:
            self.progress.update(self.bar, description=f"task {position}/{count} {name[:40]}")
        else:
            self.status(f"task {position}/{count}: {name}")

    def advance(self, n: int, failed: int) -> None:
        self.done += n
        self.failed += failed
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        rate = self.done / elapsed
        if self.progress is not None:
            self.progress.update(self.bar, advance=n, rate=rate, failed=self.failed)
        elif time.perf_counter() - self.last_line > 30 or self.done == self.total:
            self.last_line = time.perf_counter()
            eta = (self.total - self.done) / rate if rate > 0 else float("inf")
            print(
                f"  {self.done}/{self.total} programs, {self.failed} failed, {rate:.2f} prog/s, "
                f"about {eta / 60:.1f} min left",
                file=sys.stderr,
                flush=True,
            )

    def finish(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
