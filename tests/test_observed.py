"""Measured collocations fed back (``Predictor.observe``, ``colopred predict --observed``, a request's ``observed``):
each observed job's predictions move by exp(k/(k + n₀)·r) toward what was measured, everywhere the predictor predicts,
and nowhere else; and the script that chooses n₀ prefers full trust for a pure per-job offset and none for pure noise."""

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from colopred import Observation
from colopred.constants import OBSERVED_OFFSET_SHARE, OBSERVED_PRIOR_WEIGHT, SLOWDOWN_FLOOR
from colopred.profile import JobProfile
from colopred.runtime.predictor import Predictor
from colopred.schema import problems

from .conftest import DATA, load_study
from .test_cli import run
from .test_placement_cli import NAMES, PROFILES


@pytest.fixture(scope="module")
def jobs():
    return [JobProfile.from_json(PROFILES / f"{n}.json") for n in NAMES]


@pytest.fixture(scope="module")
def mps():
    return Predictor.default("mps")


def test_full_trust_reproduces_the_observation_and_none_leaves_the_model(jobs, mps):
    a, b, c = jobs[:3]
    raw = mps.predict([a, b])
    seen = Observation((a, b), (1.9, 1.6))
    exact = mps.observe([seen], prior_weight=0).predict([a, b])
    assert exact.slowdown == pytest.approx((1.9, 1.6))
    assert exact.observations == (1, 1) and raw.observations is None
    # the interval moves with the prediction, its log half-widths times ρ = √((1 − w)²q + (1 − q)(1 + w²/k)):
    # here w = 1, k = 1, so ρ = √(2(1 − q)) — one observation's own scatter replaces the offset's
    rho = math.sqrt(2 * (1 - OBSERVED_OFFSET_SHARE["mps"]))
    for (lo, hi), (lo0, hi0), s, s0 in zip(exact.interval, raw.interval, exact.slowdown, raw.slowdown):
        assert math.log(hi / s) == pytest.approx(rho * math.log(hi0 / s0))
        assert math.log(s / lo) == pytest.approx(rho * math.log(s0 / lo0))
    assert np.allclose(mps.observe([seen], prior_weight=math.inf).predict([a, b]).interval, raw.interval)
    assert mps.observe([seen], prior_weight=math.inf).predict([a, b]).slowdown == pytest.approx(raw.slowdown)
    # a job never observed is left alone, beside an observed one
    other = mps.observe([seen], prior_weight=0).predict([a, c])
    base = mps.predict([a, c])
    assert other.slowdown[1] == pytest.approx(base.slowdown[1]) and other.observations == (1, 0)
    assert other.slowdown[0] == pytest.approx(max(base.slowdown[0] * 1.9 / raw.slowdown[0], SLOWDOWN_FLOOR))
    assert mps.predict([a, b]).slowdown == raw.slowdown  # observe returns a copy: the original is untouched


def test_the_prior_weight_weighs_k_observations_and_observations_pool(jobs, mps):
    a, b, c, d = jobs[:4]
    obs = [Observation((a, b), (1.7, 1.3)), Observation((a, c), (1.2, 1.5)), Observation((a, b, d), (2.5, 1.8, 1.6))]
    sets = [[a, b], [a, c], [a, b, d]]
    p0 = [mps.predict(s).slowdown[0] for s in sets]
    r = np.mean([math.log(o.slowdowns[0] / p) for o, p in zip(obs, p0)])
    lam = 2.0
    got = mps.observe(obs, prior_weight=lam)
    assert got.offsets[a.name].observations == 3
    want = mps.predict([a, d]).slowdown[0] * math.exp(3 / (3 + lam) * r)
    assert got.predict([a, d]).slowdown[0] == pytest.approx(max(want, SLOWDOWN_FLOOR))
    # the interval narrows as observations accumulate (time-slicing: most of the error is the job's offset)
    ts = Predictor.default("timeslice")
    widths = []
    for k in (1, 2, 4):
        p = ts.observe([Observation((a, b), (1.8, 1.6))] * k, prior_weight=lam).predict([a, c])
        widths.append(math.log(p.interval[0][1] / p.interval[0][0]))
    raw_width = math.log(ts.predict([a, c]).interval[0][1] / ts.predict([a, c]).interval[0][0])
    assert raw_width > widths[0] > widths[1] > widths[2]
    # observing in two calls pools: the same as one call with all of them
    twice = mps.observe(obs[:1], prior_weight=lam).observe(obs[1:])
    assert twice.predict([a, d]).slowdown == pytest.approx(got.predict([a, d]).slowdown)
    # the default n₀ is the mode's constant
    assert mps.observe(obs).predict([a, d]).slowdown[0] == pytest.approx(
        max(mps.predict([a, d]).slowdown[0] * math.exp(3 / (3 + OBSERVED_PRIOR_WEIGHT["mps"]) * r), SLOWDOWN_FLOOR))


