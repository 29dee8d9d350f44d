"""TenSet record import: a hand-written sample in TenSet's v0.6 format, no TVM needed."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tcl.api.errors import TclError
from tcl.records.database import ERRORS_FILE, TENSET_RECORD_FILE, TENSET_WORKLOAD_FILE, load_records
from tcl.records.manifest import read_manifest
from tcl.records.record_writer import RecordWriter
from tcl.records.tenset import import_tenset, tenset_task_key

SAMPLE = Path(__file__).parent / "data" / "tenset_sample.json"
DENSE = '["08f8ff0b6af4ffbe33a2e1d65d7c2e0d", 1, 512, 1000, 512, 1000, 1, 1000]'
CONV = '["3a54e2c1c0ba2cb1b12a1fd4a8390b6e", 1, 56, 56, 64, 3, 3, 64, 64, 1, 1, 1, 64, 1, 56, 56, 64]'


def sample_lines() -> list[dict]:
    return [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]


def test_import_reads_back_as_programs(tmp_path):
    summary = import_tenset(SAMPLE, tmp_path / "imp", profile="tenset-avx2")
    assert (summary.tasks, summary.records, summary.failed) == (2, 8, 2)
    ps = load_records(tmp_path / "imp")
    assert ps.profile == "tenset-avx2"
    assert len(ps) == 8
    dense, conv = tenset_task_key(DENSE), tenset_task_key(CONV)
    assert list(ps.tasks) == [dense, conv]
    assert ps.tasks[dense].name == "tenset_08f8ff0b" and ps.tasks[dense].mod_b64 is None
    lines = sample_lines()
    for prog, line in zip(ps.programs[dense] + ps.programs[conv], lines):
        assert prog.source == "tenset"
        assert prog.trace == line["i"][1][1]  # the steps, verbatim
        if line["r"][1] == 0:
            assert prog.ok and math.isclose(prog.latency, float(np.min(line["r"][0])), rel_tol=1e-15)  # fastest repeat
        else:
            assert not prog.ok and prog.run_secs is None
    assert ps.programs[dense][2].error == "build: auto_scheduler error_no 2 (COMPILE_HOST)"
    assert ps.programs[conv][2].error == "timeout: auto_scheduler error_no 7 (RUN_TIMEOUT)"


def test_labels_are_min_over_latency(tmp_path):
    import_tenset(SAMPLE, tmp_path / "imp")
    ps = load_records(tmp_path / "imp")
    for task, progs in ps:
        lat = np.array([p.latency for p in progs])
        labels = ps.labels(task.key)
        ok = np.isfinite(lat)
        np.testing.assert_allclose(labels[ok], lat[ok].min() / lat[ok])
        assert labels.max() == 1.0 and (labels[~ok] == 0).all()
        assert len(ps.measured().programs[task.key]) == ok.sum()


def test_on_disk_format(tmp_path):
    import_tenset(SAMPLE, tmp_path / "imp", profile="p")
    d = tmp_path / "imp"
    # no TVM file names: TVM must never mistake an import for its own database
    assert not (d / "database_workload.json").exists() and not (d / "database_tuning_record.json").exists()
    workloads = [json.loads(x) for x in (d / TENSET_WORKLOAD_FILE).read_text().splitlines()]
    assert workloads == [[tenset_task_key(DENSE), DENSE], [tenset_task_key(CONV), CONV]]
    records = (d / TENSET_RECORD_FILE).read_text().splitlines()
    first = json.loads(records[0])
    assert first[0] == 0 and first[1][0] == sample_lines()[0]["i"][1][1]
    assert first[1][2] == "llvm -keys=cpu -link-params=0 -mcpu=core-avx2" and first[1][3] is None
    assert " " not in records[0].replace(first[1][2], "")  # TVM's dialect: no spaces
    assert json.loads(records[2])[1][1] == [1e10]  # failed runs stored as MetaSchedule stores them
    errors = [json.loads(x) for x in (d / ERRORS_FILE).read_text().splitlines()]
    assert [(e["line"], e["kind"]) for e in errors] == [(3, "build"), (7, "timeout")]
    manifest = read_manifest(d)
    assert manifest["source"] == "tenset" and manifest["profile"] == "p"
    assert manifest["target"] == "llvm -keys=cpu -link-params=0 -mcpu=core-avx2"
    assert {t["name"] for t in manifest["tasks"]} == {"tenset_08f8ff0b", "tenset_3a54e2c1"}


def test_manifest_names_weights(tmp_path):
    info = {
        DENSE: {"name": "resnet_dense", "weight": 1, "networks": ["resnet-18"]},
        CONV: {"name": "resnet_conv", "weight": 4, "networks": ["resnet-18"]},
    }
    import_tenset(SAMPLE, tmp_path / "imp", tasks_info=info)
    ps = load_records(tmp_path / "imp")
    conv = ps.tasks[tenset_task_key(CONV)]
    assert (conv.name, conv.weight, conv.networks) == ("resnet_conv", 4.0, ("resnet-18",))


def test_several_targets_refused_or_selected(tmp_path):
    lines = SAMPLE.read_text().splitlines()
    other = [line.replace("-mcpu=core-avx2", "-mcpu=skylake-avx512") for line in lines[:3]]
    mixed = tmp_path / "mixed.json"
    mixed.write_text("\n".join(lines + other) + "\n")
    with pytest.raises(TclError, match="several targets"):
        import_tenset(mixed, tmp_path / "a")
    s = import_tenset(mixed, tmp_path / "b", target="llvm -keys=cpu -link-params=0 -mcpu=skylake-avx512")
    assert (s.tasks, s.records) == (1, 3)


def test_corrupt_line_names_file_and_line(tmp_path):
    lines = SAMPLE.read_text().splitlines()
    bad = tmp_path / "bad.json"
    bad.write_text("\n".join(lines[:3] + ['{"i": [["k"]], "r": [[1], 0]}'] + lines[3:]) + "\n")
    with pytest.raises(TclError, match=rf"{bad}:4: not a TenSet record"):
        import_tenset(bad, tmp_path / "out")
    bad.write_text(lines[0] + "\n" + lines[1][:50] + "\n")
    with pytest.raises(TclError, match=rf"{bad}:2:"):
        import_tenset(bad, tmp_path / "out2")


def test_directory_input_and_no_second_import_into_it(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    lines = SAMPLE.read_text().splitlines()
    (src / "a.json").write_text("\n".join(lines[:4]) + "\n")
    (src / "b.json").write_text("\n".join(lines[4:]) + "\n")
    s = import_tenset(src, tmp_path / "out")
    assert (s.files, s.tasks, s.records) == (2, 2, 8)
    with pytest.raises(TclError, match="is not empty; choose a new directory for the import"):
        import_tenset(src, tmp_path / "out")
    assert len(load_records(tmp_path / "out")) == 8


def test_torn_import_is_repaired(tmp_path):
    import_tenset(SAMPLE, tmp_path / "imp")
    rec = tmp_path / "imp" / TENSET_RECORD_FILE
    whole = rec.read_bytes()
    rec.write_bytes(whole + whole.splitlines(keepends=True)[0][:40])  # killed mid-line
    assert len(load_records(tmp_path / "imp")) == 8  # loader skips the torn tail
    with RecordWriter(tmp_path / "imp", flavor="tenset"):
        pass
    assert rec.read_bytes() == whole


def test_no_tvm_needed(tmp_path):
    code = (
        "import sys; sys.modules['tvm'] = None\n"  # any `import tvm` now fails
        "from tcl.records.tenset import import_tenset\nfrom tcl.records.database import load_records\n"
        f"import_tenset({str(SAMPLE)!r}, {str(tmp_path / 'x')!r})\n"
        f"print(len(load_records({str(tmp_path / 'x')!r})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parent.parent)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "8"
