"""OtherLoad tells other processes' CPU use apart from our own process tree's."""

from __future__ import annotations

import subprocess
import sys
import time

from conftest import foreign_busy_loop
from tcl.machine_load import BUSY_CORES, OtherLoad


def test_a_foreign_busy_loop_counts_and_our_own_child_does_not():
    load = OtherLoad()
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(1.5)
        own = load.sample()
    finally:
        child.kill()
        child.wait()
    with foreign_busy_loop():
        load.sample()
        time.sleep(1.5)
        foreign = load.sample()
    # the busy child takes a whole core, yet only a foreign loop shows as other processes' load
    assert foreign >= BUSY_CORES
    assert foreign - own >= 0.5, (own, foreign)