def test_every_prediction_path_applies_the_same_correction(jobs, mps):
    a, b, c, d, e = jobs
    p = mps.observe([Observation((a, b), (2.2, 1.1)), Observation((c, d), (1.1, 1.9))], prior_weight=0.5)
    sets = [[a, b], [a, c, e], [d, e], [b, c, d, e]]
    many = p.predict_many(sets)
    for i, s in enumerate(sets):
        assert tuple(many[many["set_id"] == i]["slowdown"]) == pytest.approx(p.predict(s).slowdown, rel=1e-6)
    ranked = p.rank_partners(a, [b, c, d, e]).set_index("partner")
    for partner in (b, c, d, e):
        assert ranked.loc[partner.name, "job_slowdown"] == pytest.approx(p.predict([a, partner]).slowdown[0], rel=1e-6)
    assert not np.allclose(many["slowdown"], mps.predict_many(sets)["slowdown"])
    placed = p.pack([a, b, c, d], n_gpus=2, max_per_gpu=2)
    assert placed.placed == 4


def test_an_observed_job_alone_is_still_exactly_one(jobs, mps):
    """An observation shifts a job's predictions beside others; alone nothing shares its GPU, whatever was observed."""
    a, b = jobs[:2]
    p = mps.observe([Observation((a, b), (3.0, 3.0))], prior_weight=0.0)
    many = p.predict_many([[a], [a, b]])
    assert many["slowdown"].iloc[0] == 1.0 and many["slowdown"].iloc[1] > mps.predict([a, b]).slowdown[0]


def test_bad_observations_are_refused_in_one_line(jobs, mps):
    a, b = jobs[:2]
    with pytest.raises(ValueError, match="2 jobs has 1 slowdowns"):
        Observation((a, b), (1.5,))
    with pytest.raises(ValueError, match="positive"):
        Observation((a, b), (1.5, float("nan")))
    with pytest.raises(ValueError, match=r"at least|2 to"):
        Observation((a,), (1.5,))
    with pytest.raises(ValueError, match="prior_weight"):
        mps.observe([Observation((a, b), (1.5, 1.2))], prior_weight=-1)


def _observations(tmp_path, entries):
    f = tmp_path / "seen.json"
    f.write_text(json.dumps({"schema": "colopred.observations", "observations": entries}))
    return f


def test_predict_cli_reads_observations_of_its_mode_only(tmp_path, capsys, jobs):
    files = [str(PROFILES / f"{n}.json") for n in NAMES[:2]]
    (tmp_path / "c.json").write_text((PROFILES / f"{NAMES[2]}.json").read_text())
    seen = _observations(tmp_path, [
        {"mode": "mps", "jobs": [NAMES[0], "c.json"], "slowdowns": [3.0, 1.2]},  # a name given, a file beside
        {"mode": "timeslice", "jobs": NAMES[:2], "slowdowns": [9.0, 9.0]}])
    code, out, _ = run(capsys, "predict", *files, "--mode", "mps", "--observed", seen, "--json")
    assert code == 0
    got = json.loads(out)
    c = JobProfile.from_json(tmp_path / "c.json")
    want = Predictor.default("mps").observe([Observation((jobs[0], c), (3.0, 1.2))]).predict(jobs[:2])
    assert [j["slowdown"] for j in got["jobs"]] == pytest.approx(want.slowdown)
    assert [j["observations"] for j in got["jobs"]] == [1, 0]  # the time-slicing entry is not this mode's
    assert problems(got, "prediction") == [] and problems(json.loads(seen.read_text()), "observations") == []
    code, out, _ = run(capsys, "predict", *files, "--mode", "mps", "--observed", seen)
    assert code == 0 and "shifted by 1 measured collocation" in out


