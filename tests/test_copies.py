"""Copies of one job in one set (a hyperparameter sweep's runs side by side): the same profile given several times
is that many copies, named JOB#1, JOB#2, ... in the order given, in predict, predict_many, rank_partners, pack,
observations, requests and the CLI; a copy's features are those of a partner with the same profile, its offsets
its job's."""

import json

import numpy as np
import pytest

from colopred.cli import main
from colopred.profile import JobProfile, as_instances, instance_names, job_of
from colopred.runtime.features import FEATURES, feature_columns, feature_matrix, profile_matrix
from colopred.runtime.observed import Observation
from colopred.runtime.predictor import Predictor

from .conftest import DATA

NCU = DATA / "profiles" / "ncu"
A = NCU / "resnet50-b64-fp32.json"
B = NCU / "gpt2_small-b8-bf16.json"


@pytest.fixture(scope="module")
def jobs():
    return JobProfile.from_json(A), JobProfile.from_json(B)


def test_instance_names_and_job_of():
    assert instance_names(["a", "b", "a"]) == ["a#1", "b", "a#2"] and instance_names(["a", "b"]) == ["a", "b"]
    assert [job_of(n) for n in ("a#2", "a", "a#x", "#3", "r50-b64#1")] == ["a", "a", "a#x", "#3", "r50-b64"]
    a, b = JobProfile.from_json(A), JobProfile.from_json(B)
    got = as_instances([a, b, a])
    assert [p.name for p in got] == ["resnet50-b64-fp32#1", "gpt2_small-b8-bf16", "resnet50-b64-fp32#2"] and got[1] is b
    assert got[0].with_(name=a.name) == a


def test_a_copy_is_a_partner_with_the_same_profile_in_every_feature_path(jobs):
    """The features of a set holding copies come out of the feature code as they are: the rows of [a, a, b] by index
    (one profile row used twice) equal those of a and a renamed twin, on the full-set path, the path for sets with
    empty slots and the column path; a copy's co-runner aggregates hold its twin's values."""
    a, b = jobs
    twin = a.with_(name="twin")
    by_index = feature_matrix(profile_matrix([a, b]), np.array([[0, 0, 1]]))[0]
    by_twin = feature_matrix(profile_matrix([a, twin, b]), np.array([[0, 1, 2]]))[0]
    padded = feature_matrix(profile_matrix([a, b]), np.array([[0, 0, 1, -1]]))[0]  # the path for empty slots
    np.testing.assert_array_equal(by_index, by_twin)
    np.testing.assert_array_equal(by_index, padded)
    cols, exact = feature_columns(profile_matrix([a, b]), np.array([[0, 0, 1]]), FEATURES, ("queue_load",))
    np.testing.assert_array_equal(cols, by_index.astype(np.float32))
    np.testing.assert_array_equal(exact["queue_load"], by_index[:, FEATURES.index("queue_load")])
    row = dict(zip(FEATURES, by_index[0]))  # the first copy: its co-runners are its twin and b
    P = profile_matrix([a, b])
    assert row["co_max_busy"] == max(P[0, 0], P[1, 0]) and row["co_sum_busy"] == P[0, 0] + P[1, 0] and row["n_jobs"] == 3


@pytest.mark.parametrize("mode", ["mps", "timeslice"])
def test_predict_names_the_copies_and_gives_them_their_jobs_offset(mode, jobs):
    a, b = jobs
    pred = Predictor.default(mode)
    got = pred.predict([a, a, b])
    assert got.jobs == ("resnet50-b64-fp32#1", "resnet50-b64-fp32#2", "gpt2_small-b8-bf16")
    assert got.slowdown[0] == got.slowdown[1] and got.interval[0] == got.interval[1]
    assert got.solo_iteration_ms[:2] == (a.iteration_ms, a.iteration_ms)
    # the same set with the job under a name the model was not trained on, times the job's own training offset
    x = a.with_(name="never-trained")
    raw = pred.predict([x, x, b]).slowdown
    factor = pred.model.job_factors([a.name, a.name + "#2"])
    assert factor[0] == factor[1]
    assert got.slowdown[0] == pytest.approx(max(raw[0] * factor[0], 0), rel=1e-12)
    # two equal profiles loaded apart are copies too; a pair of copies is a pair of identical jobs
    pair = pred.predict([a, JobProfile.from_json(A)])
    assert pair.jobs == ("resnet50-b64-fp32#1", "resnet50-b64-fp32#2") and pair.slowdown[0] == pair.slowdown[1] > 1


