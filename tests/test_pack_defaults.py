"""pack()'s defaults a scheduler can live with, its objectives and its large-instance engine, on the shipped profiles
and the shipped MPS model: every placed set is checked again with ``Predictor.predict`` / ``predict_many``."""

import itertools
import random
import warnings

import pytest

import colopred
from colopred.constants import DEFAULT_MIN_THROUGHPUT, FAIR_SLOWDOWN_PER_JOB
from colopred.profile import JobProfile
from colopred.runtime import placement
from colopred.runtime.placement import Gpu
from colopred.runtime.predictor import Predictor

from .conftest import DATA

PROFILES = [JobProfile.from_json(p) for p in sorted((DATA / "profiles" / "ncu").glob("*.json"))]
BY_NAME = {p.name: p for p in PROFILES}


@pytest.fixture(scope="module")
def predictor():
    return Predictor.default("mps")


def _retimed(n, seed=0):
    """n jobs, each a shipped profile re-timed by 0.9-1.1 (as a scheduler's queue of re-runs)."""
    r = random.Random(seed)
    out = []
    for i in range(n):
        p = PROFILES[r.randrange(len(PROFILES))]
        out.append(p.retimed(p.iteration_ms * r.uniform(0.9, 1.1)).with_(name=f"{p.name}~{i}"))
    return out


def _check_defaults(pr, jobs, pl, max_per_gpu):
    """Every job placed once or queued; every set of two or more within k x FAIR_SLOWDOWN_PER_JOB and above
    DEFAULT_MIN_THROUGHPUT, recomputed with predict_many; the reported throughput is the recomputed one."""
    by = {p.name: p for p in jobs}
    placed = [n for g in pl.gpus for n in g]
    assert sorted(placed + list(pl.queued)) == sorted(by)
    sets = [[by[n] for n in g] for g in pl.gpus if len(g) >= 2]
    assert all(len(g) <= max_per_gpu for g in pl.gpus)
    if sets:
        t = pr.predict_many(sets)
        assert (t["slowdown"] <= FAIR_SLOWDOWN_PER_JOB * t["n_jobs"] + 1e-9).all()
        assert (t["throughput"] > DEFAULT_MIN_THROUGHPUT).all() and t["fits_memory"].all()
        got = sorted(v for g, v in zip(pl.gpus, pl.gpu_throughput) if len(g) >= 2)
        assert got == pytest.approx(sorted(t.groupby("set_id")["throughput"].first()), rel=1e-9)


def test_the_starved_pair_of_the_report_is_not_placed_by_default(predictor):
    """A 27 ms pixelcnn job beside vgg16-b512: predicted to pay off (throughput above 1) while one job slows down far
    beyond its fair share. With the defaults they do not share the GPU; asked for (no bound, no floor), they do."""
    a, b = BY_NAME["pixelcnn-b32-fp32"], BY_NAME["vgg16-b512-fp32"]
    pred = predictor.predict([a, b])
    assert max(pred.slowdown) > 2 * FAIR_SLOWDOWN_PER_JOB  # the unfair pair the defaults must refuse
    pl = predictor.pack([a, b], n_gpus=1, max_per_gpu=2)
    assert pl.placed == 1 and len(pl.queued) == 1 and "max_slowdown \"fair\"" in next(iter(pl.queued.values()))
    asked = predictor.pack([a, b], n_gpus=1, max_per_gpu=2, max_slowdown=None, min_throughput=None)
    assert asked.placed == 2 and asked.gpu_throughput[0] == pytest.approx(pred.throughput, rel=1e-9)


