"""Ctrl-C at safe points inside TVM work."""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator


@contextlib.contextmanager
def deferred_interrupt() -> Iterator[threading.Event]:
    """Ctrl-C sets the yielded flag instead of raising wherever Python happens to be.

    Raised inside a call into TVM (a worker call, or a Python callback TVM makes), a
    KeyboardInterrupt comes back as an ordinary TVM error: a measurement would record it as the
    candidate's failure, and a pool draw, which rejects candidates TVM cannot replay, would
    swallow it and go on. The caller checks the flag where stopping is safe. Outside the main
    thread, where Python delivers no signals, the flag is never set.
    """
    flag = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return
    previous = signal.signal(signal.SIGINT, lambda *_: flag.set())
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)
