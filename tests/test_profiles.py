"""Hardware profiles: the six built-ins, user directories, and clear errors for bad files."""

from __future__ import annotations

import pytest
from conftest import run_tcl, run_tcl_json, tcl_env

from tcl.api.profiles import get_profile, host_cpu_name

BUILTINS = {"x86-avx512", "x86-avx2", "x86-generic", "native", "cuda-sm90", "rpc-example"}


def test_builtin_profiles_listed_with_targets():
    profiles = {p["name"]: p for p in run_tcl_json("profiles")["profiles"]}
    assert set(profiles) == BUILTINS
    assert profiles["x86-avx2"]["target"] == {"kind": "llvm", "mcpu": "core-avx2", "num-cores": 2}
    assert profiles["x86-generic"]["runtime_threads"] == 1
    assert profiles["cuda-sm90"]["target"]["arch"] == "sm_90"
    assert profiles["native"]["target"]["mcpu"] == host_cpu_name()


def test_targets_are_accepted_by_tvm():
    import tvm

    for name in BUILTINS:
        target = get_profile(name).tvm_target()
        assert isinstance(target, tvm.target.Target)


GOOD = """name = "mine"
description = "my box"
backend = "local"
runtime_threads = 4
[target]
kind = "llvm"
mcpu = "znver3"
num-cores = 4
"""


@pytest.mark.slow  # ~20 s: four tcl processes
def test_user_directory_adds_and_shadows(tmp_path):
    (tmp_path / "mine.toml").write_text(GOOD)
    (tmp_path / "x86-avx2.toml").write_text(GOOD.replace('"mine"', '"x86-avx2"'))
    profiles = {p["name"]: p for p in run_tcl_json("--profiles-dir", str(tmp_path), "profiles")["profiles"]}
    assert profiles["mine"]["runtime_threads"] == 4
    assert profiles["x86-avx2"]["target"]["mcpu"] == "znver3"
    after = run_tcl_json("profiles", "--profiles-dir", str(tmp_path))["profiles"]  # after the command works too
    assert "mine" in {p["name"] for p in after}
    env = tcl_env(TCL_PROFILES_PATH=str(tmp_path))
    assert "mine" in {p["name"] for p in run_tcl_json("profiles", env=env)["profiles"]}


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            GOOD.replace("runtime_threads = 4", "runtime_threads = -1"),
            "key 'runtime_threads': expected a positive integer",
        ),
        (GOOD.replace('backend = "local"\n', ""), "key 'backend': expected a non-empty string, got nothing"),
        (GOOD + '[measure]\nnumber = "three"\n', "key 'measure.number': expected a positive integer, got 'three'"),
        (GOOD + "[measure]\nrepeats = 2\n", "key 'measure.repeats': unknown"),
        (GOOD.replace('kind = "llvm"', 'kinds = "llvm"'), "key 'target.kind': expected a table with a string 'kind'"),
        ("colour = 1\n" + GOOD, "key 'colour': unknown"),
        (
            GOOD.replace("num-cores = 4\n", ""),
            "key 'target.num-cores': expected a positive integer or \"auto\" (the cores a CPU program may use), "
            "got nothing",
        ),
        ("name = ", "not valid TOML"),
    ],
)
def test_bad_profile_is_one_clear_line(tmp_path, text, expected):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    proc = run_tcl("--profiles-dir", str(tmp_path), "profiles")
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert str(path) in lines[0] and expected in lines[0]


def test_unknown_profile_lists_choices():
    from tcl.api.errors import TclError

    with pytest.raises(TclError, match="unknown profile 'nope'; choices: cuda-sm90, native"):
        get_profile("nope")


def test_missing_profiles_dir(tmp_path):
    proc = run_tcl("--profiles-dir", str(tmp_path / "absent"), "profiles")
    assert proc.returncode == 2 and "does not exist" in proc.stderr


def test_a_backend_no_plugin_provides_is_flagged_when_listed_and_refused_with_the_file(tmp_path):
    (tmp_path / "mine.toml").write_text(GOOD.replace('backend = "local"', 'backend = "no-such-backend"'))
    proc = run_tcl("--profiles-dir", str(tmp_path), "profiles")
    assert proc.returncode == 0 and "no-such-backend (not installed)" in proc.stdout
    assert "no installed plugin provides the backend of mine; installed backends: cuda, local, rpc" in proc.stderr
    proc = run_tcl(
        "--profiles-dir", str(tmp_path), "collect", "--profile", "mine", "--network", "bert-tiny", "--pool-size", "4",
        "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert proc.returncode == 2 and not (tmp_path / "out").exists()
    assert proc.stderr.strip() == (
        f"tcl: error: {tmp_path / 'mine.toml'}: profile 'mine': unknown hardware backend 'no-such-backend'; "
        "choices: cuda, local, rpc"
    ), proc.stderr


def test_one_name_in_two_user_directories_is_an_error_naming_both(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    for folder in (first, second):
        folder.mkdir()
        (folder / "mine.toml").write_text(GOOD)
    proc = run_tcl("--profiles-dir", str(first), "--profiles-dir", str(second), "profiles")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == (
        f"tcl: error: {second / 'mine.toml'}: profile name 'mine' is also the name in {first / 'mine.toml'}; "
        "give each profile its own name"
    )
    env = tcl_env(TCL_PROFILES_PATH=str(first))  # one directory named twice is read once
    assert "mine" in {p["name"] for p in run_tcl_json("--profiles-dir", str(first), "profiles", env=env)["profiles"]}
