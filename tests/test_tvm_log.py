"""TVM's noise warnings are kept off the terminal, everything else written to stderr is kept."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import tcl_env

TAKE = """
import sys
import numpy as np
import tvm
from tvm import relax
from tvm.script import relax as R

from tcl.records.tvm_log import quiet_tvm_warnings

@tvm.script.ir_module
class Lookup:
    @R.function
    def main(table: R.Tensor((10, 4), "float32"), ids: R.Tensor((3,), "int64")):
        return R.take(table, ids, axis=0)

with quiet_tvm_warnings() if sys.argv[1] == "quiet" else open("/dev/null"):
    tvm.compile(Lookup, target="llvm")
    print("kept: ours", file=sys.stderr, flush=True)
"""


@pytest.mark.slow  # ~15 s: a network extracted in a fresh process (the embedding case stays in the default run)
def test_the_take_warning_is_dropped_and_other_lines_kept(tmp_path):
    script = tmp_path / "take.py"
    script.write_text(TAKE)
    loud, quiet = (
        subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True, env=tcl_env(), timeout=300)
        for mode in ("loud", "quiet")
    )
    assert loud.returncode == 0 and quiet.returncode == 0, quiet.stderr
    assert "Fast mode segfaults" in loud.stderr  # TVM does print it: the filter has something to drop
    assert "Fast mode segfaults" not in quiet.stderr and "kept: ours" in quiet.stderr


def test_continuation_lines_of_a_dropped_warning_go_with_it():
    from tcl.records.tvm_log import without_noise

    text = (
        '[1] x.cc:64: Warning: Unknown schedule rule "meta_schedule.pool_max" for target\n'
        "  s_tir.meta_schedule.cpu.meta_schedule.pool_max\nround 1: 4 trials\n"
    )
    assert without_noise(text) == "round 1: 4 trials\n"
    other_rule = text.replace("pool_max", "adaptive_pool_avg")  # any rule CPU targets lack
    assert without_noise(other_rule) == "round 1: 4 trials\n"


def test_extracting_a_network_with_an_embedding_prints_no_take_warning():
    """Task extraction (what `tcl collect` and `tcl tune` start with) lowers bert-tiny's lookups."""
    script = (
        "from tcl.api.discovery import registry\n"
        "from tcl.measurement.tasks import extract_tasks\n"
        "tasks = extract_tasks(registry().create('networks', 'bert-tiny'), {'kind': 'llvm', 'num-cores': 2})\n"
        "print(len(tasks))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=tcl_env(), timeout=300)
    assert proc.returncode == 0 and int(proc.stdout) > 0, proc.stderr
    assert "Fast mode segfaults" not in proc.stderr
