"""The RDU sampler (plugins/samplers/rdu.py): edge budgets, measured/duplicate handling, determinism,
diversity on a blob layout, and uncertainty from a real (tiny, 1-epoch) TLP cost model."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from conftest import BUNDLED

from tcl_plugins.samplers.rdu import VARIANTS, RDUSampler, greedy_select
from tcl_plugins.samplers.register import tcl_register_samplers

AVX2 = BUNDLED / "x86-avx2"


def blobs(per: int = 30, centers=((0, 0), (20, 0), (0, 20), (20, 20), (10, 40)), seed: int = 0):
    rng = np.random.default_rng(seed)
    pts = np.concatenate([np.asarray(c, float) + rng.normal(scale=0.5, size=(per, 2)) for c in centers])
    return pts, np.repeat(np.arange(len(centers)), per)


@pytest.fixture(scope="module")
def records():
    from tcl.records.database import load_records

    return load_records(AVX2)


@pytest.fixture(scope="module")
def real_task(records):
    task, progs = next(iter(records))
    return task, progs[:60]


def test_registrations_and_options():
    regs = {r.name: r for r in tcl_register_samplers() if r.name.startswith("rdu")}
    assert set(regs) == {"rdu", "rdu-r", "rdu-d", "rdu-u"}
    for name, weights in VARIANTS.items():
        s = regs[name].factory()
        assert (s.w_r, s.w_d, s.w_u) == weights
    assert regs["rdu"].needs_model and not regs["rdu-d"].needs_model
    with pytest.raises(ValueError):
        RDUSampler(w_r=-1)


def test_budget_edges_on_real_programs(real_task):
    task, progs = real_task
    s = RDUSampler(w_u=0)
    assert s.select(task, progs, 0) == []
    assert s.select(task, progs, -3) == []
    assert s.select(task, progs, 500, measured=[1, 5]) == [i for i in range(len(progs)) if i not in (1, 5)]
    one = s.select(task, progs, 1, seed=3)
    assert len(one) == 1 and 0 <= one[0] < len(progs)
    picked = s.select(task, progs, 12, measured=[0, 2, 4], seed=3)
    assert len(picked) == len(set(picked)) == 12 and not {0, 2, 4} & set(picked)
    assert picked == sorted(picked)
    assert s.select(task, progs, 12, measured=[0, 2, 4], seed=3) == picked  # deterministic


def test_same_seed_same_selection_and_all_criteria_variants():
    pts, _ = blobs()
    none = np.zeros(len(pts), bool)
    for w in [(1, 1, 1), (1, 0, 0), (0, 1, 0), (1, 1, 0), (0, 0, 1), (1, 0, 1), (0, 1, 1)]:
        s = RDUSampler(w_r=w[0], w_d=w[1], w_u=w[2])
        unc = np.linspace(0, 1, len(pts))
        a = s.select_embedded(pts, 10, none, uncertainty=unc, seed=7)
        b = RDUSampler(w_r=w[0], w_d=w[1], w_u=w[2]).select_embedded(pts, 10, none, uncertainty=unc, seed=7)
        assert a == b and len(set(a)) == 10


def test_diversity_only_picks_every_blob_and_avoids_measured_blobs():
    pts, lab = blobs()
    s = RDUSampler(w_r=0, w_d=1, w_u=0)
    picked = s.select_embedded(pts, 5, np.zeros(len(pts), bool))
    assert sorted(lab[picked]) == [0, 1, 2, 3, 4]
    measured = np.zeros(len(pts), bool)
    measured[lab == 0] = True  # blob 0 fully measured: 4 picks go to the other four blobs
    picked = s.select_embedded(pts, 4, measured)
    assert sorted(lab[picked]) == [1, 2, 3, 4]
    # R+D also covers every blob (R alone would be happy with cluster centres, D spreads them)
    picked = RDUSampler(w_u=0).select_embedded(pts, 5, np.zeros(len(pts), bool))
    assert sorted(lab[picked]) == [0, 1, 2, 3, 4]


def test_batched_greedy_matches_the_spread_of_exact_greedy():
    pts, lab = blobs(per=200)
    x = ((pts - pts.mean(0)) / pts.std(0)).astype(np.float32)
    exact = greedy_select(x, np.zeros(len(x)), 20)
    batched = greedy_select(x, np.zeros(len(x)), 20, exact_limit=0, rounds=4)
    assert len(set(batched.tolist())) == 20
    assert set(lab[exact]) == set(lab[batched]) == set(range(5))


def test_duplicates_are_not_double_picked_before_distinct_ones():
    pts, _ = blobs(per=4)
    dup = np.concatenate([pts, pts, pts])  # every point three times
    n = len(pts)
    for w in [(1, 1, 1), (1, 0, 0), (0, 1, 0), (0, 0, 1)]:
        s = RDUSampler(w_r=w[0], w_d=w[1], w_u=w[2])
        unc = np.tile(np.linspace(0, 1, n), 3)
        picked = s.select_embedded(dup, n, np.zeros(3 * n, bool), uncertainty=unc)
        assert len({i % n for i in picked}) == n, w  # one copy of each distinct point
    measured = np.zeros(3 * n, bool)
    measured[:3] = True  # points 0..2 measured: their copies come last
    picked = RDUSampler().select_embedded(dup, n - 3, measured, uncertainty=np.zeros(3 * n - 3))
    assert {i % n for i in picked} == set(range(3, n))


def test_no_model_uncertainty_warns_once(real_task, caplog):
    task, progs = real_task
    s = RDUSampler(w_r=0, w_d=0, w_u=1)
    with caplog.at_level(logging.WARNING, logger="tcl_plugins.samplers.rdu"):
        a = s.select(task, progs, 5)
        s.select(task, progs, 5)
    assert len(a) == 5
    assert sum("uncertainty term is 0" in r.message for r in caplog.records) == 1


def test_uncertainty_from_a_real_tlp_model(records, real_task):
    import torch

    from tcl_plugins.cost_models.tlp import TLPCostModel

    torch.set_num_threads(1)
    keys = [t.key for t, _ in list(records)[:2]]
    train = records.subset(indices={k: list(range(20)) for k in keys})
    model = TLPCostModel(epochs=1, batch_size=64, verbose=False, threads=1, mc_passes=4)
    model.fit(train, seed=0)
    task, progs = real_task
    unc = model.uncertainty(task, progs[1:])  # MC-dropout on the unmeasured programs, as the sampler asks
    assert unc.shape == (len(progs) - 1,) and unc.max() > unc.min()
    s = RDUSampler(w_r=0, w_d=0, w_u=1)
    picked = s.select(task, progs, 6, measured=[0], model=model)
    emb = model.embed(task, progs)
    distinct = [i for i in range(1, len(progs)) if not any(np.array_equal(emb[i], emb[j]) for j in range(i))]
    expected = sorted(sorted(distinct, key=lambda i: (-unc[i - 1], i))[:6])
    assert picked == expected
    full = RDUSampler().select(task, progs, 6, measured=[0], model=model, seed=1)  # model embeddings + U
    assert len(set(full)) == 6 and 0 not in full
