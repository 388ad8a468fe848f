"""Prediction.explain and `colopred predict --explain`: XGBoost's per-feature contributions, carried through the model's
composition into the slowdown, add up to what the model predicts, and read as words."""

import json
import math
import re
import subprocess
import sys

import numpy as np
import pytest

from colopred import JobProfile, Observation, Predictor
from colopred.constants import HOST_BOUND_BUSY
from colopred.profile import job_of
from colopred.runtime.explain import explain_rows, feature_words, tree_contributions
from colopred.runtime.features import FEATURES, feature_matrix, model_features, profile_matrix
from colopred.runtime.predictor import Prediction

from .conftest import DATA, ROOT

NCU = DATA / "profiles" / "ncu"
NAMES = ("resnet18-b64-fp32", "gpt2_small-b8-bf16", "lstm_lm-b64-fp32", "alexnet-b128-fp32")


@pytest.fixture(scope="module")
def jobs():
    return [JobProfile.from_json(NCU / f"{n}.json") for n in NAMES]


@pytest.fixture(scope="module", params=[("mps", "ncu"), ("timeslice", "ncu"), ("mps", "nvml")])
def predictor(request):
    return Predictor.default(*request.param)


def _profiles(pred, jobs):
    if pred.profile_source == "ncu":
        return jobs
    return [JobProfile.from_json(DATA / "profiles" / "nvml" / f"{p.name}.json") for p in jobs]


def test_the_contributions_and_the_bias_are_the_trees_raw_prediction(predictor, jobs):
    """φ₀ + Σ φ_i of each row is the point trees' raw output, recomputed through XGBoost's own margin prediction."""
    import xgboost as xgb

    P = profile_matrix(_profiles(predictor, jobs))
    X, _, _ = feature_matrix(P, np.array([[0, 1, -1], [1, 2, 3], [3, 0, 2]]))
    phi, phi0 = tree_contributions(predictor.model, X)
    assert phi.shape == (len(X), len(predictor.model.features_))
    Xm = X[:, [FEATURES.index(f) for f in predictor.model.features_]].astype(np.float32)
    raw = predictor.model.point_.get_booster().predict(xgb.DMatrix(Xm, missing=np.nan), output_margin=True)
    assert np.allclose(phi.sum(axis=1) + phi0, raw, rtol=0, atol=1e-5)
    assert np.ptp(phi0) < 1e-6  # the bias is the trees' expectation: one value for every row


@pytest.mark.filterwarnings("ignore::UserWarning")  # the GPM model says its error
def test_the_parts_add_up_to_the_predicted_slowdown(predictor, jobs):
    profiles = _profiles(predictor, jobs)
    for members in ([0, 1], [1, 2, 3], [0, 0, 3]):  # a pair, a triple, two copies of a job
        p = predictor.predict([profiles[i] for i in members])
        why = p.explain()
        assert [j.job for j in why.jobs] == list(p.jobs)
        for j, s in zip(why.jobs, p.slowdown):
            assert j.slowdown == s
            assert math.isclose(1 + sum(c.slowdown for c in j.contributions), s, rel_tol=1e-6)
            top = j.top(3)
            assert len(top) == 3 and all(abs(a.slowdown) >= abs(b.slowdown) for a, b in zip(top, top[1:]))
            assert math.isclose(1 + sum(c.slowdown for c in top) + j.average + j.rest(3), s, rel_tol=1e-6)


def test_a_tree_feature_takes_the_step_of_the_slowdown_in_proportion_to_its_contribution(jobs):
    """Recomputed by hand for an MPS pair: s = 1 − c + (s_base − 1 + c)·e^f; a feature's share of s − s₀ is φ_i/(f − φ₀)."""
    pred = Predictor.default("mps")
    m = pred.model
    X, _, _ = feature_matrix(profile_matrix(jobs), np.array([[0, 1]]))
    parts = explain_rows(m, X, [jobs[0].name, jobs[1].name])[0]  # rows position by position: the set's first job first
    phi, phi0 = tree_contributions(m, X)
    f = phi0[0] + phi[0].sum()
    base = m.baseline(X)[0]
    host_bound = m.offset_classes_ == "host_bound" and X[0, FEATURES.index("t_busy")] < HOST_BOUND_BUSY
    c = 1.0 if host_bound else m.offset_  # a host-bound target takes c = 1
    s, s0 = 1 - c + (base - 1 + c) * math.exp(f), 1 - c + (base - 1 + c) * math.exp(phi0[0])
    by_name = {p.feature: p for p in parts}
    for i, name in enumerate(m.features_):
        if phi[0, i] != 0:
            assert math.isclose(by_name[name].slowdown, (s - s0) * phi[0, i] / (f - phi0[0]), rel_tol=1e-4, abs_tol=1e-9)
            assert by_name[name].raw == pytest.approx(phi[0, i])
    assert by_name["trees:bias"].slowdown == pytest.approx(s0 - base)
    assert sum(p.slowdown for p in parts if p.feature.startswith("baseline:")) == pytest.approx(base - 1)


