"""Plugin discovery with real installed packages: built-ins, a third-party plugin, a broken one,
a clashing one, and the switch that disables external plugins."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import BUNDLED, BUNDLED_POOL, matmul_module, run_tcl, run_tcl_json, tcl_env

from tcl.api import discovery
from tcl.api.errors import TclError
from tcl.api.programs import Program, Task


def names(listing, point):
    return {p["name"]: p for p in listing["extension_points"][point]}


def test_builtins_listed_with_every_extension_point():
    listing = run_tcl_json("plugins")
    assert set(listing["extension_points"]) == set(discovery.EXTENSION_POINTS)
    samplers = names(listing, "samplers")
    assert {"all", "random"} <= set(samplers)
    assert samplers["random"]["distribution"] == "tcl"
    assert listing["failed"] == []


def test_third_party_package_is_discovered(install_plugin):
    listing = run_tcl_json("plugins", env=tcl_env(install_plugin("tcl-example-plugin")))
    assert names(listing, "samplers")["every-kth"]["distribution"] == "tcl-example-plugin"
    assert names(listing, "hardware_backends")["plain-local"]["plugin"] == "example"
    assert "random" in names(listing, "samplers")  # built-ins still there


def test_third_party_sampler_is_usable(install_plugin, monkeypatch):
    monkeypatch.syspath_prepend(str(install_plugin("tcl-example-plugin")))
    registry = discovery.load_registry()
    sampler = registry.create("samplers", "every-kth", k=3)
    task = Task(key="k", name="t")
    pool = [Program(task_key="k", trace=[[], []]) for _ in range(10)]
    assert sampler.select(task, pool, budget=3, measured=[0]) == [1, 4, 7]


def test_broken_plugin_is_reported_and_skipped(install_plugin):
    env = tcl_env(install_plugin("tcl-broken-plugin"), install_plugin("tcl-example-plugin"))
    listing = run_tcl_json("plugins", env=env)
    (failure,) = listing["failed"]
    assert failure["plugin"] == "broken"
    assert failure["distribution"] == "tcl-broken-plugin"
    assert "a_module_that_does_not_exist" in failure["error"]
    assert "every-kth" in names(listing, "samplers")
    table = run_tcl("plugins", env=env)
    assert table.returncode == 0 and "broken" in table.stdout


def test_duplicate_name_is_an_error_naming_both(install_plugin):
    proc = run_tcl("plugins", env=tcl_env(install_plugin("tcl-clashing-plugin")))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert (
        "'random'" in proc.stderr and "tcl-clashing-plugin" in proc.stderr and "tcl (builtin-samplers)" in proc.stderr
    )


def test_disabling_external_plugins(install_plugin):
    env = tcl_env(
        install_plugin("tcl-clashing-plugin"),
        install_plugin("tcl-broken-plugin"),
        install_plugin("tcl-example-plugin"),
        TCL_DISABLE_EXTERNAL_PLUGINS="1",
    )
    listing = run_tcl_json("plugins", env=env)
    assert "every-kth" not in names(listing, "samplers")
    assert names(listing, "samplers")["random"]["distribution"] == "tcl"
    assert listing["failed"] == []


def test_shipped_checkpoints_are_found_through_the_cost_model_registrations():
    from tcl.tuning.pretrained import pretrained_dir

    shipped = discovery.registry().get("cost_models", "mamba").pretrained
    assert {"x86-avx2", "x86-avx512", "x86-generic"} <= set(shipped)
    assert pretrained_dir("x86-avx2", "mamba") == shipped["x86-avx2"]
    assert (shipped["x86-avx2"] / "config.json").is_file()
    assert pretrained_dir("x86-avx2", "xgb") is None and pretrained_dir("x86-avx2", "no-such-model") is None


def test_the_candidate_pool_is_found_through_the_network_registrations():
    from tcl.records.pools import load_pool
    from tcl.tuning.pretrained import shipped_pool, shipped_pools

    pools = shipped_pools()
    assert set(pools) == {"bert-tiny", "gpt-block", "mlp-mixer", "resnet-18", "vit-tiny"}
    assert shipped_pool() == shipped_pool("bert-tiny") == BUNDLED_POOL.resolve()
    assert set(load_pool(shipped_pool()).meta["networks"]) == set(pools)  # each network's tasks are in it
    with pytest.raises(TclError, match="^network mobilenet-v2 ships no candidate pool .*bert-tiny.*; give --pool DIR$"):
        shipped_pool("mobilenet-v2")
    listed = {n["name"]: n["requires"] for n in run_tcl_json("plugins", "--json")["extension_points"]["networks"]}
    assert listed["bert-tiny"].get("pool") == "shipped" and "pool" not in listed["mobilenet-v2"]


def test_unknown_plugin_name_lists_choices():
    with pytest.raises(TclError, match=r"unknown sampler 'nope'; choices: .*random"):
        discovery.load_registry().get("samplers", "nope")


def test_random_sampler_is_seeded_and_excludes_measured():
    sampler = discovery.load_registry().create("samplers", "random")
    task = Task(key="abc", name="t")
    pool = [Program(task_key="abc", trace=[[], []]) for _ in range(50)]
    first = sampler.select(task, pool, 10, measured=range(5), seed=1)
    assert first == sampler.select(task, pool, 10, measured=range(5), seed=1)
    assert len(set(first)) == 10 and min(first) >= 5
    assert sampler.select(task, pool, 100, measured=range(5)) == list(range(5, 50))
    # an interrupted selection resumes to the same set, and a larger budget extends a smaller one
    whole = sampler.select(task, pool, 12, seed=3)
    part = whole[::3]
    assert sorted(part + sampler.select(task, pool, 12 - len(part), measured=part, seed=3)) == whole
    assert set(whole) < set(sampler.select(task, pool, 20, seed=3))


def test_third_party_backend_measures_real_candidates(install_plugin, monkeypatch):
    from tcl.api.profiles import get_profile
    from tcl.measurement.candidates import generate_pool

    monkeypatch.syspath_prepend(str(install_plugin("tcl-example-plugin")))
    registry = discovery.load_registry()
    profile = get_profile("x86-avx2")
    backend = registry.create("hardware_backends", "plain-local", profile=profile)
    mod = matmul_module(32)
    schedules = generate_pool(mod, profile.tvm_target(), 2, seed=0)
    results = backend.measure(mod, schedules)
    assert len(results) == 2
    assert all(r.ok and min(r.run_secs) > 0 for r in results), results


@pytest.mark.parametrize(
    "answer, problem",
    [
        ("abc", "expected integer indices"),
        (3, "returned int, expected a list"),
        ([1.5], "expected integer indices"),
        ([True], "expected integer indices"),
        ([-1], "index -1 is outside the pool of 10"),
        ([10], "index 10 is outside the pool of 10"),
        ([2, 2], "more than once"),
        ([4], "index 4 was measured already"),
        ([0, 1, 2, 3], "4 indices for a budget of 3"),
    ],
)
def test_a_sampler_breaking_its_contract_is_named(answer, problem):
    from tcl.api.interfaces import checked_selection

    with pytest.raises(TclError, match=f"sampler 'odd' broke its contract: .*{problem}"):
        checked_selection("odd", answer, pool_size=10, budget=3, measured=[4])
    assert checked_selection("odd", (np.int64(5), 0), pool_size=10, budget=3, measured=[4]) == [5, 0]


def test_a_misspelt_hook_name_is_warned_about(install_plugin):
    env = tcl_env(install_plugin("tcl-misspelt-plugin"))
    proc = run_tcl("plugins", "--json", env=env)
    assert proc.returncode == 0
    (unknown,) = json.loads(proc.stdout)["unknown_hooks"]
    assert unknown["plugin"] == "misspelt" and "tcl_register_sampler," in unknown["warning"]
    assert "plugin misspelt (tcl-misspelt-plugin) implements tcl_register_sampler" in proc.stderr


def test_an_unknown_name_mentions_plugins_that_failed_to_load(install_plugin, tmp_path):
    proc = run_tcl(
        "sample",
        "--sampler",
        "every-kth",
        "--budget",
        "0.1",
        "--data",
        str(BUNDLED),
        "--profile",
        "x86-avx2",
        "--out",
        str(tmp_path / "out"),
        env=tcl_env(install_plugin("tcl-broken-plugin")),
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "unknown sampler 'every-kth'" in proc.stderr and "failed to load: broken" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_a_plugin_bug_is_one_line_blaming_its_package(install_plugin, tmp_path):
    site = install_plugin("tcl-buggy-plugin")
    args = ["sample", "--sampler", "halving", "--budget", "0.1", "--data", str(BUNDLED), "--profile", "x86-avx2"]
    proc = run_tcl(*args, "--out", str(tmp_path / "out"), env=tcl_env(site))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("tcl: unexpected error: ZeroDivisionError: integer division or modulo by zero"), line
    assert f"{site / 'tcl_buggy_plugin' / '__init__.py'}:12, in plugin package tcl-buggy-plugin" in line, line
    assert line.endswith("set TCL_TRACEBACK=1 to see the traceback") and not (tmp_path / "out").exists()
    proc = run_tcl(*args, "--out", str(tmp_path / "out"), env={**tcl_env(site), "TCL_TRACEBACK": "1"})
    assert proc.returncode == 1 and "Traceback" in proc.stderr and "(budget - budget)" in proc.stderr


def test_the_example_package_has_a_working_plugin_of_every_extension_point(install_plugin, tmp_path, monkeypatch):
    """What docs/writing-a-plugin.md walks through, used as a user would: through the CLI."""
    site = install_plugin("tcl-example-plugin")
    env = tcl_env(site)
    listing = run_tcl_json("plugins", env=env)
    ours = {
        point: [p["name"] for p in items if p["distribution"] == "tcl-example-plugin"]
        for point, items in listing["extension_points"].items()
    }
    assert ours == {
        "samplers": ["every-kth"],
        "cost_models": ["ridge"],
        "transfer_strategies": ["shrink-to-teacher"],
        "hardware_backends": ["plain-local"],
        "featurizers": ["instruction-counts"],
        "networks": ["tiny-convnet"],
    }

    teacher = tmp_path / "ridge"
    train = run_tcl(
        "train",
        "--model",
        "ridge",
        "--data",
        str(BUNDLED),
        "--profile",
        "x86-avx2",
        "--held-out",
        "bert-tiny",
        "--out",
        str(teacher),
        env=env,
    )
    assert train.returncode == 0, train.stderr
    scored = run_tcl_json(
        "eval",
        "--model",
        str(teacher),
        "--data",
        str(BUNDLED),
        "--profile",
        "x86-avx2",
        "--network",
        "bert-tiny",
        "--json",
        env=env,
    )
    assert scored["tasks"] == 8 and 0 < scored["top1"] <= 1 and 0 < scored["pairwise"] < 1

    moved = tmp_path / "moved"
    proc = run_tcl(
        "transfer",
        "--strategy",
        "shrink-to-teacher",
        "--teacher",
        str(teacher),
        "--profile",
        "x86-avx512",
        "--data",
        str(BUNDLED),
        "--held-out",
        "bert-tiny",
        "--sampler",
        "every-kth",
        "--out",
        str(moved),
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    config = json.loads((moved / "config.json").read_text())
    assert config["model"] == "ridge" and config["profile"] == "x86-avx512"
    assert config["weights"] != json.loads((teacher / "config.json").read_text())["weights"]

    from tcl.measurement.tasks import extract_tasks

    monkeypatch.syspath_prepend(str(site))
    network = discovery.load_registry().create("networks", "tiny-convnet")
    tasks = extract_tasks(network, {"kind": "llvm", "num-cores": 2})
    assert any("conv2d" in t.name for t in tasks)
    # as `tcl tune` builds it: its factory declares no seed, so it gets none
    from tcl.measurement.networks import resolve_network

    discovery.registry.cache_clear()
    try:
        name, tuned = resolve_network("tiny-convnet", seed=3)
    finally:
        discovery.registry.cache_clear()
    assert name == "tiny-convnet" and tuned.example_inputs[0].shape == (1, 3, 32, 32)