@pytest.mark.parametrize("mode", ["mps", "timeslice"])
def test_predict_many_and_rank_partners_agree_with_predict_on_copies(mode, jobs):
    a, b = jobs
    pred = Predictor.default(mode)
    df = pred.predict_many([[a, b], [a, a], [b, a, a], [a]])
    assert list(df["job"]) == ["resnet50-b64-fp32", "gpt2_small-b8-bf16", "resnet50-b64-fp32#1", "resnet50-b64-fp32#2",
                               "gpt2_small-b8-bf16", "resnet50-b64-fp32#1", "resnet50-b64-fp32#2", "resnet50-b64-fp32"]
    np.testing.assert_allclose(df["slowdown"].to_numpy()[2:4], pred.predict([a, a]).slowdown, rtol=1e-6)
    np.testing.assert_allclose(df["slowdown"].to_numpy()[4:7], pred.predict([b, a, a]).slowdown, rtol=1e-6)
    ranked = pred.rank_partners(a, [b, a]).set_index("partner")
    assert set(ranked.index) == {"gpt2_small-b8-bf16", "resnet50-b64-fp32#2"}
    assert ranked.loc["resnet50-b64-fp32#2", "job_slowdown"] == pytest.approx(pred.predict([a, a]).slowdown[0], rel=1e-6)


def test_pack_places_copies_as_distinct_jobs(jobs):
    a, b = jobs
    pred = Predictor.default("mps")
    pl = pred.pack([a, a, a, b], n_gpus=2, max_per_gpu=2)
    placed = sorted(j for g in pl.gpus for j in g)
    assert placed == ["gpt2_small-b8-bf16", "resnet50-b64-fp32#1", "resnet50-b64-fp32#2", "resnet50-b64-fp32#3"]
    assert pl.placed == 4 and not pl.queued
    # the same as placing renamed twins of the job (the instance names), value for value
    twins = pred.pack(as_instances([a, a, a, b]), n_gpus=2, max_per_gpu=2)
    assert twins.gpus == pl.gpus and twins.throughput == pl.throughput


def test_observations_of_copies_are_observations_of_the_job(jobs):
    a, b = jobs
    pred = Predictor.default("mps")
    seen = pred.observe([Observation((a, a), (1.5, 1.6))])
    assert list(seen.offsets) == [a.name] and seen.offsets[a.name].observations == 2
    assert seen.predict([a, b]).observations == (2, 0)
    assert seen.predict([a, a]).observations == (2, 2)
    with pytest.raises(ValueError, match="two different jobs named"):
        Observation((a, a.with_(iteration_ms=a.iteration_ms * 2)), (1.5, 1.6))