@pytest.mark.parametrize("entries, problem", [
    ([{"mode": "mps", "jobs": ["nobody", NAMES[1]], "slowdowns": [1.5, 1.2]}], "neither a job given here nor a profile file"),
    ([{"mode": "mps", "jobs": NAMES[:2], "slowdowns": [1.5, 0]}], "slowdowns[1] must be more than 0"),
    ([{"mode": "mps", "jobs": NAMES[:3], "slowdowns": [1.5, 1.2]}], "3 jobs has 2 slowdowns"),
    ([{"mode": "both", "jobs": NAMES[:2], "slowdowns": [1.5, 1.2]}], "mode must be one of"),
])
def test_predict_cli_refuses_a_bad_observations_file_in_one_line(tmp_path, capsys, entries, problem):
    files = [str(PROFILES / f"{n}.json") for n in NAMES[:2]]
    seen = _observations(tmp_path, entries)
    code, out, err = run(capsys, "predict", *files, "--mode", "mps", "--observed", seen)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and str(seen) in err and problem in err, err


def test_a_request_s_observed_collocations_move_rank_and_refuse_unknown_jobs(tmp_path, capsys, jobs):
    req = {"schema": "colopred.placement_request", "mode": "mps", "job": {"profile": str(PROFILES / f"{NAMES[0]}.json")},
           "candidates": [{"profile": str(PROFILES / f"{n}.json")} for n in NAMES[1:]]}
    f = tmp_path / "rank.json"
    f.write_text(json.dumps(req))
    code, out, _ = run(capsys, "rank", f, "--json")
    before = {r["partner"]: r for r in json.loads(out)["partners"]}
    req["observed"] = [{"jobs": [NAMES[0], NAMES[1]], "slowdowns": [4.0, 4.0]}]
    f.write_text(json.dumps(req))
    code, out, _ = run(capsys, "rank", f, "--json")
    assert code == 0
    after = {r["partner"]: r for r in json.loads(out)["partners"]}
    w = 1 / (1 + OBSERVED_PRIOR_WEIGHT["mps"])  # one observation: the pair itself, so s' = ŝ^(1 − w)·4^w
    for col in ("job_slowdown", "partner_slowdown"):
        assert after[NAMES[1]][col] == pytest.approx(before[NAMES[1]][col] ** (1 - w) * 4.0 ** w, rel=1e-6)
    assert after[NAMES[1]]["throughput"] < before[NAMES[1]]["throughput"]  # a measured 4x makes that pair worse
    assert after[NAMES[2]]["partner_slowdown"] == pytest.approx(before[NAMES[2]]["partner_slowdown"])  # not observed
    req["observed"] = [{"jobs": [NAMES[0], "stranger"], "slowdowns": [1.5, 1.5]}]
    f.write_text(json.dumps(req))
    code, out, err = run(capsys, "rank", f)
    assert code == 2 and "observed[0].jobs[1]: no job named 'stranger' in this request" in err


def _rows(offsets, noise, n=12, seed=1):
    """Rows of target_rows.csv's shape: each job's log(s/p) = its offset + noise."""
    rng = np.random.default_rng(seed)
    out = []
    for j, off in enumerate(offsets):
        pred = 1.5 + rng.random(n)
        s = pred * np.exp(off + noise * rng.standard_normal(n))
        out.append(pd.DataFrame({"mode": "mps", "held_out": f"arch{j}", "job": f"arch{j}-b1", "slowdown": s, "pred": pred,
                                 "lo": pred / 1.1, "hi": pred * 1.1, "split": "development"}))
    return pd.concat(out, ignore_index=True)