@pytest.mark.parametrize("solver", ["exact", "heuristic"])
def test_defaults_bound_every_slowdown_and_keep_every_set_paying(predictor, solver):
    for seed in range(4):
        r = random.Random(seed)
        jobs = r.sample(PROFILES, 12)
        per_gpu = r.choice((2, 3))
        pl = predictor.pack(jobs, n_gpus=-(-12 // per_gpu), max_per_gpu=per_gpu, solver=solver)
        _check_defaults(predictor, jobs, pl, per_gpu)


def test_defaults_hold_on_every_shipped_profile_at_three_per_gpu(predictor):
    pl = predictor.pack(PROFILES, n_gpus=25, max_per_gpu=3)
    assert pl.solver == "heuristic"
    _check_defaults(predictor, PROFILES, pl, 3)


def test_a_set_that_loses_throughput_is_placed_only_when_asked(predictor):
    """Under the fair bound no set can lose (k slowdowns of at most k: Σ 1/s ≥ 1); with the bound lifted, the default
    floor still keeps a shipped pair predicted below throughput 1 apart, and min_throughput=None places it."""
    pairs = list(itertools.combinations(PROFILES, 2))
    t = predictor.predict_many([list(p) for p in pairs])
    thr = t.groupby("set_id")["throughput"].first()
    losing = thr[thr <= 1]
    assert len(losing), "the shipped profiles hold a pair predicted to lose throughput"
    a, b = pairs[int(losing.index[0])]
    pl = predictor.pack([a, b], n_gpus=1, max_per_gpu=2, max_slowdown=None)
    assert pl.placed == 1 and "min_throughput 1" in next(iter(pl.queued.values()))
    assert predictor.pack([a, b], n_gpus=1, max_per_gpu=2, max_slowdown=None, min_throughput=None).placed == 2


def test_weights_place_the_heavier_job_and_maximise_weighted_throughput(predictor):
    """Brute force over every placement of 4 jobs on 2 GPUs (≤ 2 each, no limits): the exact solver's choice maximises
    the placed weight, then Σ w_j / s_j."""
    jobs = [BY_NAME[n] for n in ("resnet18-b64-fp32", "gpt2_small-b8-bf16", "lstm_lm-b64-fp32", "dqn-b32-fp32")]
    weights = {jobs[0].name: 3.0, jobs[2].name: 0.5}
    w = [weights.get(p.name, 1.0) for p in jobs]

    def value(groups):
        total = 0.0
        for g in groups:
            if len(g) == 1:
                total += w[g[0]]
            elif len(g) == 2:
                s = predictor.predict([jobs[i] for i in g]).slowdown
                total += sum(w[i] / x for i, x in zip(g, s))
        return total

    best = max((value(gs), gs) for gs in ([(0, 1), (2, 3)], [(0, 2), (1, 3)], [(0, 3), (1, 2)]))
    pl = predictor.pack(jobs, n_gpus=2, max_per_gpu=2, max_slowdown=None, min_throughput=None, weights=weights)
    index = {p.name: i for i, p in enumerate(jobs)}
    got = [tuple(sorted(index[n] for n in g)) for g in pl.gpus]
    assert value(got) == pytest.approx(best[0], rel=1e-9)
    # one seat: the heaviest job takes it, whatever the throughput
    one = predictor.pack(jobs, n_gpus=1, max_per_gpu=1, weights=weights)
    assert one.gpus == ((jobs[0].name,),)


def test_large_instances_hold_the_limits_and_near_the_all_pairs_engine(predictor, monkeypatch):
    jobs = _retimed(400)
    assert len(jobs) > placement.DENSE_MAX_JOBS  # the shortlist's engine
    pl = predictor.pack(jobs, n_gpus=200, max_per_gpu=2)
    _check_defaults(predictor, jobs, pl, 2)
    sparse = predictor.pack(jobs, n_gpus=200, max_per_gpu=2, max_slowdown=None, min_throughput=None)
    monkeypatch.setattr(placement, "DENSE_MAX_JOBS", 10**6)
    dense = predictor.pack(jobs, n_gpus=200, max_per_gpu=2, max_slowdown=None, min_throughput=None)
    assert sparse.placed == dense.placed == 400
    assert sparse.throughput >= 0.99 * dense.throughput


def test_no_queued_job_could_join_a_gpu_on_a_large_instance(predictor):
    """The default limits queue some of 400 jobs on 150 GPUs of 3: none of them fits beside any GPU's jobs (checked
    with predict on every GPU that has room)."""
    jobs = _retimed(400, seed=3)
    pl = predictor.pack(jobs, n_gpus=150, max_per_gpu=3)
    _check_defaults(predictor, jobs, pl, 3)
    by = {p.name: p for p in jobs}
    room = [g for g in pl.gpus if len(g) < 3]
    for q in list(pl.queued)[:10]:
        for g in room:
            p = predictor.predict([by[n] for n in g] + [by[q]])
            k = len(g) + 1
            assert max(p.slowdown) > FAIR_SLOWDOWN_PER_JOB * k or p.throughput <= DEFAULT_MIN_THROUGHPUT or not p.fits_memory


def test_a_time_budget_still_gives_a_valid_placement(predictor):
    jobs = _retimed(400, seed=1)
    pl = predictor.pack(jobs, n_gpus=200, max_per_gpu=2, time_budget_s=1e-6)
    _check_defaults(predictor, jobs, pl, 2)
    assert pl.solver == "heuristic" and not pl.optimal


def test_progress_is_heard_on_long_runs_only(predictor, monkeypatch):
    jobs = _retimed(400, seed=2)
    heard: list[str] = []
    predictor.pack(jobs[:8], n_gpus=4, max_per_gpu=2, progress=heard.append)
    assert heard == []  # well under constants.PACK_PROGRESS_AFTER_S
    monkeypatch.setattr(placement, "PACK_PROGRESS_AFTER_S", 0.0)
    predictor.pack(jobs, n_gpus=200, max_per_gpu=2, progress=heard.append)
    assert any(h.startswith("shortlist:") for h in heard) and any(h.startswith("local search:") for h in heard)
    assert all("\n" not in h and h.endswith(" s)") for h in heard)


def test_arrivals_and_departures_place_against_the_running_jobs(predictor):
    jobs = _retimed(30, seed=4)
    first = predictor.pack(jobs[:20], n_gpus=10, max_per_gpu=3)
    gone = [g[0] for g in first.gpus if g][:3]
    gpus = first.running_gpus(departed=gone)
    assert [g.name for g in gpus] == list(first.gpu_names)
    still = [p for p in jobs[:20] if p.name not in gone and p.name not in first.queued]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the running sets keep the limits they were placed under: no GPU is closed
        nxt = predictor.pack(still + jobs[20:], gpus=gpus, max_per_gpu=3)
    for before, after, g in zip(first.gpus, nxt.gpus, gpus):
        assert after[: len(g.running)] == g.running and not set(gone) & set(after)
        assert set(before) - set(gone) <= set(after)
    _check_defaults(predictor, still + jobs[20:], nxt, 3)


def test_gpu_is_exported_at_the_top_level():
    assert colopred.Gpu is Gpu and "Gpu" in colopred.__all__
