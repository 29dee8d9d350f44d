"""Keep TVM's C++ warnings that say nothing to a user of ``tcl tune`` or ``tcl collect`` off the terminal.

TVM's C++ logs straight to file descriptor 2, out of reach of Python's ``warnings`` and
``logging``. Two of its warnings come with every run and are not about the user's network:
``take``'s "Fast mode segfaults when there are out-of-bounds indices" (every embedding
lookup, when TVM lowers it) and "Unknown schedule rule meta_schedule.pool_max" (or
``adaptive_pool_avg``...: CPU targets have no such custom rule, and MetaSchedule falls back to
its default rules); exporting a library adds
a "Scope Saving:" line per function. :func:`quiet_tvm_warnings`
sends descriptor 2 to a temporary file while TVM works and copies back every other line.
It is not used around MetaSchedule's tuning loop, whose progress lines must reach the
terminal as they come, so a network with max pooling still shows the pool_max line once there.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from typing import Iterator

NOISE = (
    "Fast mode segfaults when there are out-of-bounds indices",
    'Unknown schedule rule "meta_schedule.',
    "Warning: Scope Saving:",
)


def without_noise(text: str) -> str:
    """``text`` without the lines of :data:`NOISE` warnings (a warning's indented continuation lines included)."""
    kept, dropping = [], False
    for line in text.splitlines(keepends=True):
        if any(n in line for n in NOISE):
            dropping = True
            continue
        if dropping and line.startswith((" ", "\t")):
            continue
        dropping = False
        kept.append(line)
    return "".join(kept)


@contextlib.contextmanager
def quiet_tvm_warnings() -> Iterator[None]:
    """Filter :data:`NOISE` out of what is written to descriptor 2 inside the block."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            rest = without_noise(capture.read().decode(errors="replace"))
            if rest:
                sys.stderr.write(rest)
                sys.stderr.flush()
