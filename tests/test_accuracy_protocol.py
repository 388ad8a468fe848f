"""Issue 23: the intervals' set-size widening, the locked split, the noise floor and the profiling-cost records."""

import json
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from colopred.profile import JobProfile
from colopred.research.profiling_cost import profiling_cost_table
from colopred.research.protocol import (_pays_off_on_repeats, coverage_spread, is_locked, locked_architectures, noise_floor,
                                       pays_off_repeats)
from colopred.runtime.estimator import SlowdownModel
from colopred.runtime.features import FEATURES

from .conftest import DATA, ROOT, load_study, shipped_dataset

pytestmark = [pytest.mark.data, pytest.mark.usefixtures("few_trees")]  # the mechanics hold for any forest

NO_SLOWDOWN_SCALE = {"saturating": 0.0, "host_bound": 0.0}


@pytest.fixture(scope="module")
def timeslice():
    return shipped_dataset().for_mode("timeslice")


@pytest.mark.parametrize("scale", ["beyond_size", None])
@pytest.mark.parametrize("exponents", [None, {"saturating": 1.0, "host_bound": 0.25}])
def test_interval_widens_for_sets_larger_than_any_in_training(timeslice, exponents, scale):
    """The conformal half-width is w for sets of a trained size and w·g^a beyond (m the largest trained set), w and a
    those of the target job's class (a: constants.INTERVAL_SIZE_EXPONENTS of ncu and the mode, or size_exponents):
    ``beyond_size`` g = (n − 1)/(m − 1), so a model trained on pairs gives triples 2^a and four-job sets 3^a wider
    log intervals; ``beyond_load`` (the default) g = max(1, B/(m − 1)), B the co-runners' summed busy fraction, so a
    triple whose co-runners are busy less than one saturating job's worth gets no growth at all."""
    from colopred.constants import HOST_BOUND_BUSY, INTERVAL_SIZE_EXPONENTS

    pairs = timeslice[timeslice["n_jobs"] == 2]
    m = SlowdownModel(mode="timeslice", size_exponents=exponents, interval_scale=scale).fit(
        pairs[list(FEATURES)], pairs["slowdown"], groups=pairs["arch"])
    assert m.max_set_size_ == 2 and m.interval_scale_ == (scale or "beyond_load") and not m.quantile_floor_
    assert m.interval_classes_ == "host_bound" and all(0 < w < 1 for w in m.conformal_class_log_widths_)
    a = exponents or INTERVAL_SIZE_EXPONENTS["ncu"]["timeslice"]
    assert m.size_exponents_ == (a["saturating"], a["host_bound"])
    light = 0
    for n in (2, 3, 4):
        by_busy = timeslice[timeslice["n_jobs"] == n].sort_values("t_busy")
        # the least and the most busy targets, and those of the least busy co-runners
        rows = pd.concat([by_busy.head(20), by_busy.tail(20), by_busy.sort_values("co_sum_busy").head(10)])
        hb = rows["t_busy"].to_numpy() < HOST_BOUND_BUSY
        assert hb.any() and not hb.all()  # both classes among the rows
        w = np.where(hb, m.conformal_class_log_widths_[1], m.conformal_class_log_widths_[0])
        p, iv = m.predict_with_interval(rows)
        c_sat, c_hb = m.slowdown_exponents_  # constants.INTERVAL_SLOWDOWN_EXPONENTS of ncu and the mode
        g = np.full(len(rows), n - 1.0) if scale == "beyond_size" else np.maximum(rows["co_sum_busy"].to_numpy(), 1.0)
        light += int((g == 1).sum()) if n > 2 else 0
        factor = np.where(hb, g ** a["host_bound"] * p ** c_hb, g ** a["saturating"] * p ** c_sat)
        if n > 2:  # no job named: each is served as a job the model was not trained on (unseen_widths_, κ)
            factor *= np.where(hb, m.unseen_widths_[1], m.unseen_widths_[0])
        assert np.allclose(np.log(iv[:, 1] / p), w * factor, rtol=1e-9) and np.allclose(np.log(p / iv[:, 0]), w * factor, rtol=1e-9)
    assert (light > 0) is (scale is None)  # idle co-runners of a larger set: no growth under beyond_load only


def test_an_unseen_job_in_a_larger_set_than_trained_takes_its_classs_width_factor(timeslice, tmp_path):
    """κ (unseen_widths, constants.INTERVAL_UNSEEN_WIDTHS by default) multiplies the log half-width of a target job
    the model was not trained on (a name not among fit's jobs, or no name) in a set larger than any in training, by
    its class's factor; a trained job's interval and every interval of a trained size stay as they were. The trained
    jobs and κ travel in the manifest; a manifest without the factors reads as κ = 1; κ < 1 is refused."""
    from colopred.constants import HOST_BOUND_BUSY, INTERVAL_UNSEEN_WIDTHS
    from colopred.runtime.manifest import load_model, save_model

    pairs = timeslice[timeslice["n_jobs"] == 2]
    kappa = {"saturating": 1.8, "host_bound": 1.3}
    fit = dict(groups=pairs["arch"], jobs=pairs["job"])
    wide = SlowdownModel(mode="timeslice", unseen_widths=kappa).fit(pairs[list(FEATURES)], pairs["slowdown"], **fit)
    plain = SlowdownModel(mode="timeslice", unseen_widths=dict.fromkeys(kappa, 1.0)).fit(pairs[list(FEATURES)], pairs["slowdown"], **fit)
    assert SlowdownModel(mode="timeslice").fit(pairs[list(FEATURES)], pairs["slowdown"]).unseen_widths_ == tuple(
        INTERVAL_UNSEEN_WIDTHS["ncu"]["timeslice"][c] for c in ("saturating", "host_bound"))
    assert wide.trained_jobs_ == frozenset(pairs["job"])
    triples = timeslice[timeslice["n_jobs"] == 3]
    X, names = triples[list(FEATURES)].to_numpy(), triples["job"].to_numpy()
    hb = triples["t_busy"].to_numpy() < HOST_BOUND_BUSY
    unseen = np.array([f"new-{j}" for j in names], dtype=object)

    def log_width(model, jobs):
        p, iv = model.predict_with_interval(X, jobs=jobs)
        return np.log(iv[:, 1] / p)

    k = np.where(hb, kappa["host_bound"], kappa["saturating"])
    assert np.allclose(log_width(wide, unseen), k * log_width(plain, unseen), rtol=1e-9)
    assert np.allclose(log_width(wide, None), k * log_width(plain, None), rtol=1e-9)
    assert np.allclose(log_width(wide, names), log_width(plain, names), rtol=1e-12)  # trained jobs: unchanged
    assert np.allclose(wide.predict(X, jobs=unseen), plain.predict(X, jobs=unseen))  # the point prediction never moves
    Xp = pairs[list(FEATURES)].to_numpy()
    unseen_pairs = np.array([f"new-{j}" for j in pairs["job"]], dtype=object)
    assert np.allclose(wide.predict_interval(Xp, jobs=unseen_pairs), plain.predict_interval(Xp, jobs=unseen_pairs))
    path = tmp_path / "m-timeslice.json"
    save_model(path, wide, "timeslice", max_set_size=2, jobs=["not", "these"])
    man = json.loads(path.read_text())
    assert man["interval_unseen_widths"] == kappa and man["jobs"] == sorted(set(pairs["job"]))
    loaded, _ = load_model(path)
    assert loaded.trained_jobs_ == wide.trained_jobs_
    for jobs in (unseen, names):
        assert np.allclose(loaded.predict_interval(X, jobs=jobs), wide.predict_interval(X, jobs=jobs), rtol=1e-9)
    del man["interval_unseen_widths"]
    path.write_text(json.dumps(man))
    old, _ = load_model(path)
    assert old.unseen_widths_ == (1.0, 1.0)
    assert np.allclose(old.predict_interval(X, jobs=unseen), plain.predict_interval(X, jobs=unseen), rtol=1e-9)
    with pytest.raises(ValueError, match="unseen_widths"):
        SlowdownModel(mode="timeslice", unseen_widths={"saturating": 0.9, "host_bound": 1.0}).fit(Xp, pairs["slowdown"])