def test_colopred_predict_answers_for_two_copies(capsys):
    assert main(["predict", str(A), str(A), "--mode", "mps", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [j["name"] for j in out["jobs"]] == ["resnet50-b64-fp32#1", "resnet50-b64-fp32#2"]
    assert out["jobs"][0]["slowdown"] == out["jobs"][1]["slowdown"] > 1 and out["throughput"] == pytest.approx(
        2 / out["jobs"][0]["slowdown"])


def _request(tmp_path, doc):
    path = tmp_path / "req.json"
    path.write_text(json.dumps({"schema": "colopred.placement_request", "mode": "mps", **doc}))
    return path


def test_a_pack_request_with_copies_places_them(tmp_path, capsys):
    req = _request(tmp_path, {"jobs": [{"profile": str(A), "copies": 3}, {"profile": str(B)}], "n_gpus": 2,
                              "limits": {"max_per_gpu": 2}})
    assert main(["pack", str(req), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert sorted(j for g in out["gpus"] for j in g["jobs"]) == ["gpt2_small-b8-bf16", "resnet50-b64-fp32#1",
                                                                 "resnet50-b64-fp32#2", "resnet50-b64-fp32#3"]
    # the same profile listed three times is the same request
    same = _request(tmp_path, {"jobs": [{"profile": str(A)}, {"profile": str(A)}, {"profile": str(B)}, {"profile": str(A)}],
                               "n_gpus": 2, "limits": {"max_per_gpu": 2}})
    assert main(["pack", str(same), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["throughput"] == pytest.approx(out["throughput"]) and again["placed"] == 4
    # a running copy is named by its instance; observed may name the job or a copy
    running = _request(tmp_path, {"jobs": [{"profile": str(A), "copies": 2}, {"profile": str(B)}],
                                  "gpus": [{"name": "g0", "running": ["resnet50-b64-fp32#2"]}, {"name": "g1"}],
                                  "observed": [{"jobs": ["resnet50-b64-fp32", "resnet50-b64-fp32#2"], "slowdowns": [1.6, 1.7]}]})
    assert main(["pack", str(running), "--json"]) == 0
    g0 = json.loads(capsys.readouterr().out)["gpus"][0]
    assert "resnet50-b64-fp32#2" in g0["jobs"]


@pytest.mark.parametrize("doc, message", [
    ({"jobs": [{"profile": str(A), "copies": 2}], "gpus": [{"name": "g0", "running": ["resnet50-b64-fp32"]}]},
     "gpus[0].running: job 'resnet50-b64-fp32' is given as 2 copies (resnet50-b64-fp32#1, resnet50-b64-fp32#2): name the copy"),
    ({"jobs": [{"profile": str(A), "copies": 0}], "n_gpus": 1}, "jobs[0].copies must be an integer ≥ 1, not 0"),
    ({"jobs": [{"profile": str(A), "copies": 1.5}], "n_gpus": 1}, "jobs[0].copies must be an integer"),
    ({"jobs": [{"profile": str(A), "copies": 5000}], "n_gpus": 1}, "jobs[0].copies 5000 is more than 1024"),
    ({"job": {"profile": str(A), "copies": 2}, "candidates": [{"profile": str(B)}]}, "job.copies: only the jobs of a pack request"),
    ({"jobs": [{"profile": str(A)}, {"profile": str(B), "name": "resnet50-b64-fp32"}], "n_gpus": 1},
     "job name 'resnet50-b64-fp32' is given to two different profiles"),
])
def test_bad_copies_in_a_request_are_one_line_naming_the_field(tmp_path, capsys, doc, message):
    req = _request(tmp_path, doc)
    assert main(["pack" if "jobs" in doc else "rank", str(req)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"colopred: error: {req}: ") and message in err and "\n" not in err


def test_a_rank_request_may_hold_the_jobs_own_profile_as_a_candidate(tmp_path, capsys):
    req = _request(tmp_path, {"job": {"profile": str(A)}, "candidates": [{"profile": str(A)}, {"profile": str(B)}]})
    assert main(["rank", str(req), "--json"]) == 0
    partners = {r["partner"] for r in json.loads(capsys.readouterr().out)["partners"]}
    assert partners == {"resnet50-b64-fp32#2", "gpt2_small-b8-bf16"}


def test_estimator_treats_a_copy_as_its_job_in_training(jobs):
    """Training rows of copies (JOB#1, JOB#2, as records of copies name them) are rows of the job: one offset, one
    trained job, the same model as rows named by the job."""
    from colopred.research.evaluation import new_model

    rng = np.random.default_rng(0)
    a, b = jobs
    profiles = [a, b, a.with_(name="c", iteration_ms=a.iteration_ms * 1.3), b.with_(name="d", iteration_ms=b.iteration_ms * 0.8)]
    sets = np.array([[0, 1], [0, 2], [1, 3], [2, 3], [0, 3], [1, 2], [0, 0], [2, 2]] * 3)
    X, set_of, pos = feature_matrix(profile_matrix(profiles), sets)
    y = 1.2 + rng.random(len(X))
    names = np.array([profiles[sets[s, p]].name for s, p in zip(set_of, pos)], dtype=object)
    copies = names.copy()
    for r in range(len(sets)):  # the copies of sets [0, 0] and [2, 2] by their instance names
        if sets[r, 0] == sets[r, 1]:
            rows = np.flatnonzero(set_of == r)
            copies[rows] = [f"{names[i]}#{k + 1}" for k, i in enumerate(rows)]
    groups = np.array([{"resnet50-b64-fp32": "r", "c": "r", "gpt2_small-b8-bf16": "g", "d": "g"}[job_of(n)] for n in names])
    m1 = new_model("mps", job_offset_weight=1.0).fit(X, y, groups=groups, jobs=names)
    m2 = new_model("mps", job_offset_weight=1.0).fit(X, y, groups=groups, jobs=copies)
    assert m1.job_log_offsets_ == m2.job_log_offsets_ and m1.trained_jobs_ == m2.trained_jobs_ == frozenset(names)
    np.testing.assert_array_equal(m1.predict(X, jobs=names), m2.predict(X, jobs=copies))
