"""`tcl quickstart`: the whole loop on this machine (slow), and its one-line input errors."""

from __future__ import annotations

import json

import pytest
from conftest import BUNDLED_POOL, run_tcl


def test_unknown_network_and_bad_trials_fail_before_any_work(tmp_path):
    proc = run_tcl("quickstart", "--network", "nosuch-net", "--out", str(tmp_path / "qs"))
    assert proc.returncode == 2
    assert "nosuch-net" in proc.stderr and "bert-tiny" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "qs").exists()
    proc = run_tcl("quickstart", "--trials", "0", "--out", str(tmp_path / "qs"))
    assert proc.returncode == 2 and "--trials" in proc.stderr and "Traceback" not in proc.stderr


def test_network_missing_from_the_pool_is_one_line(tmp_path):
    from tcl.api.errors import TclError
    from tcl.cli.quickstart_cmd import network_pool

    with pytest.raises(TclError, match="no tasks of mobilenet-v2; its networks: bert-tiny"):
        network_pool(BUNDLED_POOL, "mobilenet-v2", tmp_path / "pool")
    assert not (tmp_path / "pool").exists()


@pytest.mark.slow
def test_quickstart_measures_distils_and_tunes(tmp_path):
    out = tmp_path / "qs"
    args = ("quickstart", "--out", str(out), "--budget", "0.02", "--trials", "8", "--population", "32", "--json")
    proc = run_tcl(*args, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "quickstart.json").read_text())
    assert summary["adapt"]["programs_measured"] > 0
    rows = {r["method"]: r for r in summary["tuning"]["rows"]}
    assert set(rows) == {"xgb", "tcl-mamba"}
    assert all(r["measured_trials"] == 8 and r["latency_ms"] > 0 for r in rows.values())
    assert (out / "tune" / "compare.png").stat().st_size > 0
    again = run_tcl(*args, timeout=1800)  # everything is reused: nothing measured twice
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((out / "quickstart.json").read_text())["adapt"]["measured_now"] == 0


def test_closing_table_fits_100_columns_and_the_sentence_says_what_happened():
    from rich.console import Console
    from rich.table import Table

    from tcl.cli.quickstart_cmd import closing_table, what_it_showed

    rows = [
        {
            "method": "xgb",
            "measured_trials": 320,
            "tuning_s": 1234.5,
            "time_to_baseline_best_s": 1200.0,
            "latency_ms": 3.456,
            "torch_ms": 1.27,
            "vs_torch": 0.37,
            "latency_vs_baseline": 1.0,
        },
        {
            "method": "tcl-mamba",
            "measured_trials": 320,
            "tuning_s": 1300.2,
            "time_to_baseline_best_s": 600.0,
            "latency_ms": 3.54,
            "torch_ms": 1.25,
            "vs_torch": 0.35,
            "latency_vs_baseline": 0.98,
        },
    ]
    columns, cells = closing_table(rows)
    table = Table()
    for column in columns:
        table.add_column(column)
    for row in cells:
        table.add_row(*row)
    console = Console(width=200, record=True)
    console.print(table)
    assert max(len(line) for line in console.export_text().splitlines()) <= 100
    assert what_it_showed(rows) == (
        "In short: tcl-mamba reached XGB's best estimate after 600 s, XGB after 1200 s "
        "(2.00x sooner); its network runs in 3.540 ms against XGB's 3.456 ms and torch "
        "eager's 1.250 ms."
    )
    rows[1]["time_to_baseline_best_s"] = None
    assert what_it_showed(rows).startswith("In short: tcl-mamba did not reach XGB's best estimate in 320 trials;")