def test_the_load_growth_is_one_up_to_a_trained_sets_load_and_counts_a_missing_busy_fraction_as_none():
    """``beyond_load``: σ = max(1, B/(m − 1))^a with B = co_sum_busy; a row whose co-runners are busy no more than the
    m − 1 of a trained set (every calibration row) keeps σ = 1, and a missing B (a GPM profile without it) adds
    nothing; ``beyond_size`` grows with the count whatever B."""
    from colopred.runtime.estimator import interval_scale

    X = np.zeros((5, len(FEATURES)))
    X[:, FEATURES.index("n_jobs")] = [2, 3, 3, 4, 4]
    X[:, FEATURES.index("co_sum_busy")] = [1.0, 0.7, 2.0, 3.0, np.nan]
    load = interval_scale(X, "beyond_load", max_set_size=2, exponent=0.5)
    assert np.allclose(load, [1.0, 1.0, np.sqrt(2.0), np.sqrt(3.0), 1.0])
    assert np.allclose(interval_scale(X, "beyond_load", max_set_size=3, exponent=1.0), [1.0, 1.0, 1.0, 1.5, 1.0])
    assert np.allclose(interval_scale(X, "beyond_size", max_set_size=2, exponent=0.5), np.sqrt([1.0, 2.0, 2.0, 3.0, 3.0]))
    assert (interval_scale(X, "beyond_load", max_set_size=None) == 1).all()
    with pytest.raises(ValueError, match="unknown interval scale"):
        interval_scale(X, "beyond_sets", max_set_size=2)


def test_size_exponents_travel_in_the_manifest_and_old_manifests_read_as_one_exponent(timeslice, tmp_path):
    """A saved model's manifest records interval_size_exponents and the loaded model predicts the same intervals of
    triples from a model of pairs; a manifest without the field (written before it) reads as
    constants.INTERVAL_SIZE_EXPONENT for both classes; a size_exponents lacking a class is refused."""
    from colopred.constants import INTERVAL_SIZE_EXPONENT
    from colopred.runtime.manifest import load_model, save_model

    pairs = timeslice[timeslice["n_jobs"] == 2]
    triples = timeslice[timeslice["n_jobs"] == 3][list(FEATURES)].to_numpy()
    exps = {"saturating": 1.5, "host_bound": 0.0}
    m = SlowdownModel(mode="timeslice", size_exponents=exps).fit(pairs[list(FEATURES)], pairs["slowdown"], groups=pairs["arch"])
    path = tmp_path / "m-timeslice.json"
    save_model(path, m, "timeslice", max_set_size=2)
    man = json.loads(path.read_text())
    assert man["interval_size_exponents"] == exps
    loaded, _ = load_model(path)
    assert np.allclose(loaded.predict_interval(triples), m.predict_interval(triples), rtol=1e-9)
    del man["interval_size_exponents"]
    path.write_text(json.dumps(man))
    old, _ = load_model(path)
    assert old.size_exponents_ == (INTERVAL_SIZE_EXPONENT, INTERVAL_SIZE_EXPONENT)
    assert not np.allclose(old.predict_interval(triples), m.predict_interval(triples))
    with pytest.raises(ValueError, match="size_exponents"):
        SlowdownModel(mode="timeslice", size_exponents={"saturating": 1.0}).fit(pairs[list(FEATURES)], pairs["slowdown"])


def test_the_slowdown_scale_makes_each_rows_width_its_class_width_times_its_prediction_to_the_c(timeslice, tmp_path):
    """slowdown_exponents c (default constants.INTERVAL_SLOWDOWN_EXPONENTS): a row's log half-width is w·g^a·p̂^c with w its class's conformal width and g its growth,
    calibrated on the scores |log residual| / p̂^c (so the class's widths differ from c = 0); the manifest carries c
    and the loaded model gives the same intervals; a manifest without it reads as 0; a c lacking a class is refused."""
    from colopred.constants import HOST_BOUND_BUSY, INTERVAL_SIZE_EXPONENTS
    from colopred.runtime.manifest import load_model, save_model

    pairs = timeslice[timeslice["n_jobs"] == 2]
    c = {"saturating": 0.5, "host_bound": -1.0}
    m = SlowdownModel(mode="timeslice", slowdown_exponents=c).fit(pairs[list(FEATURES)], pairs["slowdown"], groups=pairs["arch"])
    plain = SlowdownModel(mode="timeslice", slowdown_exponents={"saturating": 0.0, "host_bound": 0.0}).fit(
        pairs[list(FEATURES)], pairs["slowdown"], groups=pairs["arch"])
    assert m.slowdown_exponents_ == (0.5, -1.0) and plain.slowdown_exponents_ == (0.0, 0.0)
    assert np.allclose(m.predict(pairs[list(FEATURES)]), plain.predict(pairs[list(FEATURES)]))  # points unchanged
    assert not np.allclose(m.conformal_class_log_widths_, plain.conformal_class_log_widths_)
    a = INTERVAL_SIZE_EXPONENTS["ncu"]["timeslice"]
    rows = timeslice[timeslice["n_jobs"] == 3][list(FEATURES)]
    hb = rows["t_busy"].to_numpy() < HOST_BOUND_BUSY
    p, iv = m.predict_with_interval(rows)
    g = np.maximum(rows["co_sum_busy"].to_numpy(), 1.0)  # the beyond_load growth of a triple from pairs
    w = np.where(hb, m.conformal_class_log_widths_[1] * g ** a["host_bound"] * p ** -1.0,
                 m.conformal_class_log_widths_[0] * g ** a["saturating"] * p ** 0.5)
    w *= np.where(hb, m.unseen_widths_[1], m.unseen_widths_[0])  # no job named: served as unseen in a larger set
    assert hb.any() and not hb.all()
    assert np.allclose(np.log(iv[:, 1] / p), w, rtol=1e-9) and np.allclose(np.log(p / iv[:, 0]), w, rtol=1e-9)
    path = tmp_path / "m-timeslice.json"
    save_model(path, m, "timeslice", max_set_size=2)
    man = json.loads(path.read_text())
    assert man["interval_slowdown_exponents"] == c
    loaded, _ = load_model(path)
    assert np.allclose(loaded.predict_interval(rows), iv, rtol=1e-9)
    del man["interval_slowdown_exponents"]
    path.write_text(json.dumps(man))
    assert load_model(path)[0].slowdown_exponents_ == (0.0, 0.0)  # a manifest written before the field: no scale
    save_model(tmp_path / "p-timeslice.json", plain, "timeslice", max_set_size=2)
    assert "interval_slowdown_exponents" not in json.loads((tmp_path / "p-timeslice.json").read_text())
    with pytest.raises(ValueError, match="slowdown_exponents"):
        SlowdownModel(mode="timeslice", slowdown_exponents={"host_bound": 1.0}).fit(pairs[list(FEATURES)], pairs["slowdown"])