def test_the_shrinkage_study_trusts_a_pure_offset_and_ignores_pure_noise():
    study = load_study("dev_observed_shrinkage")
    offset = _rows([0.2, -0.15, 0.1, -0.3], noise=0.0)
    table = study.score_table(offset, draws=5)
    assert study.choose(table) == {"mps": 0.0}
    at0 = table[(table["prior_weight"] == 0) & (table["k"] == 1)]["slowdown_mape_pct"].iloc[0]
    assert at0 == pytest.approx(0.0, abs=1e-9)  # a constant offset is removed exactly by one observation
    noise = _rows([0, 0, 0, 0, 0, 0], noise=0.1)
    assert study.choose(study.score_table(noise, draws=5)) == {"mps": math.inf}
    # q: all offset when the rows do not scatter, none when the jobs have no offset
    assert study.offset_share(offset.assign(slowdown=offset["slowdown"] * np.exp(0.001 * np.sin(np.arange(len(offset))))))["mps"] > 0.99
    assert study.offset_share(noise)["mps"] < 0.1
    # a job with k rows or fewer is not scored at k
    few = _rows([0.1], noise=0.0, n=2)
    assert study.observed_log_offsets(few, 2).shape == (2, study.DRAWS) and np.isnan(study.observed_log_offsets(few, 2)).all()


RELABEL_CHUNK = "h100-c23m-21"  # MPS sets measured three times each in one run


def test_table_writes_one_observation_per_measured_set_that_predict_reads(tmp_path, capsys):
    from colopred.measurement.harness.reader import read_windows, slowdown_table

    camp = DATA / "relabel" / RELABEL_CHUNK
    out = tmp_path / "obs" / "seen.json"
    out.parent.mkdir()
    code, _, err = run(capsys, "table", camp, "--observations", out, "--profiles", DATA / "profiles" / "ncu")
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert problems(doc, "observations") == []
    table = slowdown_table(read_windows([camp]))
    means = table.groupby(["mode", "set", "job"])["slowdown"].mean()
    assert len(doc["observations"]) == table.groupby(["mode", "set"]).ngroups < table["window_id"].nunique()
    for o in doc["observations"]:
        names = [JobProfile.from_json(out.parent / j).name for j in o["jobs"]]  # profile files relative to the file
        assert o["slowdowns"] == pytest.approx([means[(o["mode"], "+".join(sorted(names)), n)] for n in names], rel=1e-5)
    # predict finds every observed job's profile through the file, and moves the jobs it observed
    first = doc["observations"][0]
    target = out.parent / first["jobs"][0]
    partner = next(p for p in (DATA / "profiles" / "ncu").glob("*.json") if p.name not in {Path(j).name for j in first["jobs"]})
    code, text, err = run(capsys, "predict", target, partner, "--mode", "mps", "--observed", out, "--json")
    assert code == 0, err
    assert json.loads(text)["jobs"][0]["observations"] >= 1


def test_table_observations_refuse_a_job_without_a_profile_and_keep_the_old_file(tmp_path, capsys):
    out = tmp_path / "seen.json"
    out.write_text("precious")
    code, text, err = run(capsys, "table", DATA / "relabel" / RELABEL_CHUNK, "--observations", out, "--profiles", tmp_path)
    assert code == 2 and text == "" and len(err.strip().splitlines()) == 1
    assert "no profile of job" in err and str(tmp_path) in err
    assert out.read_text() == "precious" and sorted(p.name for p in tmp_path.iterdir()) == ["seen.json"]


def _probe_rows(offsets, n_other=4):
    """Rows of jobs j0, j1, ... in both modes, each of log offset ``offsets[i]`` on every row: one pair beside the
    probe 'good' (measured exactly as the offset says), one beside 'bad' (measured with the opposite offset), and
    ``n_other`` rows beside other jobs."""
    rows = []
    for mode in ("timeslice", "mps"):
        for i, b in enumerate(offsets):
            job = f"j{i}"
            sets = ([f"good+{job}", f"bad+{job}"] + [f"{job}+x{k}+y{k}" for k in range(n_other)])
            for s in sets:
                pred = 1.5
                off = -b if s.startswith("bad+") else b
                rows.append({"mode": mode, "held_out": f"arch{i}", "job": job, "set": s, "slowdown": pred * math.exp(off),
                             "pred": pred, "lo": pred / 1.2, "hi": pred * 1.2, "split": "development"})
    return pd.DataFrame(rows)


