"""Generated input for the readers of records, profiles and experiment configs: whatever the
input, the outcome is a valid result or one TclError, never another exception. The default
suite runs a small share of examples; the slow marker runs many more."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tcl.api.errors import TclError
from tcl.records.database import RECORD_FILE, WORKLOAD_FILE, load_records

ROOT = Path(__file__).parent.parent
FEW = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
MANY = settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
run_secs = st.one_of(
    json_values,
    st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=3),
    st.lists(st.floats(1e-9, 1.0), min_size=1, max_size=3),
)
workload_index = st.one_of(st.integers(-3, 4), json_values)


def _check_records(lines: list[tuple[object, object]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp)
        (db / WORKLOAD_FILE).write_text("".join(json.dumps([f"{i:08d}", "AAAA"]) + "\n" for i in range(3)))
        (db / RECORD_FILE).write_text(
            "".join(json.dumps([w, [[[], []], s, {"kind": "llvm"}, []]]) + "\n" for w, s in lines)
        )
        try:
            records = load_records(db)
        except TclError as exc:
            assert "\n" not in str(exc) and str(db / RECORD_FILE) in str(exc)
            return
        per_task = {f"{w:08d}": sum(1 for x, _ in lines if x == w) for w, _ in lines}
        assert {task.key: len(progs) for task, progs in records if progs} == per_task  # never another task's
        for _, progs in records:
            for program in progs:
                assert program.ok == (math.isfinite(program.latency) and program.latency > 0)
                assert program.ok or program.error


@FEW
@given(st.lists(st.tuples(workload_index, run_secs), min_size=1, max_size=6))
def test_generated_records_load_or_fail_in_one_line(lines):
    _check_records(lines)


@pytest.mark.slow
@MANY
@given(st.lists(st.tuples(workload_index, run_secs), min_size=1, max_size=6))
def test_many_generated_records(lines):
    _check_records(lines)


# ---- profiles --------------------------------------------------------------------------------


def mostly(valid: object, other: st.SearchStrategy) -> st.SearchStrategy:
    """``valid`` four times in five, else ``other``: most examples get past the first key."""
    return st.sampled_from([True, True, True, True, False]).flatmap(lambda keep: st.just(valid) if keep else other)


target_tables = st.dictionaries(
    st.sampled_from(["mcpu", "num-cores", "mattr", "bogus-key"]),
    st.one_of(st.sampled_from(["auto", "core-avx2", "skylake-avx512"]), scalars),
    max_size=2,
).map(lambda t: {"kind": "llvm", **t})
measure_tables = st.dictionaries(
    st.sampled_from(
        ["number", "repeat", "min_repeat_ms", "build_timeout_s", "run_timeout_s", "enable_cpu_cache_flush", "nope"]
    ),
    st.one_of(st.integers(-2, 50), scalars),
    max_size=3,
)
profiles = st.fixed_dictionaries(
    {
        "name": mostly("p", scalars),
        "description": mostly("d", scalars),
        "backend": mostly("local", scalars),
        "target": st.sampled_from([True, True, True, True, False]).flatmap(lambda k: target_tables if k else scalars),
    },
    optional={
        "runtime_threads": st.one_of(st.just("auto"), st.integers(-2, 8), scalars),
        "measure": st.sampled_from([True, True, False]).flatmap(lambda k: measure_tables if k else scalars),
        "backend_options": st.one_of(st.dictionaries(st.text(max_size=4), scalars, max_size=2), scalars),
    },
)


def _check_profile(raw: dict) -> None:
    from tcl.api.profiles import build_profile, validate_profile

    try:
        validate_profile(raw, "fuzz.toml")
        profile = build_profile(raw, "fuzz.toml")
    except TclError as exc:
        assert str(exc).startswith("fuzz.toml: ") and "\n" not in str(exc)
        return
    assert profile.runtime_threads >= 1 and profile.measure.number >= 1 and profile.measure.run_timeout_s > 0
    profile.tvm_target()  # what was accepted, TVM accepts


@FEW
@given(profiles)
def test_generated_profiles_load_or_fail_in_one_line(raw):
    _check_profile(raw)


@pytest.mark.slow
@MANY
@given(profiles)
def test_many_generated_profiles(raw):
    _check_profile(raw)


# ---- experiment configs ------------------------------------------------------------------------


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, (int, str)):
        return json.dumps(value)
    return "[" + ", ".join(_toml_value(v) for v in value) + "]"


toml_scalars = st.one_of(
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["one", "", "mlp", "x86-avx2", "bert-tiny"]),
)
toml_values = st.one_of(toml_scalars, st.lists(toml_scalars, max_size=3))
experiment_edits = st.dictionaries(
    st.sampled_from(["seeds", "threads", "jobs", "held_out", "profiles"]),
    st.one_of(st.integers(-2, 4), st.integers(-2, 4), toml_values),
    max_size=2,
)
option_edits = st.dictionaries(
    st.sampled_from(
        ["epochs", "batch_size", "lr", "patience", "dropout", "hidden", "weight_decay", "threads", "grad_clip"]
    ),
    st.one_of(st.integers(-2, 4), st.integers(-2, 4), toml_values),
    max_size=2,
)


def _check_config(exp: dict, options: dict) -> None:
    from tcl.api import discovery
    from tcl.experiments import prepare

    lines = [
        "[experiment]",
        'kind = "models"',
        f'data = "{ROOT}/data/bundled"',
        'profiles = ["x86-avx2"]',
        'held_out = ["bert-tiny"]',
    ]
    lines = [line for line in lines if line.split(" =")[0] not in exp]
    lines += [f"{k} = {_toml_value(v)}" for k, v in exp.items()]
    lines += ["[models]", 'names = ["mlp"]', "[models.options.mlp]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in options.items()]
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "c.toml"
        config.write_text("\n".join(lines) + "\n")
        try:
            _module, cfg = prepare(config, discovery.registry())
        except TclError as exc:
            assert str(exc).startswith(f"{config}: ") and "\n" not in str(exc)
            return
    exp_cfg = cfg["experiment"]
    assert exp_cfg["threads"] >= 1 and exp_cfg["jobs"] >= 1 and not isinstance(exp_cfg["threads"], bool)
    for key in ("epochs", "batch_size", "patience"):
        value = cfg["models"]["options"]["mlp"].get(key, 1)
        assert isinstance(value, int) and not isinstance(value, bool) and value >= 1


@FEW
@given(experiment_edits, option_edits)
def test_generated_configs_validate_or_fail_in_one_line(exp, options):
    _check_config(exp, options)


@pytest.mark.slow
@MANY
@given(experiment_edits, option_edits)
def test_many_generated_configs(exp, options):
    _check_config(exp, options)