def test_conformal_folds_of_one_per_group_calibrate_on_leave_one_group_out_residuals(timeslice):
    """With a fold per architecture the conformal width is the ⌈(n+1)·0.9⌉/n quantile of |log s − log ŝ| where each
    ŝ comes from a point model fitted without the row's architecture; fewer folds give another width; fewer than two
    folds is refused, and the setting survives sklearn's clone."""
    from sklearn.base import clone

    pairs = timeslice[(timeslice["n_jobs"] == 2) & timeslice["arch"].isin(["alexnet", "resnet18", "gpt2_small", "lstm_lm"])]
    X, s, arch = pairs[list(FEATURES)].to_numpy(), pairs["slowdown"].to_numpy(), pairs["arch"].to_numpy()
    m = SlowdownModel(mode="timeslice", conformal_folds=100, slowdown_exponents=NO_SLOWDOWN_SCALE).fit(X, s, groups=arch)
    resid = np.empty(len(s))
    for a in np.unique(arch):
        te = arch == a
        point = SlowdownModel(mode="timeslice", interval=False, calibrate=False).fit(X[~te], s[~te])
        resid[te] = np.log(s[te]) - np.log(point.predict(X[te]))
    q = math.ceil((len(s) + 1) * 0.9) / len(s)
    assert m.conformal_log_width_ == pytest.approx(float(np.quantile(np.abs(resid), q)), rel=1e-6)
    two = SlowdownModel(mode="timeslice", conformal_folds=2, slowdown_exponents=NO_SLOWDOWN_SCALE).fit(X, s, groups=arch)
    assert two.conformal_log_width_ != pytest.approx(m.conformal_log_width_)
    assert clone(m).get_params()["conformal_folds"] == 100
    with pytest.raises(ValueError, match="at least 2"):
        SlowdownModel(mode="timeslice", conformal_folds=1).fit(X, s, groups=arch)


def test_host_bound_classes_calibrate_each_class_on_its_own_residuals(timeslice, tmp_path):
    """Mondrian calibration: under ``interval_classes="host_bound"`` the width of each class (target busy < 0.8 or not)
    is the ⌈(n_c+1)·0.9⌉/n_c quantile of that class's leave-one-group-out scores |log residual| / p̂^c (c the class's
    slowdown exponent, constants.INTERVAL_SLOWDOWN_EXPONENTS), each row's interval takes its class's width times its
    p̂^c, and a class of too few rows takes the pooled width; the widths survive saving and loading."""
    from colopred.constants import HOST_BOUND_BUSY, MIN_CLASS_CALIBRATION_ROWS
    from colopred.runtime.manifest import load_model, save_model

    pairs = timeslice[(timeslice["n_jobs"] == 2) & timeslice["arch"].isin(["alexnet", "resnet18", "gpt2_small", "lstm_lm", "wide_deep"])]
    X, s, arch = pairs[list(FEATURES)].to_numpy(), pairs["slowdown"].to_numpy(), pairs["arch"].to_numpy()
    hb = pairs["t_busy"].to_numpy() < HOST_BOUND_BUSY
    assert hb.sum() >= MIN_CLASS_CALIBRATION_ROWS and (~hb).sum() >= MIN_CLASS_CALIBRATION_ROWS
    m = SlowdownModel(mode="timeslice", conformal_folds=100, interval_classes="host_bound").fit(X, s, groups=arch)
    c_sat, c_hb = m.slowdown_exponents_
    assert c_hb != 0  # the shipped time-slicing host-bound scale: the scores are normalised
    resid = np.empty(len(s))
    for a in np.unique(arch):
        te = arch == a
        point = SlowdownModel(mode="timeslice", interval=False, calibrate=False).fit(X[~te], s[~te])
        p_te = point.predict(X[te])
        resid[te] = np.abs(np.log(s[te]) - np.log(p_te)) / p_te ** np.where(hb[te], c_hb, c_sat)

    def width(r):
        return float(np.quantile(r, math.ceil((len(r) + 1) * 0.9) / len(r)))

    sat_w, hb_w = m.conformal_class_log_widths_
    assert sat_w == pytest.approx(width(resid[~hb]), rel=1e-6) and hb_w == pytest.approx(width(resid[hb]), rel=1e-6)
    assert m.conformal_log_width_ == pytest.approx(width(resid), rel=1e-6)
    assert hb_w > sat_w  # host-bound jobs are predicted worse
    p, iv = m.predict_with_interval(X)
    assert np.allclose(np.log(iv[:, 1] / p), np.where(hb, hb_w * p ** c_hb, sat_w * p ** c_sat), rtol=1e-9)
    # saved and loaded: the same intervals
    save_model(tmp_path / "m.json", m, "timeslice")
    loaded, man = load_model(tmp_path / "m.json")
    assert man["interval_classes"] == "host_bound" and man["conformal_class_log_widths"]["host_bound"] == pytest.approx(hb_w)
    assert np.allclose(loaded.predict_with_interval(X)[1], iv)
    # one host-bound row too few: that class takes the pooled width
    keep = ~hb | (np.cumsum(hb) < MIN_CLASS_CALIBRATION_ROWS)
    few = SlowdownModel(mode="timeslice", conformal_folds=100, interval_classes="host_bound").fit(X[keep], s[keep], groups=arch[keep])
    assert few.conformal_class_log_widths_[1] == few.conformal_log_width_ != few.conformal_class_log_widths_[0]
    with pytest.raises(ValueError, match="unknown interval classes"):
        SlowdownModel(mode="timeslice", interval_classes="by_size").fit(X, s, groups=arch)


