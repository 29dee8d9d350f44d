"""Damaged and hostile input: every case ends in one line naming the file and exit status 2
(or is handled correctly), never a traceback, never a silently wrong result."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import run_tcl

from tcl.database import RECORD_FILE, WORKLOAD_FILE, load_records, pack_dir
from tcl.errors import TclError

BUNDLED_POOL = Path(__file__).parent.parent / "data" / "bundled" / "pool"
PRETRAINED = Path(__file__).parent.parent / "plugins" / "pretrained" / "x86-avx2" / "mlp"
TARGET = {"kind": "llvm", "mcpu": "core-avx2"}
TRACE = [[], []]


def record_line(widx, run_secs) -> str:
    return json.dumps([widx, [TRACE, run_secs, TARGET, []]])


def write_db(path: Path, records: list[str], tasks: int = 2) -> Path:
    """A plain record directory written by hand (no TVM): ``tasks`` workloads, given record lines."""
    path.mkdir(parents=True, exist_ok=True)
    (path / WORKLOAD_FILE).write_text("".join(json.dumps([f"{i:08d}", "AAAA"]) + "\n" for i in range(tasks)))
    (path / RECORD_FILE).write_text("".join(line + "\n" for line in records))
    return path


def packed_db(tmp_path: Path) -> Path:
    src = write_db(tmp_path / "plain", [record_line(i % 2, [1e-4 * (i + 1)]) for i in range(400)])
    return pack_dir(src, tmp_path / "packed", packed=True)[0].parent


def cut_short(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def flip_bytes(path: Path) -> None:
    data = bytearray(path.read_bytes())
    for i in range(len(data) // 3, len(data) // 3 + 16):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def not_gzip(path: Path) -> None:
    path.write_bytes(b"this is not gzip data\n" * 10)


DAMAGE = {"cut short": cut_short, "bytes flipped": flip_bytes, "not gzip": not_gzip}


@pytest.mark.parametrize("damage", DAMAGE)
@pytest.mark.parametrize("name", [RECORD_FILE, WORKLOAD_FILE])
def test_damaged_gzip_is_one_error_naming_the_file(tmp_path, damage, name):
    db = packed_db(tmp_path)
    victim = db / (name + ".gz")
    DAMAGE[damage](victim)
    with pytest.raises(TclError, match=f"^{victim}: damaged gzip file"):
        load_records(db)


def _assert_one_line_error(proc, victim: Path) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tcl: error: {victim}: damaged gzip file"), proc.stderr


@pytest.mark.parametrize("damage", DAMAGE)
def test_cli_reports_damaged_gzip_in_one_line(tmp_path, damage):
    db = packed_db(tmp_path)
    victim = db / (RECORD_FILE + ".gz")
    DAMAGE[damage](victim)
    _assert_one_line_error(run_tcl("dataset", "info", str(db)), victim)
    if damage == "cut short":  # the commands share one reader; one damage each is enough here
        _assert_one_line_error(run_tcl("eval", "--model", str(PRETRAINED), "--data", str(db)), victim)
        _assert_one_line_error(run_tcl("train", "--model", "mlp", "--data", str(db), "--epochs", "1",
                                       "--out", str(tmp_path / "ckpt")), victim)
        assert not (tmp_path / "ckpt").exists()


def test_damaged_pool_gzip_names_the_file(tmp_path):
    from tcl.pools import load_pool

    pool = Path(shutil.copytree(BUNDLED_POOL, tmp_path / "pool"))
    victim = pool / "candidates.json.gz"
    cut_short(victim)
    with pytest.raises(TclError, match=f"^{victim}: damaged gzip file"):
        load_pool(pool)
