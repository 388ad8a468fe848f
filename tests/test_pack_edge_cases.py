"""pack() at the edges: nothing fits, GPUs whose running jobs already break a limit, and the queue reasons.

Real shipped profiles and the shipped MPS model. Both solvers must give the same outcome (jobs placed, queued,
throughput) through the Python API and through ``colopred pack``."""

import json
import warnings

import pytest

from colopred.profile import JobProfile
from colopred.runtime import outcome
from colopred.runtime.placement import Gpu
from colopred.runtime.predictor import Predictor

from .conftest import DATA
from .test_cli import run

PROFILES = DATA / "profiles" / "ncu"
SOLVERS = ("exact", "heuristic")
A, B, C, D = "resnet18-b64-fp32", "gpt2_small-b8-bf16", "lstm_lm-b64-fp32", "dqn-b32-fp32"


def _job(name):
    return JobProfile.from_json(PROFILES / f"{name}.json")


@pytest.fixture(scope="module")
def predictor():
    return Predictor.default("mps")


@pytest.fixture(scope="module")
def jobs():
    return {n: _job(n) for n in (A, B, C, D)}


def _need(p):
    return outcome.memory_need_gib([p.peak_memory_gib])


def _both(predictor, jobs, **kwargs):
    """The placement of each solver, with the warnings it gave (recorded, never printed)."""
    out = {}
    for solver in SOLVERS:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            pl = predictor.pack(jobs, solver=solver, **kwargs)
        out[solver] = pl, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    return out


def _same_outcome(res):
    (ex, ex_w), (he, he_w) = res["exact"], res["heuristic"]
    assert ex.placed == he.placed and ex.queued == he.queued and ex_w == he_w
    assert he.throughput == pytest.approx(ex.throughput, rel=1e-9)


# ----------------------------------------------------------------------------------- nothing fits
def test_no_job_fits_in_memory_places_none_and_queues_all(predictor, jobs):
    """Three jobs, one GPU of 1 GiB: the heuristic raised TypeError and the exact solver leaked scipy's message."""
    three = [jobs[A], jobs[B], jobs[C]]
    res = _both(predictor, three, gpus=[Gpu("g0", memory_gib=1)])
    for pl, notes in res.values():
        assert pl.placed == 0 and pl.gpus == ((),) and pl.gpu_throughput == (0.0,) and pl.throughput == 0.0
        assert list(pl.queued) == [A, B, C] and not notes
        for p in three:
            assert pl.queued[p.name] == f"needs {_need(p):.1f} GiB, more than any GPU has (1.0 GiB at most)"
    _same_outcome(res)


def test_a_job_too_large_for_every_gpu_beside_one_that_fits(predictor, jobs):
    """The heuristic put the busiest job alone on the largest GPU without checking it fits there (TypeError)."""
    res = _both(predictor, [jobs[A], jobs[B]], gpus=[Gpu("l", memory_gib=4.0), Gpu("s", memory_gib=3.5)], max_per_gpu=1)
    for pl, notes in res.values():
        assert pl.placed == 1 and not notes
        assert [n for g in pl.gpus for n in g] == [A] and pl.throughput == 1.0
        assert pl.queued == {B: f"needs {_need(jobs[B]):.1f} GiB, more than any GPU has (4.0 GiB at most)"}
    _same_outcome(res)


# ----------------------------------------------------------------------------------- running jobs break a limit
def test_running_jobs_over_max_per_gpu_stay_with_a_warning(predictor, jobs):
    three = [jobs[A], jobs[B], jobs[C]]
    res = _both(predictor, three, gpus=[Gpu("a", running=(A, B, C))], max_per_gpu=2)
    for pl, notes in res.values():
        assert pl.gpus == ((A, B, C),) and not pl.queued
        assert pl.gpu_throughput[0] == pytest.approx(predictor.predict(three).throughput, rel=1e-9)
        assert notes == ["GPU a: its 3 running jobs already exceed max_per_gpu 2; it keeps them and takes no new job"]
    _same_outcome(res)
    # beside another GPU: the full one takes no new job, the other takes the free one
    res = _both(predictor, [*three, jobs[D]], gpus=[Gpu("a", running=(A, B, C)), Gpu("b")], max_per_gpu=2)
    for pl, notes in res.values():
        assert pl.gpus == ((A, B, C), (D,)) and not pl.queued and len(notes) == 1 and "max_per_gpu 2" in notes[0]
    _same_outcome(res)


def test_running_job_larger_than_its_gpu_stays_with_a_warning(predictor, jobs):
    res = _both(predictor, [jobs[A], jobs[B], jobs[C]], gpus=[Gpu("small", memory_gib=1, running=(A,)), Gpu("big")],
                max_per_gpu=2)
    for pl, notes in res.values():
        assert pl.gpus[0] == (A,) and set(pl.gpus[1]) == {B, C} and not pl.queued
        assert pl.gpu_throughput[0] == 1.0
        assert notes == [f"GPU small: its running jobs need {_need(jobs[A]):.1f} GiB, more than its memory_gib (1.0 GiB); "
                         "it keeps them and takes no new job"]
    _same_outcome(res)


def test_running_jobs_over_max_slowdown_stay_with_a_warning(predictor, jobs):
    pair = predictor.predict([jobs[A], jobs[B]])
    assert max(pair.slowdown) > 1.2
    res = _both(predictor, [jobs[A], jobs[B], jobs[C]], gpus=[Gpu("x", running=(A, B)), Gpu("y")], max_slowdown=1.2)
    for pl, notes in res.values():
        assert pl.gpus == ((A, B), (C,)) and not pl.queued
        assert pl.gpu_throughput[0] == pytest.approx(pair.throughput, rel=1e-9)
        assert notes == [f"GPU x: its running jobs are predicted to slow down to {max(pair.slowdown):.2f}, above "
                         "max_slowdown 1.2; it keeps them and takes no new job"]
    _same_outcome(res)