def test_offsets_of_training_and_of_observations_are_parts_of_their_own(jobs):
    ts = Predictor.default("timeslice")
    a, _, c, _ = jobs
    trained = {job_of(n) for n in ts.model.job_log_offsets_}
    assert c.name in trained  # lstm_lm takes its own offset from training
    seen = ts.observe([Observation((a, c), (3.5, 2.5))])
    p = seen.predict([a, c])
    for j, s in zip(p.explain().jobs, p.slowdown):
        names = {x.feature for x in j.contributions}
        assert "offset:observed" in names
        assert ("offset:training" in names) == (job_of(j.job) in trained)
        assert math.isclose(1 + sum(x.slowdown for x in j.contributions), s, rel_tol=1e-6)


def test_names_are_words():
    for mode in ("timeslice", "mps"):
        for f in model_features(mode):
            for n in (2, 3):
                words = feature_words(f, n)
                assert "_" not in words and f not in words and re.fullmatch(r"[a-zA-Z0-9 ()'\-]+", words), (f, words)
    assert feature_words("co_mean_dram_demand", 2) == "the partner's DRAM share"
    assert feature_words("co_mean_dram_demand", 3) == "the co-runners' mean DRAM share"
    assert feature_words("t_log_iter_ms") == "its own iteration time"


def test_the_text_reads_in_words(jobs):
    p = Predictor.default("mps").predict(jobs[:3])
    text = p.explain(4).text()
    assert not re.search(r"\b(t|co)_[a-z_]+", text), text  # no column names
    for name in p.jobs:
        assert f"{name}: slowdown" in text
    assert text.count("the trees' average correction") == 3


def test_only_a_predictors_prediction_explains_itself_and_k_is_checked(jobs):
    bare = Prediction("mps", ("a", "b"), (1.2, 1.3), ((1.1, 1.3), (1.2, 1.4)), (10.0, 20.0), True)
    with pytest.raises(ValueError, match="no model"):
        bare.explain()
    p = Predictor.default("mps").predict(jobs[:2])
    with pytest.raises(ValueError, match="positive"):
        p.explain(0)
    assert p == Prediction(**{k: getattr(p, k) for k in ("mode", "jobs", "slowdown", "interval", "solo_iteration_ms",
                                                         "fits_memory", "memory_gib", "observations")})  # equality ignores it


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "colopred", "predict", str(NCU / f"{NAMES[0]}.json"), str(NCU / f"{NAMES[1]}.json"),
                           "--mode", "mps", *args], capture_output=True, text=True, cwd=ROOT)


def test_predict_explain_prints_and_json_carries_it():
    import jsonschema

    r = _cli("--explain")
    assert r.returncode == 0, r.stderr
    assert "why (each job's largest contributions to its slowdown):" in r.stdout and "the trees' average correction" in r.stdout
    r = _cli("--json", "--explain", "2")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, json.loads((ROOT / "colopred" / "schemas" / "prediction.schema.json").read_text()))
    for job in doc["jobs"]:
        why = job["explanation"]
        assert len(why["contributions"]) == 2
        total = 1 + sum(c["contribution"] for c in why["contributions"]) + why["average"] + why["rest"]
        assert math.isclose(total, job["slowdown"], rel_tol=1e-6)
    plain = json.loads(_cli("--json").stdout)
    assert all("explanation" not in j for j in plain["jobs"])
    r = _cli("--explain", "--server", "http://127.0.0.1:1")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--server" in r.stderr