def test_the_locked_split_is_the_rules_draw_and_every_locked_architecture_was_measured(timeslice):
    """datasets/h100/locked_split.json is what research/lock_split.py's seeded rule draws, and each locked architecture
    has measured sets (so the locked figure tests it)."""
    r = subprocess.run([sys.executable, str(ROOT / "research" / "lock_split.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    locked = locked_architectures(DATA)
    doc = json.loads((DATA / "locked_split.json").read_text())
    assert sorted(doc["locked"] + doc["development"]) == doc["architectures"] and len(locked) == 5
    lk = is_locked(timeslice, locked)
    assert 0 < lk.mean() < 1
    for arch in locked:
        assert (timeslice["arch"] == arch).any()
    assert not timeslice.loc[~lk, "arch"].isin(locked).any()


def test_the_lock_check_redraws_over_the_architectures_of_the_draw(tmp_path):
    """Architectures profiled after the lock join development: the check redraws over the architectures the file
    records (here a second generative architecture, which moves the seeded draw over all of them), and fails on a
    locked list that is not that draw or on an architecture of the draw left without a profile."""
    doc = json.loads((DATA / "locked_split.json").read_text())
    (tmp_path / "profiles" / "ncu").mkdir(parents=True)
    for arch in doc["architectures"] + ["vae", "pixelcnn"]:
        (tmp_path / "profiles" / "ncu" / f"{arch}-b8-fp32.json").write_text("{}")
    check = [sys.executable, str(ROOT / "research" / "lock_split.py"), "--check", "--data", str(tmp_path)]
    draw = load_study("lock_split").draw
    assert draw(doc["architectures"] + ["vae", "pixelcnn"]) != doc["locked"]
    (tmp_path / "locked_split.json").write_text(json.dumps(doc))
    assert subprocess.run(check, capture_output=True, text=True).returncode == 0
    bad = dict(doc, locked=sorted(doc["locked"][1:] + [doc["development"][0]]))
    (tmp_path / "locked_split.json").write_text(json.dumps(bad))
    r = subprocess.run(check, capture_output=True, text=True)
    assert r.returncode == 1 and "is not the rule's draw" in r.stderr
    (tmp_path / "locked_split.json").write_text(json.dumps(doc))
    next((tmp_path / "profiles" / "ncu").glob(f"{doc['locked'][0]}-*.json")).unlink()
    r = subprocess.run(check, capture_output=True, text=True)
    assert r.returncode == 1 and "without a profile" in r.stderr


def test_the_locked_leave_arch_figure_predicts_every_locked_row_from_rows_without_its_jobs_architecture(timeslice):
    """protocol.locked_folds on leave-arch: every row of the locked sets is tested once (so δ and pays-off see whole
    sets), a locked job's from all development rows, a development job's from the development sets without its
    architecture; the set-size splits test all locked rows from all development rows."""
    from colopred.research.protocol import locked_folds

    df = timeslice.reset_index(drop=True)
    locked = locked_architectures(DATA)
    lk = is_locked(df, locked)
    tr, te = np.flatnonzero(~lk), np.flatnonzero(lk)
    folds = list(locked_folds(df, "leave-arch", locked, tr, te))
    seen = np.concatenate([rows for rows, _ in folds])
    assert sorted(seen) == list(range(len(te)))  # each locked row once
    for rows, fit_rows in folds:
        assert set(fit_rows) <= set(tr)
        for a in set(df["arch"].to_numpy()[te[rows]]):
            assert not df["set_archs"].iloc[fit_rows].map(lambda s: a in s).any()
        if set(df["arch"].to_numpy()[te[rows]]) <= set(locked):
            assert len(fit_rows) == len(tr)
    assert len(folds) > 1 and any(len(f) < len(tr) for _, f in folds)  # development jobs beside locked ones were tested
    ((rows, fit_rows),) = locked_folds(df, "pairs->triples", locked, tr, te)
    assert len(rows) == len(te) and np.array_equal(fit_rows, tr)


def test_noise_floor_is_the_error_of_the_mean_of_the_other_repeats(timeslice):
    """noise_floor: |mean of the other measurements of the same (set, job) − this one| / this one; NaN if measured once."""
    floor = noise_floor(timeslice)
    counts = timeslice.groupby(["set", "job"])["slowdown"].transform("count")
    assert floor[counts == 1].isna().all() and floor[counts > 1].notna().all()
    key = timeslice[counts == counts.max()].iloc[0]
    same = timeslice[(timeslice["set"] == key["set"]) & (timeslice["job"] == key["job"])]
    for i, row in same.iterrows():
        others = same["slowdown"].drop(i)
        assert floor[i] == pytest.approx(abs(others.mean() - row["slowdown"]) / row["slowdown"], rel=1e-12)


def test_pays_off_ceiling_compares_each_window_with_the_mean_of_the_set_s_other_windows(timeslice):
    """pays_off_repeats: per row, whether the mean throughput of its set's other windows agrees with its window's on
    throughput > 1 (NaN for a set measured once); sets near break-even disagree with their own repeats."""
    agree = pays_off_repeats(timeslice)
    windows = timeslice.groupby("window_id")[["set", "throughput"]].first()
    per_set = windows.groupby("set")["throughput"]
    for wid, row in windows.sample(60, random_state=0).iterrows():
        got = agree[timeslice["window_id"] == wid]
        assert got.nunique(dropna=False) == 1  # one value per window
        others = per_set.get_group(row["set"]).drop(wid)
        if others.empty:
            assert got.isna().all()
        else:
            assert got.iloc[0] == float((others.mean() > 1) == (row["throughput"] > 1))
    assert 0 < agree.mean() < 1  # measured repeats disagree on some sets: the ceiling is below 100%
    # colopred's agreement on the same windows: a prediction of the measured slowdowns agrees on every window
    exact = _pays_off_on_repeats(timeslice.assign(pred=timeslice["slowdown"]), agree.to_numpy())
    assert exact["colopred_pays_off_on_repeated_pct"] == 100.0
    assert exact["pays_off_ceiling_pct"] == pytest.approx(agree.groupby(timeslice["window_id"]).first().mean() * 100)


def test_coverage_spread_is_the_spread_of_coverage_over_draws_of_architectures(timeslice):
    """coverage_spread: 0 when every architecture is covered alike, the binomial-like spread of a draw when they
    differ, computed on the measured rows with made-up intervals that cover some architectures and miss others."""
    rows = timeslice[["arch", "slowdown"]].copy()
    archs = sorted(rows["arch"].unique())
    k = 5
    # every row covered: no spread
    same = rows.assign(lo=rows["slowdown"] * 0.9, hi=rows["slowdown"] * 1.1)
    assert coverage_spread(same, k) == 0.0
    # half of the architectures never covered, the other half always: the draws' coverage varies
    missed = set(archs[::2])
    half = same.assign(lo=np.where(rows["arch"].isin(missed), rows["slowdown"] * 1.05, same["lo"]))
    sd = coverage_spread(half, k)
    assert 10 < sd < 50
    # the spread of one draw of all architectures but one is smaller than that of five
    assert coverage_spread(half, len(archs) - 1) < sd
    assert math.isnan(coverage_spread(half, len(archs)))  # nothing to draw from
    # a fixed seed repeats, another seed moves it little
    assert coverage_spread(half, k) == sd
    assert coverage_spread(half, k, seed=1) == pytest.approx(sd, rel=0.1)


def test_profiling_cost_table_reads_what_was_recorded():
    """ncu: the timing run and the ncu run of each job from the session logs, the ncu run as each ncu profile records it
    (meta.ncu_wall_s, to the log's 0.1 s); GPM: the gap from the previous GPM profile of its run, none for a run's first."""
    t = profiling_cost_table(DATA).set_index("job")
    ncu = {p.stem: JobProfile.from_json(p) for p in (DATA / "profiles" / "ncu").glob("*.json")}
    assert set(t.index) == set(ncu) and len(t) == 73
    for name, p in ncu.items():
        assert t.loc[name, "ncu_run_s"] == pytest.approx(p.meta["ncu_wall_s"], abs=0.051)
    assert np.allclose(t["ncu_total_s"], t["timing_run_s"] + t["ncu_run_s"])
    gpm = t["gpm_s"].dropna()
    assert len(gpm) >= 40 and gpm.between(1, 120).all()
    assert t.loc["resnet18-b64-fp32", "timing_run_s"] == 14.4  # "resnet18-b64-fp32: solo iteration 16.28 ms, ... (14.4 s)"
    from colopred.research.profiling_cost import gpm_traced

    traced = gpm_traced(DATA / "profiling_cost")  # "tcn_lm-b16-fp32: 207 kernels per iteration, ... from a solo timeline"
    assert "tcn_lm-b16-fp32" in traced and "alexnet-b16-fp32" not in traced
    counters_only = gpm.index[~gpm.index.isin(sorted(traced))]
    assert (t.loc[counters_only, "ncu_total_s"] > gpm[counters_only]).all()  # GPM counters alone always cost less
    # the timeline's own process, from the session logs: "[  31.7s] timeline alexnet-b1024-fp32: rc=0 25 s"
    assert t["timeline_s"].notna().all() and t.loc["alexnet-b1024-fp32", "timeline_s"] == 25.0
    expect = t["gpm_s"] + t["timeline_s"].where(~t.index.isin(sorted(traced)), 0.0)  # a traced GPM run holds its timeline
    assert np.allclose(t["gpm_total_s"].dropna(), expect.dropna())
    assert t.loc["tcn_lm-b16-fp32", "gpm_total_s"] == t.loc["tcn_lm-b16-fp32", "gpm_s"] == 34.0
    assert np.allclose(t["ncu_over_gpm"].dropna(), (t["ncu_total_s"] / t["gpm_total_s"]).dropna())


def test_shipped_gpm_profiles_are_what_the_profiler_makes_of_their_counters():
    """scripts/reprofile_nvml.py --check: every GPM profile's fields (SM fill included) follow from its recorded counters."""
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "reprofile_nvml.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_paired_splits_hold_out_the_same_thing_in_both_tables(timeslice):
    """paired_splits(train, test): a leave-arch fold trains on no set of the held-out architecture and tests the rows of
    the other table whose job is of it (each row once); the set-size splits train on the smaller sets of one table, test the larger of the other;
    one fold per architecture of the test table."""
    from colopred.research.evaluation import paired_splits

    sets = sorted(timeslice["set"].unique())
    train = timeslice[timeslice["set"].isin(sets[::2])].reset_index(drop=True)
    test = timeslice[timeslice["set"].isin(sets[1::2])].reset_index(drop=True)
    folds = list(paired_splits(train, test, "leave-arch"))
    assert [n for n, _, _ in folds] == sorted(test["arch"].unique())
    for arch, tr, te in folds:
        holds_tr, holds_te = (t["set_archs"].map(lambda a: arch in a).to_numpy() for t in (train, test))
        assert np.array_equal(tr, ~holds_tr) and np.array_equal(te, holds_te & (test["arch"] == arch).to_numpy())
    assert sum(te.sum() for _, _, te in folds) == len(test)  # every row tested once, in its own architecture's fold
    ((_, tr, te),) = paired_splits(train, test, "pairs+triples->quads")
    assert set(train["n_jobs"][tr]) == {2, 3} and set(test["n_jobs"][te]) == {4}
    assert (~tr).sum() == (train["n_jobs"] == 4).sum() and te.sum() == (test["n_jobs"] == 4).sum()
    assert list(paired_splits(train[train["n_jobs"] == 3], test, "pairs->triples")) == []  # nothing to train on


def test_machine_guarded_predictions_never_learn_from_the_test_rows_machine(timeslice):
    """evaluation.machine_guarded: every model that predicts rows of one machine was fitted on rows of the split's
    training side measured on other machines only, and every row a split tests gets a prediction."""
    from colopred.measurement.harness.reader import machine_key
    from colopred.research.evaluation import machine_guarded

    df = timeslice[timeslice["n_jobs"] <= 3].reset_index(drop=True)
    seen = []

    def record(train, test):
        seen.append((set(machine_key(train)), set(machine_key(test)), set(train["n_jobs"]), set(test["n_jobs"])))
        return np.ones(len(test))

    pred = machine_guarded(df, df, "pairs->triples", record)
    assert np.isnan(pred).sum() == (df["n_jobs"] == 2).sum()  # the pairs are trained on, never tested
    assert len(seen) == machine_key(df[df["n_jobs"] == 3]).nunique() > 1
    for train_gpus, test_gpus, train_sizes, test_sizes in seen:
        assert len(test_gpus) == 1 and not (train_gpus & test_gpus)
        assert train_sizes == {2} and test_sizes == {3}


def test_pair_additivity_composes_the_measured_pair_means(timeslice):
    """research/pair_additivity.py: a job's additive composition in a triple is 1 + Σ (s_jk − 1) over the mean measured
    slowdowns of its pairs with each co-runner, the multiplicative one their product; only rows whose pairs were all
    measured appear."""
    mod = load_study("pair_additivity")
    t = mod.composed(timeslice)
    assert len(t) > 100 and set(t["n_jobs"]) <= {3, 4}
    means = timeslice.groupby(["set", "job"])["slowdown"].mean()
    for r in t.sample(5, random_state=0).itertuples():
        co = [k for k in r.set.split("+") if k != r.job]
        s_pairs = [means[("+".join(sorted([r.job, k])), r.job)] for k in co]
        assert r.additive == pytest.approx(1 + sum(s - 1 for s in s_pairs))
        assert r.multiplicative == pytest.approx(math.prod(s_pairs))
        assert r.slowdown == pytest.approx(means[(r.set, r.job)])


def test_coverage_by_class_counts_the_rows_inside_their_interval_per_class():
    """coverage_by_class: per (mode, split), the share of rows with lo ≤ slowdown ≤ hi over all rows and per class of
    target job (busy < 0.8 host-bound), the interval's ends counting as inside."""
    from colopred.research.evaluation import coverage_by_class

    pred = pd.DataFrame({"mode": "mps", "split": ["a"] * 4 + ["b"] * 2, "slowdown": [1.0, 2.0, 3.0, 4.0, 1.5, 1.5],
                         "lo": [0.5, 2.5, 3.0, 1.0, 1.0, 1.6], "hi": [2.0, 3.0, 3.5, 3.9, 1.5, 2.0],
                         "t_busy": [0.5, 0.9, 0.79, 1.0, 0.8, 0.2]})
    c = coverage_by_class(pred).set_index(["split", "jobs"])
    assert c.loc[("a", "all jobs"), "coverage_pct"] == 50.0 and c.loc[("a", "all jobs"), "rows"] == 4
    assert c.loc[("a", "host-bound"), "coverage_pct"] == 100.0 and c.loc[("a", "host-bound"), "rows"] == 2
    assert c.loc[("a", "saturating"), "coverage_pct"] == 0.0
    assert c.loc[("b", "saturating"), "coverage_pct"] == 100.0 and c.loc[("b", "host-bound"), "coverage_pct"] == 0.0
    assert set(c["mode"]) == {"mps"}


def test_compose_scales_the_interference_and_its_objective_is_the_squared_log_error(timeslice, tmp_path):
    """estimator.compose: s = 1 − c + (s_base − 1 + c)·e^f (c = 1: s_base·e^f); the XGBoost objective's gradient is the
    derivative of ½(log ŝ − log s)² in f (checked by finite differences), its hessian positive; a model fitted with
    c < 1 predicts by that formula, saves and loads with it, and c outside (0, 1] is refused."""
    from colopred.runtime.estimator import _compose_objective, compose
    from colopred.runtime.manifest import load_model, save_model

    base, f = np.array([1.0, 1.5, 2.2, 3.0]), np.array([0.2, -0.1, 0.0, 0.3])
    assert np.allclose(compose(base, f, 1.0), base * np.exp(f))
    assert np.allclose(compose(base, f, 0.25), 0.75 + (base - 0.75) * np.exp(f))
    assert compose(np.array([2.0]), np.array([0.0]), 0.1)[0] == pytest.approx(2.0)  # f = 0 is the baseline
    log_s = np.log(np.array([1.1, 1.4, 2.5, 3.5]))
    grad, hess = _compose_objective(base, 0.25)(log_s, f)

    def loss(ff):
        return 0.5 * (np.log(compose(base, ff, 0.25)) - log_s) ** 2

    eps = 1e-6
    assert np.allclose(grad, (loss(f + eps) - loss(f - eps)) / (2 * eps), rtol=1e-5, atol=1e-9)
    assert (hess > 0).all()

    pairs = timeslice[timeslice["n_jobs"] == 2].iloc[:300]
    X, s = pairs[list(FEATURES)].to_numpy(), pairs["slowdown"].to_numpy()
    m = SlowdownModel(mode="timeslice", offset=0.25, offset_classes="none").fit(X, s)
    trees = m.point_.get_booster().inplace_predict(X[:, m._cols])
    assert np.allclose(m.predict(X), compose(m.baseline(X), trees, 0.25))
    assert mape_of(m.predict(X), s) < mape_of(m.baseline(X), s)  # the trees improve on the baseline they start from
    save_model(tmp_path / "m.json", m, "timeslice")
    loaded, man = load_model(tmp_path / "m.json")
    assert man["tree_target_offset"] == 0.25 and loaded.offset_ == 0.25 and loaded.offset_classes_ == "none"
    assert np.allclose(loaded.predict(X), m.predict(X), rtol=1e-9)
    for bad in (0.0, 1.5):
        with pytest.raises(ValueError, match="offset must be in"):
            SlowdownModel(mode="timeslice", offset=bad).fit(X, s)


def test_no_prediction_says_sharing_speeds_a_job_up(timeslice):
    """constants.SLOWDOWN_FLOOR: estimator.compose never returns a slowdown below 1, whichever its offset; a model that
    never saw resnet18 predicts its input-bound job beside others at 1 or more, where its trees alone would say it
    runs faster (the case the floor is for: the check fails without it)."""
    from colopred.constants import SLOWDOWN_FLOOR
    from colopred.runtime.estimator import compose

    assert SLOWDOWN_FLOOR == 1.0
    assert compose(np.array([1.2]), np.array([-1.0]), 1.0)[0] == 1.0
    assert compose(np.array([1.1]), np.array([-3.0]), 0.5)[0] == 1.0
    assert compose(np.array([1.5]), np.array([0.1]), 0.5)[0] == pytest.approx(0.5 + np.exp(0.1))  # above it: unchanged
    train = timeslice[~timeslice["set_archs"].map(lambda a: "resnet18" in a)]
    test = timeslice[timeslice["job"] == "resnet18-b64-fp32-loader"]
    m = SlowdownModel(mode="timeslice", interval=False, calibrate=False).fit(train[list(FEATURES)].to_numpy(), train["slowdown"].to_numpy())
    X = test[list(FEATURES)].to_numpy()
    raw = m.baseline(X) * np.exp(m.point_.get_booster().inplace_predict(X[:, m._cols]))  # host-bound target: c = 1
    assert (raw < 1).any()
    assert (m.predict(X) >= 1.0).all()
    assert np.allclose(m.predict(X), np.maximum(raw, 1.0))


def test_arch_curve_trains_on_the_drawn_architectures_and_at_all_of_them_is_the_leave_arch_figure(timeslice):
    """research/arch_curve_study.py: a fold's diverse rows hold only drawn architectures and never the held-out one, its
    volume-matched rows are as many, drawn from every set without it (so other architectures appear); with every other
    architecture drawn both designs are the leave-arch split, and the curve's figure is evaluation's on those rows."""
    from colopred.research.evaluation import out_of_sample

    mod = load_study("arch_curve_study")
    five = {"alexnet", "gin", "lstm_lm", "resnet50", "wide_deep"}
    df = timeslice[timeslice["set_archs"].map(lambda a: set(a) <= five)].reset_index(drop=True)
    rng = np.random.default_rng(0)
    keep = {"alexnet", "resnet50"}
    diverse, matched = mod.training_rows(df, "gin", keep, rng)
    assert diverse.sum() == matched.sum() > 0
    assert df.loc[diverse, "set_archs"].map(lambda a: set(a) <= keep).all()
    assert not df.loc[diverse | matched, "set_archs"].map(lambda a: "gin" in a).any()
    assert df.loc[matched, "set_archs"].map(lambda a: not set(a) <= keep).any()
    table = mod.curve(df, "timeslice", [2], 1, rng)
    full = table[table["architectures_trained"] == 4].set_index("design")["leave_arch_mape_pct"]
    expect = 100 * np.nanmean(np.abs(out_of_sample(df, "leave-arch") - df["slowdown"]) / df["slowdown"])
    assert full["diverse"] == pytest.approx(expect, rel=1e-9) and full["volume-matched"] == pytest.approx(expect, rel=1e-9)
    assert set(table["architectures_trained"]) == {2, 4}


def mape_of(pred, s):
    return float(np.mean(np.abs(pred - s) / s))


@pytest.mark.parametrize("mode", ["timeslice", "mps"])
def test_the_shipped_models_scale_only_saturating_jobs_interference(mode):
    """Each shipped model composes its trees by constants.TREE_TARGET_OFFSET[mode] (< 1) with host-bound targets at
    c = 1; the batched path (predict_many) and the per-set path agree for a set holding both kinds of job, and both
    are compose() of the baseline and the trees with each row's c, times each trained job's own offset factor."""
    from colopred.constants import HOST_BOUND_BUSY, TREE_TARGET_OFFSET
    from colopred.runtime.estimator import compose
    from colopred.runtime.features import feature_frame
    from colopred.runtime.predictor import Predictor

    pr = Predictor.default(mode)
    assert pr.manifest["tree_target_offset"] == TREE_TARGET_OFFSET[mode] < 1
    assert pr.manifest["tree_target_offset_classes"] == "host_bound"
    names = ["resnet18-b16-fp32", "resnet18-b64-fp32", "gpt2_small-b8-bf16", "vgg16-b32-fp32"]
    jobs = [JobProfile.from_json(DATA / "profiles" / "ncu" / f"{n}.json") for n in names]
    busy = np.array([min(j.busy_fraction, 1.0) for j in jobs])
    assert (busy < HOST_BOUND_BUSY).any() and (busy >= HOST_BOUND_BUSY).any()
    p = pr.predict(jobs)
    many = pr.predict_many([jobs])
    assert tuple(many["slowdown"]) == pytest.approx(p.slowdown, rel=1e-9)
    X = feature_frame([jobs])[list(FEATURES)].to_numpy()
    m = pr.model
    c = np.where(X[:, FEATURES.index("t_busy")] < HOST_BOUND_BUSY, 1.0, m.offset_)
    assert (c < 1).any() and (c == 1).any()
    trees = m.point_.get_booster().inplace_predict(X[:, m._cols].astype(np.float32))
    own = np.maximum(compose(m.baseline(X), trees, c) * m.job_factors(names), 1.0)
    assert np.allclose(p.slowdown, own, rtol=1e-6)


def test_dev_size_exponent_recomputes_each_exponents_coverage_exactly(timeslice):
    """research/dev_size_exponent.py scores every a of both growths from one set of predictions made with
    ``beyond_size`` at a = 0.5: its coverage of the triples predicted by a model of pairs at a = 1 (saturating) and
    0 (host-bound) is the coverage of the intervals of a model fitted with those exponents and that growth; its cells
    add up to the pooled coverage; and its rule keeps 0.5 unless another a is closer to 90% by more than a standard
    error."""
    from colopred.constants import HOST_BOUND_BUSY, INTERVAL_SIZE_EXPONENT

    from research.interval_rules import size_exponent as dse
    pairs, triples = timeslice[timeslice["n_jobs"] == 2], timeslice[timeslice["n_jobs"] == 3]
    fit = {"groups": pairs["arch"]}
    half = SlowdownModel(mode="timeslice", size_exponents=dict.fromkeys(("saturating", "host_bound"), INTERVAL_SIZE_EXPONENT),
                         interval_scale="beyond_size")
    half.fit(pairs[list(FEATURES)], pairs["slowdown"], **fit)
    p, iv = half.predict_with_interval(triples[list(FEATURES)])
    pred = triples.assign(mode="timeslice", split="pairs->triples", pred=p, lo=iv[:, 0], hi=iv[:, 1])
    cov = dse.coverage_by_exponent(pred)
    s = triples["slowdown"].to_numpy()
    hb = triples["t_busy"].to_numpy() < HOST_BOUND_BUSY
    chosen = {}
    for scale in dse.SCALES:
        other = SlowdownModel(mode="timeslice", size_exponents={"saturating": 1.0, "host_bound": 0.0}, interval_scale=scale)
        other.fit(pairs[list(FEATURES)], pairs["slowdown"], **fit)
        iv1 = other.predict_interval(triples[list(FEATURES)])
        inside = (s >= iv1[:, 0]) & (s <= iv1[:, 1])
        both = cov[(cov["split"] == "both") & (cov["scale"] == scale)].set_index(["jobs", "a"])["coverage_pct"]
        assert both[("saturating", 1.0)] == pytest.approx(100 * inside[~hb].mean(), abs=1e-9)
        assert both[("host-bound", 0.0)] == pytest.approx(100 * inside[hb].mean(), abs=1e-9)
        assert both[("saturating", 0.0)] < both[("saturating", 2.0)]  # wider intervals cover more
        chosen[scale] = {"timeslice": {"saturating": 1.0, "host_bound": 0.0}}
    cells = dse.cell_coverage(pred, chosen)
    for scale in dse.SCALES:
        c = cells[(cells["scale"] == scale) & (cells["jobs"] == "saturating")]
        pooled = cov[(cov["split"] == "both") & (cov["scale"] == scale)].set_index(["jobs", "a"])["coverage_pct"][("saturating", 1.0)]
        assert c["rows"].sum() == (~hb).sum() and (c["coverage_pct"] * c["rows"]).sum() / c["rows"].sum() == pytest.approx(pooled)
    assert set(cells["co_saturating"]) == {0, 1, 2}
    # hysteresis: the growth in use stays unless the other's objective is lower by more than the bootstrap SE
    chosen_diff = {"beyond_size": {"timeslice": {"saturating": 0.0, "host_bound": 0.0}},
                   "beyond_load": {"timeslice": {"saturating": 2.0, "host_bound": 2.0}}}
    objective = dse.design_objective(dse.cell_coverage(pred, chosen_diff))
    se = dse.objective_difference_se(pred, chosen_diff, draws=200)
    assert 0 < se < abs(objective["beyond_load"] - objective["beyond_size"]) + 5
    flat = {scale: {"timeslice": {"saturating": 0.0, "host_bound": 0.0}} for scale in dse.SCALES}
    assert dse.objective_difference_se(pred, flat, draws=50) == 0  # a = 0: both growths are 1, no spread
    assert dse.choose_scale(pd.Series({"beyond_size": 4.5, "beyond_load": 4.0}), 0.6, "beyond_size") == "beyond_size"
    assert dse.choose_scale(pd.Series({"beyond_size": 4.5, "beyond_load": 4.0}), 0.4, "beyond_size") == "beyond_load"
    assert dse.choose_scale(pd.Series({"beyond_size": 4.5, "beyond_load": 4.0}), 0.6, "beyond_load") == "beyond_load"
    assert dse.choose_scale(pd.Series({"beyond_size": 4.0, "beyond_load": 4.5}), 0.1, "beyond_load") == "beyond_size"
    rows = len(triples)
    table = pd.DataFrame([{"scale": "beyond_load", "mode": "timeslice", "jobs": "saturating", "split": "both", "a": a, "rows": rows,
                           "coverage_pct": c} for a, c in zip(dse.GRID, (70, 80, 85, 89, 91, 99, 100))])
    se = 100 * math.sqrt(0.09 / rows)
    assert se < 4  # 85 -> 89 or 91 is closer to 90 by 4 points
    assert dse.choose(table) == {"beyond_load": {"timeslice": {"saturating": 0.75}}}  # 89 and 91 tie: the smaller a
    assert dse.choose(table.assign(coverage_pct=np.where(table["a"] == 0.5, 88.5, table["coverage_pct"]))) == {
        "beyond_load": {"timeslice": {"saturating": 0.5}}}


@pytest.mark.parametrize("source", ["ncu", "nvml"])
def test_models_of_each_profile_source_widen_beyond_the_trained_size_by_their_own_exponents(source, monkeypatch):
    """evaluation.new_model (what train, evaluate and the studies fit) takes the growth and its exponents of its
    profile source and mode (the shipped ones, and exponents that differ by source), and an explicit interval_scale
    or size_exponents wins."""
    from colopred.constants import INTERVAL_SCALE_OF_SOURCE, INTERVAL_SIZE_EXPONENTS
    from colopred.research import evaluation
    from colopred.research.evaluation import new_model

    for mode in ("timeslice", "mps"):
        m = new_model(mode, source)
        m._resolve()
        want = INTERVAL_SIZE_EXPONENTS[source][mode]
        assert m.size_exponents_ == (want["saturating"], want["host_bound"])
        assert m.interval_scale_ == INTERVAL_SCALE_OF_SOURCE[source]
        m = new_model(mode, source, size_exponents={"saturating": 2.0, "host_bound": 3.0}, interval_scale="none")
        m._resolve()
        assert m.size_exponents_ == (2.0, 3.0) and m.interval_scale_ == "none"
    own = {src: {mode: {"saturating": 0.25 * i, "host_bound": 0.5 + 0.25 * i} for mode in ("timeslice", "mps")}
           for i, src in enumerate(("ncu", "nvml"))}
    monkeypatch.setattr(evaluation, "INTERVAL_SIZE_EXPONENTS", own)
    for mode in ("timeslice", "mps"):
        m = new_model(mode, source)
        m._resolve()
        assert m.size_exponents_ == (own[source][mode]["saturating"], own[source][mode]["host_bound"])


def test_the_reports_interval_sentence_follows_each_sources_growth_and_scale(monkeypatch):
    """report.interval_scaling_text names the growth formula and the non-zero exponents a and c of each profile
    source's models, and says 'not widened' when every a is 0 (the report's model paragraph is built from it)."""
    from colopred.research import report

    zero = {m: {"saturating": 0.0, "host_bound": 0.0} for m in ("timeslice", "mps")}
    monkeypatch.setattr(report, "INTERVAL_SIZE_EXPONENTS", {"ncu": zero, "nvml": {**zero, "mps": {"saturating": 0.0, "host_bound": 0.25}}})
    monkeypatch.setattr(report, "INTERVAL_SLOWDOWN_EXPONENTS", {"ncu": {**zero, "timeslice": {"saturating": 0.0, "host_bound": -1.0}}, "nvml": zero})
    monkeypatch.setattr(report, "INTERVAL_SCALE_OF_SOURCE", {"ncu": "beyond_size", "nvml": "beyond_load"})
    monkeypatch.setattr(report, "INTERVAL_UNSEEN_WIDTHS", {"ncu": {m: {"saturating": 1.0, "host_bound": 1.0} for m in zero},
                                                         "nvml": {**zero, "timeslice": {"saturating": 1.5, "host_bound": 1.0}}})
    ncu, nvml = report.interval_scaling_text("ncu"), report.interval_scaling_text("nvml")
    assert "κ" not in ncu and "κ = 1.5 (timeslice saturating)" in nvml and "host-bound)" not in nvml.split("κ")[1]
    assert "not widened" in ncu and "c = -1 (timeslice host-bound)" in ncu and "a =" not in ncu
    assert "max(1, B/(m − 1))^a" in nvml and "a = 0.25 (mps host-bound)" in nvml and "p̂^c" not in nvml


def test_the_report_counts_the_relabelled_sets_of_each_mode():
    """report.relabel_note: the sets re-measured under relabel/ per mode (a set relabelled in both modes counts in each)."""
    from colopred.research.report import relabel_note

    ds = shipped_dataset()
    r = ds.rows[ds.rows["relabelled"]]
    note = relabel_note(ds)
    for mode, name in (("timeslice", "time-slicing"), ("mps", "MPS")):
        n = r.loc[r["mode"] == mode, "set"].nunique()
        assert n > 0 and f"{n} {name}" in note
    assert relabel_note(shipped_dataset(relabel=False)) == ""


def test_noise_floor_and_development_floor_of_copies_of_one_job():
    """Copies of one job in a set (JOB#1, JOB#2: datasets/h200/campaigns/h200-c2) are told apart: each copy's floor
    compares it with the same copy in its set's other windows, and a split's floors are looked up by instance."""
    from colopred.research.dataset import dataset_from, load_profiles_dir
    from colopred.research.protocol import _dev_floor

    pdir = ROOT / "datasets" / "h200" / "profiles" / "ncu"
    rows = dataset_from(ROOT / "datasets" / "h200" / "campaigns" / "h200-c2", load_profiles_dir(pdir),
                        sorted(pdir.glob("*.json"))).rows
    df = rows[rows["mode"] == "mps"].reset_index(drop=True)
    assert df.duplicated(["window_id", "job"]).any() and not df.duplicated(["window_id", "instance"]).any()
    floor = noise_floor(df)
    key = df[df["instance"].str.endswith("#2") & floor.notna()].iloc[0]
    same = df[(df["set"] == key["set"]) & (df["instance"] == key["instance"])]
    assert same["window_id"].nunique() == len(same) > 1  # one row per window: never its own window's other copy
    for i, row in same.iterrows():
        assert floor[i] == pytest.approx(abs(same["slowdown"].drop(i).mean() - row["slowdown"]) / row["slowdown"], rel=1e-12)
    preds = df.sample(frac=1.0, random_state=0)[["window_id", "job", "instance"]]
    assert np.allclose(_dev_floor(df, preds), floor.loc[preds.index].to_numpy(), equal_nan=True)