# ----------------------------------------------------------------------------------- queue reasons
def test_full_gpus_name_max_per_gpu_only(predictor):
    """12 shipped jobs on 2 GPUs of 3: every queued job's reason is the max_per_gpu limit, set and binding (it
    used to name max_slowdown, unset, and an order the exact solver does not have)."""
    twelve = [JobProfile.from_json(p) for p in sorted(PROFILES.glob("*.json"))[:12]]
    res = _both(predictor, twelve, n_gpus=2, max_per_gpu=3, max_slowdown=None, min_throughput=None)
    for pl, _ in res.values():
        assert pl.placed == 6 and len(pl.queued) == 6
        assert set(pl.queued.values()) == {"no room: every GPU is at max_per_gpu (3 jobs)"}
    _same_outcome(res)


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_job_short_of_memory_beside_the_placed_ones_says_memory(predictor, jobs, solver):
    pl = predictor.pack([jobs[A], jobs[B], jobs[C]], gpus=[Gpu("g", memory_gib=5.0)], solver=solver)
    free = 5.0 - _need(jobs[A]) - _need(jobs[C])
    assert pl.gpus == ((A, C),) or set(pl.gpus[0]) == {A, C}
    assert pl.queued == {B: f"fits in no GPU's free memory beside the jobs placed there (needs {_need(jobs[B]):.1f} GiB, "
                            f"at most {free:.1f} GiB free)"}


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_job_over_max_slowdown_everywhere_says_max_slowdown(predictor, jobs, solver):
    pl = predictor.pack([jobs[A], jobs[B]], gpus=[Gpu("g")], max_per_gpu=2, max_slowdown=1.2, solver=solver)
    assert pl.placed == 1 and len(pl.queued) == 1
    best = max(predictor.predict([jobs[A], jobs[B]]).slowdown)
    (reason,) = pl.queued.values()
    assert reason == (f"any placement would break max_slowdown 1.2 (beside the jobs placed on each GPU, a predicted "
                      f"slowdown of {best:.2f} at best)")


@pytest.mark.parametrize("solver", SOLVERS)
def test_mixed_limits_name_each_gpu_and_its_limit(predictor, jobs, solver):
    pl = predictor.pack(list(jobs.values()), gpus=[Gpu("x"), Gpu("y", memory_gib=2.0)], max_per_gpu=2, solver=solver)
    assert pl.placed == 3 and list(pl.queued) == [A]
    free = 2.0 - sum(_need(jobs[n]) for n in pl.gpus[1])
    assert pl.queued[A] == (f"no GPU can take it beside the jobs placed there: x at max_per_gpu (2 jobs); y short of "
                            f"memory (needs {_need(jobs[A]):.1f} GiB, at most {free:.1f} GiB free)")


# ----------------------------------------------------------------------------------- the CLI
def _request(tmp_path, name, **fields):
    doc = {"schema": "colopred.placement_request", "mode": "mps",
           "jobs": [{"profile": str(PROFILES / f"{n}.json")} for n in (A, B, C)], **fields}
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("solver", SOLVERS)
def test_cli_nothing_fits_is_a_result_not_a_traceback(tmp_path, capsys, solver):
    req = _request(tmp_path, "req.json", gpus=[{"name": "a", "memory_gib": 1}], solver=solver)
    code, out, err = run(capsys, "pack", req, "--json")
    assert code == 0 and err == ""
    got = json.loads(out)
    assert got["placed"] == 0 and got["gpus"] == [{"name": "a", "jobs": [], "throughput": 0.0}]
    assert [q["job"] for q in got["queued"]] == [A, B, C] and all("more than any GPU has" in q["reason"] for q in got["queued"])
    code, out, err = run(capsys, "pack", req)
    assert code == 0 and "0 of 3 jobs placed" in out and out.count("queued:") == 3


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("gpus, limits, needle", [
    ([{"name": "a", "running": [A, B, C]}], {"max_per_gpu": 2}, "GPU a: its 3 running jobs already exceed max_per_gpu 2"),
    ([{"name": "a", "memory_gib": 1, "running": [A]}, {"name": "b"}], {}, "GPU a: its running jobs need 3.2 GiB, more than its memory_gib (1.0 GiB)"),
])
def test_cli_running_jobs_over_a_limit_warn_in_one_line(tmp_path, capsys, solver, gpus, limits, needle):
    req = _request(tmp_path, "req.json", gpus=gpus, limits=limits, solver=solver)
    code, out, err = run(capsys, "pack", req, "--json")
    assert code == 0 and "Traceback" not in err
    assert err == f"colopred: warning: {needle}; it keeps them and takes no new job\n"
    got = json.loads(out)
    assert got["placed"] == 3 and not got["queued"] and A in got["gpus"][0]["jobs"]


def test_cli_queue_reasons_name_the_binding_limit(tmp_path, capsys):
    req = tmp_path / "pack12.json"
    req.write_text(json.dumps({"schema": "colopred.placement_request", "mode": "mps", "n_gpus": 2, "limits": {"max_per_gpu": 3},
                               "jobs": [{"profile": str(p)} for p in sorted(PROFILES.glob("*.json"))[:12]]}))
    code, out, _err = run(capsys, "pack", req)
    assert code == 0 and "6 of 12 jobs placed" in out
    assert "queued: alexnet-b128-fp32: no room: every GPU is at max_per_gpu (3 jobs)" in out
    assert "max_slowdown" not in out and "before it" not in out
