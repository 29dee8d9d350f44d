"""Bootstrap intervals and the chance line of cost-model scores."""

from __future__ import annotations

import numpy as np
import pytest

from tcl.learning.metric_intervals import _membership, _metric_rows, _task_terms, bootstrap_intervals, chance_scores
from tcl.learning.metrics import evaluate


def _tasks(n_tasks: int, seed: int = 0, noise: float = 0.5):
    rng = np.random.default_rng(seed)
    lat, score, weights, nets = {}, {}, {}, {}
    for t in range(n_tasks):
        n = int(rng.integers(8, 40))
        latency = rng.lognormal(0.0, 0.5, n)
        latency[rng.random(n) < 0.1] = np.inf  # some failed programs
        lat[f"t{t}"] = latency
        score[f"t{t}"] = -np.log(np.where(np.isfinite(latency), latency, 50.0)) + rng.normal(0, noise, n)
        weights[f"t{t}"] = float(rng.integers(1, 4))
        nets[f"t{t}"] = [f"net{t % 3}"] + ([f"group{t % 5}"] if t % 4 == 0 else [])
    return lat, score, weights, nets


def test_one_draw_of_every_task_reproduces_evaluate() -> None:
    lat, score, weights, nets = _tasks(30)
    keys = list(lat)
    rows = _metric_rows(
        np.ones((1, len(keys))),
        _task_terms(lat, score, (1, 5)),
        np.array([weights[k] for k in keys]),
        _membership(keys, nets),
        (1, 5),
    )
    expected = evaluate(lat, score, ks=(1, 5), weights=weights, networks=nets)
    assert set(rows) == set(expected)
    for name, value in expected.items():
        assert rows[name][0] == pytest.approx(value, rel=1e-12), name


def test_intervals_hold_the_estimate_and_narrow_with_more_tasks() -> None:
    widths = []
    for n_tasks in (10, 160):
        lat, score, weights, nets = _tasks(n_tasks, seed=n_tasks)
        point = evaluate(lat, score, ks=(1, 5), weights=weights, networks=nets)
        intervals = bootstrap_intervals(lat, score, weights=weights, networks=nets, rounds=500)
        for name, (low, high) in intervals.items():
            assert low <= point[name] <= high, (name, low, point[name], high)
        widths.append(intervals["top1"][1] - intervals["top1"][0])
    assert widths[1] < widths[0] / 2


def test_chance_is_the_expected_score_of_a_random_pick() -> None:
    # one fast program among n equal slow ones: a random pick finds it with probability 1/n
    n = 10
    lat = {"a": np.array([1.0] + [2.0] * (n - 1))}
    chance = chance_scores(lat, ks=(1,), draws=4000, seed=1)
    assert chance["top1"] == pytest.approx(1 / n + (n - 1) / n * 0.5, abs=0.02)
    assert chance["pairwise"] == 0.5
    # a model that ranks perfectly is far above the chance line
    lat, score, weights, nets = _tasks(20, noise=0.0)
    assert evaluate(lat, score, weights=weights)["top1"] == 1.0
    assert chance_scores(lat, weights=weights, draws=50)["top1"] < 0.9
