"""The split file in the repo and its reader."""

from __future__ import annotations

from pathlib import Path

import pytest

from tcl.api.errors import TclError
from tcl.records.splits import load_split
from tcl_plugins.networks.register import tcl_register_networks

SPLIT = Path(__file__).resolve().parents[1] / "data" / "split.toml"


def test_repo_split_puts_every_builtin_network_in_exactly_one_part():
    split = load_split(SPLIT)
    registered = {r.name for r in tcl_register_networks()}
    assert sorted(split.networks) == sorted(registered)
    assert len(split.test) >= 3 and split.validation and len(split.train) >= 10
    families = {r.name: r.family for r in tcl_register_networks()}
    # every held-out family is also trained on (the test asks for generalization, not a new operator)
    assert {families[n] for n in split.test} <= {families[n] for n in split.train}


def test_shared_tasks_go_to_the_most_held_out_part():
    split = load_split(SPLIT)
    tasks = {split.train[0]: {"a", "b", "c"}, split.validation[0]: {"b", "d"}, split.test[0]: {"c", "d", "e"}}
    parts = split.assign_tasks(tasks)
    assert parts == {"train": {"a"}, "validation": {"b"}, "test": {"c", "d", "e"}}


@pytest.mark.parametrize(
    "text, message",
    [
        ('format = "tcl-split"\nversion = 1\ntrain = ["a"]\ntest = ["a"]\n', "network a is in both train and test"),
        ('format = "tcl-split"\nversion = 1\ntrain = ["a"]\ntest = ["b"]\nholdout = ["c"]\n', "unknown key(s) holdout"),
        ('format = "tcl-split"\nversion = 1\ntrain = "a"\ntest = ["b"]\n', "train must be a list"),
        ('format = "tcl-split"\nversion = 1\ntrain = ["a"]\n', "at least one train and one test"),
        ('version = 1\ntrain = ["a"]\ntest = ["b"]\n', 'format = "tcl-split"'),
        ("train = [\n", "not valid TOML"),
    ],
)
def test_bad_split_files_name_the_file_and_the_problem(tmp_path, text, message):
    path = tmp_path / "split.toml"
    path.write_text(text)
    with pytest.raises(TclError) as err:
        load_split(path)
    assert str(path) in str(err.value) and message in str(err.value)
    with pytest.raises(TclError, match="cannot read split file"):
        load_split(tmp_path / "missing.toml")


def test_dataset_info_counts_distinct_programs_and_each_part_of_a_split(tmp_path):
    import json

    from conftest import IDLE, run_tcl

    from tcl.learning.record_sets import split_by_network
    from tcl.records.database import load_records

    split = tmp_path / "split.toml"
    split.write_text(
        'format = "tcl-split"\nversion = 1\ntrain = ["resnet-18"]\nvalidation = []\ntest = ["bert-tiny"]\n'
    )
    proc = run_tcl("dataset", "info", str(IDLE), "--split", str(split), "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    avx2 = load_records(IDLE, profile="x86-avx2")
    _, bert = split_by_network(avx2, ["bert-tiny"])
    parts = info["profiles"]["x86-avx2"]["split"]
    assert parts["test"]["tasks"] == len(bert.tasks) and parts["test"]["programs"] == len(bert)
    assert parts["validation"]["tasks"] == 0 and parts["train"]["networks"] == ["resnet-18"]
    # the three profiles hold the same programs: each counts once
    assert info["distinct_programs"] == len(avx2) == info["profiles"]["x86-avx512"]["programs"]
