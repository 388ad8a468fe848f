"""The placement engine: limits hold, nothing is lost, the heuristic is near the exact optimum, pinned jobs stay."""

import random

import numpy as np
import pytest

from colopred.profile import JobProfile
from colopred.runtime.placement import Gpu
from colopred.runtime.predictor import Predictor

from .conftest import DATA

PROFILES = [JobProfile.from_json(p) for p in sorted((DATA / "profiles" / "ncu").glob("*.json"))]


@pytest.fixture(scope="module")
def predictor():
    return Predictor.default("mps")


def _check_limits(pr, jobs, pl, max_per_gpu, max_slowdown, memory=None):
    by_name = {p.name: p for p in jobs}
    placed = [n for g in pl.gpus for n in g]
    assert sorted(placed + list(pl.queued)) == sorted(by_name), "every job is placed once or queued"
    for g, value in zip(pl.gpus, pl.gpu_throughput):
        assert len(g) <= max_per_gpu
        if len(g) >= 2:
            pred = pr.predict([by_name[n] for n in g])
            assert pred.throughput == pytest.approx(value, rel=1e-9)
            assert pred.memory_gib <= (memory or pred.memory_gib)
            assert pred.fits_memory
            if max_slowdown is not None:
                assert max(pred.slowdown) <= max_slowdown + 1e-12
        else:
            assert value == len(g)


def test_twelve_shipped_jobs_on_six_gpus_are_all_placed(predictor):
    """12 shipped jobs, 6 GPUs, at most 3 per GPU, no slowdown above 2.5: a feasible instance the old greedy pack
    refused ("fits on no GPU")."""
    jobs = PROFILES[:12]
    pl = predictor.pack(jobs, n_gpus=6, max_per_gpu=3, max_slowdown=2.5)
    assert pl.placed == 12 and not pl.queued and pl.solver == "exact" and pl.optimal
    _check_limits(predictor, jobs, pl, 3, 2.5)


def test_random_instances_respect_limits_and_the_heuristic_is_near_the_optimum(predictor):
    gaps = []
    for i in range(12):
        r = random.Random(i)
        jobs = r.sample(PROFILES, r.randint(5, 11))
        per_gpu = r.choice((2, 3))
        n_gpus = max(1, -(-len(jobs) // per_gpu) + r.choice((-1, 0, 0, 1)))
        limit = r.choice((None, 2.0, 3.0))
        exact = predictor.pack(jobs, n_gpus=n_gpus, max_per_gpu=per_gpu, max_slowdown=limit, solver="exact")
        heur = predictor.pack(jobs, n_gpus=n_gpus, max_per_gpu=per_gpu, max_slowdown=limit, solver="heuristic")
        for pl in (exact, heur):
            _check_limits(predictor, jobs, pl, per_gpu, limit)
        assert heur.placed == exact.placed, f"instance {i}: the heuristic placed fewer jobs"
        assert heur.throughput <= exact.throughput + 1e-9  # the exact solver is optimal under the model
        gaps.append((exact.throughput - heur.throughput) / exact.throughput)
        if exact.placed == len(jobs):  # a feasible instance: auto places every job
            assert predictor.pack(jobs, n_gpus=n_gpus, max_per_gpu=per_gpu, max_slowdown=limit).placed == len(jobs)
    assert np.mean(gaps) <= 0.01


def test_pinned_jobs_stay_and_count_against_the_limits(predictor):
    jobs = PROFILES[:7]
    gpus = [Gpu("a", running=(jobs[0].name,)), Gpu("b", running=(jobs[1].name, jobs[2].name)), Gpu("c")]
    pl = predictor.pack(jobs, gpus=gpus, max_per_gpu=2, max_slowdown=None, min_throughput=None)  # limits on seats alone
    assert pl.gpu_names == ("a", "b", "c")
    assert pl.gpus[0][0] == jobs[0].name and set(pl.gpus[1]) == {jobs[1].name, jobs[2].name}
    assert len(pl.gpus[0]) <= 2 and len(pl.gpus[2]) <= 2
    # 3 running and 4 free jobs; room for 1 + 0 + 2 free ones beside the running: one waits
    assert pl.placed == 6 and len(pl.queued) == 1 and set(pl.queued) <= {p.name for p in jobs[3:]}


def test_a_job_larger_than_any_gpu_is_queued_with_its_reason(predictor):
    big = PROFILES[0].with_(name="huge", peak_memory_gib=60.0)
    gpus = [Gpu("small-a", memory_gib=40.0), Gpu("small-b", memory_gib=40.0)]
    pl = predictor.pack([big, *PROFILES[1:4]], gpus=gpus, max_per_gpu=2)
    assert "huge" in pl.queued and "GiB" in pl.queued["huge"] and pl.placed == 3


def test_large_instances_use_the_heuristic_and_place_everything(predictor):
    jobs = [p.retimed(p.iteration_ms * f).with_(name=f"{p.name}@{f}") for p in PROFILES for f in (0.9, 1.0, 1.1)][:120]
    pl = predictor.pack(jobs, n_gpus=60, max_per_gpu=2)
    assert pl.solver == "heuristic" and pl.placed == 120 and not pl.queued
    assert all(len(g) == 2 for g in pl.gpus)
    _check_limits(predictor, jobs, pl, 2, None)


@pytest.mark.parametrize("kwargs, message", [({"n_gpus": 0}, "n_gpus"), ({"gpus": []}, "no GPU"), ({"n_gpus": 2, "max_per_gpu": 0}, "max_per_gpu"),
                                             ({"n_gpus": 2, "max_slowdown": 0.5}, "max_slowdown"),
                                             ({"gpus": [Gpu("a", running=("nope",))]}, "not among the jobs"),
                                             ({"n_gpus": 2, "solver": "magic"}, "unknown solver")])
def test_bad_arguments_are_refused(predictor, kwargs, message):
    with pytest.raises(ValueError, match=message):
        predictor.pack(PROFILES[:3], **kwargs)
