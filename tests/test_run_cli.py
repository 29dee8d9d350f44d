"""`tcl run CONFIG.toml` end to end: real tiny training on the bundled records, a third-party
sampler named in a config, and configs that must fail in one line before any work."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import BUNDLED, IDLE, ROOT, run_tcl, tcl_env

from tcl.records.database import load_records


def write_config(folder: Path, text: str, name: str = "exp.toml", data: Path = BUNDLED) -> Path:
    """A config in ``folder`` whose data path (``data``) is relative to it, as users write them."""
    data = os.path.relpath(data, folder)
    path = folder / name
    path.write_text(text.replace("DATA", data))
    return path


SAMPLING = """
[experiment]
kind = "sampling"
data = "DATA"
profiles = ["x86-avx2"]
held_out = ["bert-tiny"]

[model]
name = "tlp"
options = { epochs = 1, batch_size = 128, mc_passes = 2 }

[sampling]
budget = 0.05
rounds = 2
samplers = SAMPLERS
full = false
"""


@pytest.mark.slow  # ~30 s: a sampling experiment (the example package's plugins are used in test_plugins.py)
def test_sampling_config_with_a_third_party_sampler_runs_end_to_end(tmp_path, install_plugin, small_records):
    config = write_config(tmp_path, SAMPLING.replace("SAMPLERS", '["rdu", "every-kth"]'), data=small_records)
    out = tmp_path / "out"
    proc = run_tcl("run", str(config), "--out", str(out), env=tcl_env(install_plugin("tcl-example-plugin")))
    assert proc.returncode == 0, proc.stderr
    results = json.loads((out / "results.json").read_text())
    assert [r["sampler"] for r in results["rows"]] == ["rdu", "every-kth"]
    for row in results["rows"]:
        assert row["profile"] == "x86-avx2" and row["seeds"] == 1 and row["top1_std"] == 0.0
        assert 0 < row["top1"] <= row["top5"] <= 1
    resolved = json.loads((out / "config.resolved.json").read_text())
    assert resolved["experiment"]["data"] == str(small_records) and resolved["experiment"]["seeds"] == [0]
    assert resolved["plugins"]["samplers"] == {"rdu": "tcl", "every-kth": "tcl-example-plugin"}
    assert resolved["plugins"]["cost_models"] == {"tlp": "tcl"}
    assert (out / "results.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "every-kth" in proc.stdout and "top1" in proc.stdout


def test_sampler_variant_is_its_plugin_with_the_given_options(tmp_path, small_records):
    # RDU with only the R weight, as a variant, picks exactly what the registered rdu-r picks
    text = SAMPLING.replace("SAMPLERS", '["rdu-r", "r-only"]').replace("rounds = 2", "rounds = 1")
    text += '\n[sampling.variants.r-only]\nplugin = "rdu"\nw_d = 0\nw_u = 0\n'
    out = tmp_path / "out"
    proc = run_tcl("run", str(write_config(tmp_path, text, data=small_records)), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    registered, variant = json.loads((out / "results.json").read_text())["rows"]
    assert variant["sampler"] == "r-only" and 0 < variant["pairwise"] < 1
    assert {k: v for k, v in variant.items() if k not in ("sampler", "fit_s")} == {
        k: v for k, v in registered.items() if k not in ("sampler", "fit_s")
    }


@pytest.mark.slow  # ~30 s: two models trained and scored
def test_model_variant_runs_beside_its_plugin_under_its_own_name(tmp_path, small_records):
    # the same tlp trained with another ranking loss, both rows in one run
    text = (
        '[experiment]\nkind = "models"\ndata = "DATA"\nprofiles = ["x86-avx2"]\nheld_out = ["bert-tiny"]\n'
        '[models]\nnames = ["tlp", "tlp-listmle"]\n[models.options.tlp]\nepochs = 1\nbatch_size = 256\n'
        '[models.variants.tlp-listmle]\nplugin = "tlp"\nepochs = 1\nbatch_size = 256\nloss = "listmle"\n'
    )
    out = tmp_path / "out"
    proc = run_tcl("run", str(write_config(tmp_path, text, data=small_records)), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    plain, variant = json.loads((out / "results.json").read_text())["rows"]
    assert (plain["model"], variant["model"]) == ("tlp", "tlp-listmle")
    assert 0 < variant["pairwise"] < 1 and variant["pairwise"] != plain["pairwise"]
    bad = write_config(tmp_path, text.replace('loss = "listmle"', 'loss = "hinge"'), "bad.toml", data=small_records)
    proc = run_tcl("run", str(bad), "--check")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "options of cost model tlp-listmle: " in proc.stderr and "listmle" in proc.stderr


@pytest.mark.slow  # ~170 s, the slowest test: the default suite must stay inside 20 minutes on 2 cores
def test_models_smoke_config_runs_and_parallel_profiles_give_the_same_rows(tmp_path):
    out = tmp_path / "out"
    proc = run_tcl("run", str(ROOT / "configs" / "smoke-models.toml"), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert [(r["model"], r["split"]) for r in rows] == [
        ("tlp", "held-out"),
        ("tlp", "cv"),
        ("mamba", "held-out"),
        ("mamba", "cv"),
    ]
    # held-out bert-tiny is scored on its idle re-measurement (eval_data), not on data/bundled
    held = [t for t in load_records(IDLE, profile="x86-avx2").tasks.values() if "bert-tiny" in t.networks]
    assert all(0 < r["top1"] <= 1 and r["held_tasks"] == len(held) for r in rows if r["split"] == "held-out")
    # cross-validation scores every training task, each by the fold model that never saw its network
    trained = [t for t in load_records(BUNDLED, profile="x86-avx2").tasks.values() if "bert-tiny" not in t.networks]
    for row in rows:
        assert row["top1_low"] <= row["top1"] <= row["top1_high"] and row["chance_pairwise"] == 0.5
        assert 0 < row["chance_top1"] < row["chance_top5"] <= 1
        if row["split"] == "cv":
            assert row["folds"] == 2 and row["held_tasks"] == len(trained)
    assert json.loads((out / "config.resolved.json").read_text())["experiment"]["eval_data"] == str(IDLE)
    assert (out / "results.png").is_file()

    # the same tlp training, now beside another profile in a second process: x86-avx2's row is
    # the one the single-process run gave
    text = (
        '[experiment]\nkind = "models"\ndata = "DATA"\neval_data = "IDLE"\n'
        'profiles = ["x86-avx2", "x86-generic"]\nheld_out = ["bert-tiny"]\njobs = 2\n'
        '[models]\nnames = ["tlp"]\n[models.options.tlp]\nepochs = 1\nbatch_size = 256\n'
    )
    parallel = tmp_path / "parallel"
    config = write_config(tmp_path, text.replace("IDLE", os.path.relpath(IDLE, tmp_path)))
    proc = run_tcl("run", str(config), "--out", str(parallel))
    assert proc.returncode == 0, proc.stderr
    assert "[x86-generic] x86-generic: tlp, seed 0" in proc.stderr
    both = json.loads((parallel / "results.json").read_text())["rows"]
    assert [(r["profile"], r["model"]) for r in both] == [("x86-avx2", "tlp"), ("x86-generic", "tlp")]
    assert all(0 < r["pairwise"] < 1 for r in both)

    def without_time(row):
        return {k: v for k, v in row.items() if k != "fit_s"}

    assert without_time(both[0]) == without_time(rows[0])


def test_eval_data_replaces_only_the_held_out_records():
    from tcl.experiments._common import split

    cfg = {"experiment": {"data": str(BUNDLED), "eval_data": str(IDLE), "held_out": ["bert-tiny"]}}
    train, held = split(cfg, "x86-avx2")
    bundled_train, bundled_held = split({"experiment": {**cfg["experiment"], "eval_data": None}}, "x86-avx2")
    assert set(train.tasks) == set(bundled_train.tasks) and len(train) == len(bundled_train)
    idle = load_records(IDLE, profile="x86-avx2").measured()
    assert set(held.tasks) <= set(bundled_held.tasks)
    for key in held.tasks:
        assert sorted(p.latency for p in held.programs[key]) == sorted(p.latency for p in idle.programs[key])


TRANSFER = """
[experiment]
kind = "transfer"
data = "DATA"
profiles = ["x86-avx2", "x86-generic"]
held_out = ["bert-tiny"]