def test_the_probe_study_chooses_the_probe_whose_pair_carries_the_job_s_offset():
    study = load_study("probe_study")
    rows = _probe_rows([0.2, -0.1, 0.15, -0.25])
    table = study.candidate_table(rows, min_jobs=4)
    assert set(table["probe"]) == {"good", "bad"} and study.choose(table) == "good"
    good = table[(table["probe"] == "good") & (table["mode"] == "timeslice")].iloc[0]
    w = 1 / (1 + OBSERVED_PRIOR_WEIGHT["timeslice"])  # one observation, shrunk toward the model
    assert good["rows"] == 4 * 5  # the probe's own pair is not scored; the other pair and the other rows are
    assert good["mape_probed_pct"] < good["mape_none_pct"]
    # with the prediction times exp(w·b), a row measured at exp(b) keeps |exp(-(1 - w)·b) - 1| of its error, the
    # pair beside 'bad' (measured at exp(-b)) |exp((1 + w)·b) - 1|
    offsets = np.array([0.2, -0.1, 0.15, -0.25])
    other = np.abs(np.exp(-(1 - w) * offsets) - 1)
    bad_pair = np.abs(np.exp((1 + w) * offsets) - 1)
    assert good["mape_probed_pct"] == pytest.approx(100 * (4 * other.mean() + bad_pair.mean()) / 5, rel=1e-9)
    # a probe measured beside fewer development jobs than the floor is no candidate
    fewer = rows.assign(set=rows["set"].replace({"good+j3": "good2+j3"}))
    assert "good" not in set(study.candidate_table(fewer, min_jobs=4)["probe"])


def test_the_shipped_reference_profiles_are_the_measured_ones_of_each_source():
    """The calibration reference's profiles inside the package are byte for byte the dataset's (no edited copy), one
    per profile source, each a valid profile of its source; a job that does not ship has none."""
    from colopred.constants import CALIBRATION_REFERENCE_JOB
    from colopred.runtime.reference import shipped_reference_profile
    from colopred.runtime.sources import PROFILE_SOURCES

    for source in PROFILE_SOURCES:
        shipped = shipped_reference_profile(CALIBRATION_REFERENCE_JOB, source)
        assert shipped.read_bytes() == (DATA / "profiles" / source / f"{CALIBRATION_REFERENCE_JOB}.json").read_bytes()
        p = JobProfile.from_json(shipped)
        assert p.source == source and p.name == CALIBRATION_REFERENCE_JOB
    assert shipped_reference_profile("resnet18-b64-fp32", "ncu") is None
    with pytest.raises(ValueError, match="profile source"):
        shipped_reference_profile(CALIBRATION_REFERENCE_JOB, "nsys")


def test_calibrate_s_shift_of_a_gpm_profile_uses_the_shipped_gpm_reference_and_warns_once():
    """calibrate's printed shift for a job with a GPM profile: predicted by the GPM model beside the shipped GPM
    reference profile, its warning (the GPM model's error under MPS) said once, not once per prediction inside."""
    import warnings

    from colopred.cli.measure_commands import _moved
    from colopred.constants import CALIBRATION_REFERENCE_JOB
    from colopred.runtime.reference import shipped_reference_profile

    files = {"dqn-b32-fp32": DATA / "profiles" / "nvml" / "dqn-b32-fp32.json",
             CALIBRATION_REFERENCE_JOB: shipped_reference_profile(CALIBRATION_REFERENCE_JOB, "nvml")}
    profiles = [JobProfile.from_json(f) for f in files.values()]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        said = _moved(files, "dqn-b32-fp32", CALIBRATION_REFERENCE_JOB, "mps", 1.0)
        predicted = Predictor.for_profiles("mps", profiles).predict(profiles).slowdown[0]
    assert len([w for w in caught if "GPM profiles" in str(w.message)]) == 2  # _moved's one, and this test's own
    factor = float(said.rsplit("x ", 1)[1])
    assert f"predicted {predicted:.2f}x" in said and 0 < factor < 1  # measured 1.0 below the prediction: moved down