[transfer]
strategies = STRATEGIES
model = "tlp"
base_epochs = 1
budget = 0.05

[transfer.options.continual-kd]
epochs = 1

[transfer.options.scratch]
epochs = 1
"""


@pytest.mark.slow  # ~40 s: a transfer sequence, two seeds in parallel processes
def test_transfer_config_runs_the_sequence_with_seeds_in_parallel_processes(tmp_path, small_records):
    # scratch as a named variant: its options travel to the worker processes with it
    text = TRANSFER.replace("STRATEGIES", '["continual-kd", "scratch-1ep"]').replace(
        'held_out = ["bert-tiny"]', 'held_out = ["bert-tiny"]\nseeds = [0, 1]\njobs = 2'
    )
    text += '\n[transfer.variants.scratch-1ep]\nplugin = "scratch"\nepochs = 1\n'
    out = tmp_path / "out"
    proc = run_tcl("run", str(write_config(tmp_path, text, data=small_records)), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "[seed 0] base model" in proc.stderr and "[seed 1] scratch-1ep" in proc.stderr
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert [(r["strategy"], r["profile"], r["seeds"]) for r in rows] == [
        ("base", "x86-avx2", 2),
        ("continual-kd", "x86-generic", 2),
        ("base", "x86-avx2", 2),
        ("scratch-1ep", "x86-generic", 2),
    ]
    assert all(0 < r["top1"] <= 1 and 0 < r["pairwise"] < 1 and r["top1_std"] >= 0 for r in rows)
    assert 0 < rows[1]["earlier_top1"] <= 1 and 0 < rows[1]["earlier_pairwise"] < 1
    # forgetting per earlier platform: with one earlier platform it is the rows' mean itself
    forgetting = json.loads((out / "results.json").read_text())["forgetting"]
    assert [(f["strategy"], f["after"], f["on"]) for f in forgetting] == [
        ("continual-kd", "x86-generic", "x86-avx2"),
        ("scratch-1ep", "x86-generic", "x86-avx2"),
    ]
    assert forgetting[0]["top1"] == rows[1]["earlier_top1"] and forgetting[1]["pairwise"] == rows[3]["earlier_pairwise"]
    assert "accuracy kept on each earlier platform" in proc.stdout
    assert (out / "results.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # one base model serves both strategies: trained once per seed, so its row is the same twice
    assert rows[0] == {**rows[2], "strategy": rows[0]["strategy"]}
    assert json.loads((out / "config.resolved.json").read_text())["plugins"]["transfer_strategies"] == {
        "continual-kd": "tcl",
        "scratch": "tcl",
    }


@pytest.mark.parametrize(
    "text, message",
    [
        (
            TRANSFER.replace("STRATEGIES", '["kd"]'),
            "unknown transfer strategy 'kd'; choices: as-is, continual-kd, continual-kd-pc, fine-tune",
        ),
        (
            TRANSFER.replace("STRATEGIES", '["scratch"]').replace("held_out =", "jobs = 0\nheld_out ="),
            "[experiment] jobs must be a whole number >= 1, got 0",
        ),
        (
            '[experiment]\nkind = "tuning"\nprofiles = ["x86-avx2"]\n[tuning]\nnetwork = "resnet-19"\n',
            "unknown network 'resnet-19'; choices: ",
        ),
        (
            '[experiment]\nkind = "tuning"\nprofiles = ["x86-avx2"]\n[tuning]\nmethods = ["xgb", "random"]\n'
            'baseline = "mlp"\n',
            "baseline 'mlp' is not one of the compared methods (xgb, random)",
        ),
        (
            '[experiment]\nkind = "tuning"\nprofiles = ["x86-avx2"]\n[tuning]\nrace = 0\n',
            "[tuning] race must be at least 1 (1: each task's best record as it is), got 0",
        ),
        (
            SAMPLING.replace("SAMPLERS", '["rdu", "rdx"]'),
            "unknown sampler 'rdx'; choices: all, random, rdu, rdu-d, rdu-r, rdu-u",
        ),
        (
            SAMPLING.replace("SAMPLERS", '["rdu", "rd"]') + '[sampling.variants.rd]\nplugin = "rdu"\nw_u = -1\n',
            "sampler 'rdu': ",
        ),
        (
            SAMPLING.replace("SAMPLERS", '["rd"]') + '[sampling.variants.rd]\nplugin = "rdv"\n',
            "unknown sampler 'rdv'; choices: all, random, rdu",
        ),
        (
            SAMPLING.replace("SAMPLERS", '["rd"]') + "[sampling.variants.rd]\nw_u = 0\n",
            '[sampling] variants.rd needs plugin = "<one of all, random, rdu',
        ),
        (
            SAMPLING.replace("SAMPLERS", '["random", "rdx"]') + '[sampling.variants.rd]\nplugin = "rdu"\n',
            "[sampling] unknown name 'rdx'; plugins: all, random, rdu, rdu-d, rdu-r, rdu-u; variants: rd",
        ),
        (
            TRANSFER.replace("STRATEGIES", '["fine-tune"]') + '[transfer.variants.fine-tune]\nplugin = "scratch"\n',
            "[transfer] variants.fine-tune: a plugin has that name; give the variant another",
        ),
        (
            SAMPLING.replace("SAMPLERS", '["rdu"]').replace('name = "tlp"', 'name = "gpt"'),
            "unknown cost model 'gpt'; choices: ensemble, mamba, mlp, tlp, xgb",
        ),
        (
            SAMPLING.replace("SAMPLERS", '["rdu"]').replace("budget = 0.05", "budgt = 0.05"),
            "[sampling] unknown key 'budgt'; keys: budget, rounds, samplers, full",
        ),
        (SAMPLING.replace("SAMPLERS", '"rdu"'), "[sampling] samplers must be list[str], got 'rdu'"),
        (
            SAMPLING.replace("SAMPLERS", '["rdu"]').replace('"sampling"', '"sampler"'),
            "[experiment] unknown kind 'sampler'; kinds: models, sampling",
        ),
        (
            SAMPLING.replace("SAMPLERS", '["rdu"]').replace("held_out =", 'eval_data = "."\nheld_out ='),
            "[experiment] eval_data: no records of 'x86-avx2' under ",
        ),
        (
            SAMPLING.replace("SAMPLERS", '["rdu"]').replace('"bert-tiny"', '"gpt-2"'),
            "[experiment] held_out: gpt-2 not in the x86-avx2 records; networks there: bert-tiny, gpt-block",
        ),
        (
            '[experiment]\nkind = "models"\ndata = "DATA"\nprofiles = ["x86-avx2"]\nheld_out = ["bert-tiny"]\n'
            '[models]\nnames = ["tlp"]\n[models.options.tlp]\nepoch = 1\n',
            "cost model 'tlp': bad options",
        ),
    ],
)
def test_bad_config_fails_before_work_in_one_line(tmp_path, text, message):
    config = write_config(tmp_path, text)
    out = tmp_path / "out"
    proc = run_tcl("run", str(config), "--out", str(out))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"tcl: error: {config}: ") and message in proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert not out.exists()


def test_a_split_file_names_the_held_out_networks(tmp_path):
    (tmp_path / "split.toml").write_text(
        'format = "tcl-split"\nversion = 1\ntrain = ["resnet-18", "gpt-block"]\nvalidation = []\ntest = ["bert-tiny"]\n'
    )
    text = SAMPLING.replace("SAMPLERS", '["random"]').replace('held_out = ["bert-tiny"]', 'split = "split.toml"')
    config = write_config(tmp_path, text)
    out = tmp_path / "out"
    proc = run_tcl("run", str(config), "--check")
    assert proc.returncode == 0, proc.stderr
    from tcl.api import discovery
    from tcl.experiments import prepare

    _, cfg = prepare(config, discovery.load_registry())
    assert cfg["experiment"]["held_out"] == ["bert-tiny"]  # what config.resolved.json records
    both = write_config(
        tmp_path, text.replace('split = "split.toml"', 'split = "split.toml"\nheld_out = ["vit-tiny"]'), "both.toml"
    )
    proc = run_tcl("run", str(both), "--out", str(out))
    assert proc.returncode == 2 and "[experiment] give held_out or split, not both" in proc.stderr
    (tmp_path / "split.toml").write_text('format = "tcl-split"\nversion = 1\ntest = ["bert-tiny"]\ntest = []\n')
    proc = run_tcl("run", str(config), "--out", str(out))
    assert proc.returncode == 2 and "split.toml" in proc.stderr and proc.stderr.count("\n") == 1
    assert not out.exists()


def test_malformed_toml_names_the_file_in_one_line(tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text('[experiment]\nkind = "sampling\n')
    proc = run_tcl("run", str(config), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"tcl: error: {config}: malformed TOML: ") and proc.stderr.count("\n") == 1
    missing = run_tcl("run", str(tmp_path / "nope.toml"))
    assert missing.returncode == 2 and missing.stderr.strip().endswith("nope.toml: no such config file")


def test_shipped_configs_validate():
    # in this process, as `tcl run --check` does: one TVM import instead of one per config
    from tcl.api import discovery
    from tcl.experiments import prepare

    registry = discovery.registry()
    configs = sorted((ROOT / "configs").glob("*.toml"))
    assert len(configs) >= 10
    for config in configs:
        _, cfg = prepare(config, registry)
        assert cfg["experiment"]["config_file"] == str(config.resolve())
