"""Features, shipped models, Predictor API, evaluation splits."""

import json
import shutil
import warnings

import numpy as np
import pandas as pd
import pytest

from colopred.errors import InputError, SchemaError
from colopred.profile import JobProfile
from colopred.research.baselines import busy_analytic
from colopred.research.evaluation import splits
from colopred.runtime.estimator import SlowdownModel
from colopred.runtime.features import FEATURES, feature_frame
from colopred.runtime.predictor import Predictor

from .conftest import DATA, ROOT, shipped_dataset


@pytest.fixture(scope="module")
def profiles():
    return {p.stem: JobProfile.from_json(p) for p in sorted((DATA / "profiles" / "ncu").glob("*.json"))}


@pytest.fixture(scope="module")
def dataset():
    return shipped_dataset()


def test_features_are_permutation_invariant(profiles):
    a, b, c = profiles["resnet18-b64-fp32"], profiles["vgg16-b32-fp32"], profiles["lstm_lm-b64-fp32"]
    f1 = feature_frame([[a, b, c]]).set_index("job")
    f2 = feature_frame([[c, a, b]]).set_index("job")
    assert list(f1.columns[1:]) == list(FEATURES)
    np.testing.assert_allclose(f1.loc[f2.index, list(FEATURES)].to_numpy(), f2[list(FEATURES)].to_numpy())
    r = f1.loc["resnet18-b64-fp32"]
    assert r["co_sum_busy"] == pytest.approx(min(b.busy_fraction, 1) + min(c.busy_fraction, 1))
    assert r["co_max_dram_util"] == pytest.approx(max(b.dram_util_pct, c.dram_util_pct))
    assert r["n_jobs"] == 3
    # any set size, including ones never trained on
    f4 = feature_frame([[a, b, c, profiles["dlrm-b2048-fp32"]]])
    assert len(f4) == 4 and (f4["n_jobs"] == 4).all()


def test_dataset_rows_match_measurements(dataset):
    rows = dataset.rows
    assert {"timeslice", "mps"} <= set(rows["mode"])
    assert (rows["slowdown"] > 0.5).all()
    assert rows["job"].nunique() >= 14 and rows["arch"].nunique() >= 10
    assert len(dataset.data_hash) == 16


def test_dataset_rows_describe_each_job_at_its_solo_baseline(dataset):
    """Each window's members are their profiles re-timed to the solo time its slowdowns divide by."""
    rows = dataset.rows
    prof = dataset.profiles
    kernel_ms = rows["job"].map(lambda j: prof[j].kernel_ms_per_iteration)
    np.testing.assert_allclose(rows["t_busy"], np.minimum(1.0, kernel_ms / rows["solo_ms"]), rtol=1e-9)
    np.testing.assert_allclose(rows["t_log_iter_ms"], np.log(rows["solo_ms"]), rtol=1e-12)
    # a co-runner is described at *its* baseline in the same window
    pairs = rows[rows["n_jobs"] == 2]
    other = pairs.groupby("window_id")["t_busy"].transform("sum") - pairs["t_busy"]
    np.testing.assert_allclose(pairs["co_sum_busy"], other, rtol=1e-9)
    # the profiles' own times, as an untouched profile gives them
    plain = dataset.with_profile_times().rows
    assert not dataset.with_profile_times().retimed and len(plain) == len(rows)
    np.testing.assert_allclose(plain["t_busy"], rows["job"].map(lambda j: min(1.0, prof[j].busy_fraction)), rtol=1e-12)
    assert (plain["slowdown"] == rows["slowdown"]).all()
    moved = (np.abs(plain["t_busy"] - rows["t_busy"]) > 0.05).groupby(rows["job"]).mean()
    assert moved["resnet18-b16-fp32"] > 0.5 and moved["vgg16-b128-bf16"] == 0  # CPU-bound jobs move, saturating ones do not


@pytest.mark.slow
def test_retimed_profiles_predict_unseen_architectures_better(dataset):
    from colopred.research.evaluation import solo_time_sensitivity

    t = solo_time_sensitivity(dataset, modes=("timeslice",)).set_index("solo time of each job")
    retimed, plain = t.loc["re-timed to the window's solo baseline"], t.loc["profile's own iteration time"]
    assert retimed["leave-arch MAPE %"] < plain["leave-arch MAPE %"] - 1.0


def test_splits_never_leak(dataset):
    df = dataset.for_mode("mps")
    for name, tr, te in splits(df, "leave-arch"):
        assert not df.iloc[tr]["set_archs"].map(lambda a: name in a).any()
        assert df.iloc[te]["set_archs"].map(lambda a: name in a).all() and (df.iloc[te]["arch"] == name).all()
    for _, tr, te in splits(df, "random"):
        assert not set(df.iloc[tr]["set"]) & set(df.iloc[te]["set"])
    (_, tr, te), = splits(df, "pairs->triples")
    assert set(df.iloc[tr]["n_jobs"]) == {2} and set(df.iloc[te]["n_jobs"]) == {3}


@pytest.mark.parametrize("mode", ["mps", "timeslice"])
def test_default_model_predicts_consistently(mode, profiles):
    pr = Predictor.default(mode)
    assert pr.mode == mode and pr.manifest["gpu"] == "NVIDIA H100 80GB HBM3"
    jobs = [profiles["resnet18-b64-fp32"], profiles["lstm_lm-b64-fp32"], profiles["vgg16-b32-fp32"]]
    p = pr.predict(jobs)
    t = [j.iteration_ms for j in jobs]
    assert p.delta == pytest.approx(sum(t) / max(ti * si for ti, si in zip(t, p.slowdown)))
    assert p.throughput == pytest.approx(sum(1 / s for s in p.slowdown))
    for s, (lo, hi) in zip(p.slowdown, p.interval):
        assert lo <= s <= hi
    # order of jobs does not change a job's prediction
    q = pr.predict(jobs[::-1])
    assert q.slowdown[::-1] == pytest.approx(p.slowdown, rel=1e-6)
    # vectorised path agrees with the single one: a tidy frame, one row per job of each set
    many = pr.predict_many([jobs, jobs[:2]])
    assert list(many.columns) == ["set_id", "job", "n_jobs", "slowdown", "solo_iteration_ms", "collocated_iteration_ms", "delta",
                                  "throughput", "memory_gib", "fits_memory"]
    assert list(many["set_id"]) == [0, 0, 0, 1, 1] and list(many["job"]) == [j.name for j in jobs] + [j.name for j in jobs[:2]]
    first = many[many["set_id"] == 0]
    assert tuple(first["slowdown"]) == pytest.approx(p.slowdown, rel=1e-6)
    assert first["delta"].iloc[0] == pytest.approx(p.delta, rel=1e-6)
    assert many[many["set_id"] == 1]["throughput"].iloc[0] == pytest.approx(pr.predict(jobs[:2]).throughput, rel=1e-6)
    assert first["memory_gib"].iloc[0] == pytest.approx(p.memory_gib) and bool(first["fits_memory"].iloc[0]) == p.fits_memory
    assert np.allclose(many["collocated_iteration_ms"], many["solo_iteration_ms"] * many["slowdown"])
    # the same set in another order gives each job the same slowdown, handed back in the set's order
    a, b, c = jobs
    many = pr.predict_many([[a, b, c], [c, a, b], [b, c], [a, b, c], [c, b]])
    slow = lambda i: tuple(many[many["set_id"] == i]["slowdown"])  # noqa: E731
    assert slow(1) == pytest.approx((p.slowdown[2], p.slowdown[0], p.slowdown[1]), rel=1e-6)
    assert slow(3) == pytest.approx(p.slowdown, rel=1e-6)
    assert slow(4) == pytest.approx(slow(2)[::-1], rel=1e-6)
    assert len(slow(2)) == 2


def test_model_is_better_than_analytic_baseline_in_sample(dataset):
    pr = Predictor.default("timeslice")
    df = dataset.for_mode("timeslice")
    X = df[list(FEATURES)].to_numpy()
    err_model = np.mean(np.abs(pr.model.predict(X) - df["slowdown"]) / df["slowdown"])
    err_base = np.mean(np.abs(busy_analytic(df) - df["slowdown"]) / df["slowdown"])
    assert err_model < err_base


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["timeslice", "mps"])
def test_trained_on_pairs_the_model_extrapolates_to_triples(dataset, mode):
    """Set size enters only through the contention baseline, so a model that never saw a
    triple still predicts triples well (the trees alone cannot: they saturate at the
    largest co-runner sums seen in training, which gave 27-30% MAPE here)."""
    df = dataset.for_mode(mode)
    pairs, triples = df[df["n_jobs"] == 2], df[df["n_jobs"] == 3]
    X = lambda d: d[list(FEATURES)].to_numpy()  # noqa: E731
    m = SlowdownModel().fit(X(pairs), pairs["slowdown"].to_numpy())
    mape = np.mean(np.abs(m.predict(X(triples)) - triples["slowdown"]) / triples["slowdown"])
    base = np.mean(np.abs(busy_analytic(triples) - triples["slowdown"]) / triples["slowdown"])
    assert mape < 0.15 and mape < base
    # more co-runners of the same load: a higher predicted slowdown
    assert m.predict(X(triples)).mean() > m.predict(X(pairs)).mean()


def test_rank_partners_and_pack(profiles):
    pr = Predictor.default("mps")
    job = profiles["resnet18-b64-fp32"]
    others = [p for n, p in profiles.items() if n != job.name]
    r = pr.rank_partners(job, others, k=3)
    assert len(r) == 3 and list(r["throughput"]) == sorted(r["throughput"], reverse=True)
    assert list(r.columns) == ["partner", "job_slowdown", "partner_slowdown", "delta", "throughput", "fits_memory"]
    best = pr.predict([job, profiles[r["partner"][0]]])
    assert (r["job_slowdown"][0], r["partner_slowdown"][0]) == pytest.approx(best.slowdown, rel=1e-6)
    jobs = list(profiles.values())[:7]
    placement = pr.pack(jobs, n_gpus=3, max_per_gpu=3, max_slowdown=None, min_throughput=None)  # seats the only limit
    assert sorted(n for g in placement.gpus for n in g) == sorted(p.name for p in jobs) and not placement.queued
    assert all(1 <= len(g) <= 3 for g in placement.gpus)
    crowded = pr.pack(jobs, n_gpus=2, max_per_gpu=3, max_slowdown=None, min_throughput=None)  # 7 jobs, room for 6: one waits, with its reason
    assert crowded.placed == 6 and len(crowded.queued) == 1 and "room" in next(iter(crowded.queued.values()))


def test_gpu_mismatch_warns(profiles):
    from colopred.gpu import GpuInfo

    pr = Predictor.default("mps")
    a = profiles["resnet18-b64-fp32"].with_(gpu=GpuInfo.from_name("NVIDIA A100-SXM4-80GB"))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        pr.predict([a, profiles["vgg16-b32-fp32"]])
    assert any("A100" in str(x.message) for x in w)


def _copy_model(tmp_path):
    for f in (ROOT / "colopred" / "runtime" / "models").glob("h100-mps*"):
        shutil.copy(f, tmp_path / f.name)
    return tmp_path / "h100-mps.json"


def test_corrupt_model_file_is_refused(tmp_path):
    man = _copy_model(tmp_path)
    f = tmp_path / "h100-mps.point.ubj"
    data = bytearray(f.read_bytes())
    data[100] ^= 0xFF
    f.write_bytes(bytes(data))
    with pytest.raises(InputError, match="checksum mismatch"):
        Predictor.load(man)


def test_non_model_files_are_refused(tmp_path):
    man = _copy_model(tmp_path)
    d = json.loads(man.read_text())
    for change, msg in (({"schema_version": 11}, "schema version 11"), ({"schema_version": 9}, "schema version 9"), ({"features": ["x"]}, "feature schema"),
                        ({"model_features": ["t_busy"]}, "feature schema"), ({"mode": "timeslice"}, "feature schema"),
                        ({"baseline_coefs": {**d["baseline_coefs"], "contention_load": -1}}, "baseline_coefs.contention_load must be at least 0"),
                        ({"baseline_coefs": {**d["baseline_coefs"], "wait_small_grid": "1"}}, "baseline_coefs.wait_small_grid must be a finite number"),
                        ({"baseline_coefs": {**d["baseline_coefs"], "wait_full_grid": float("nan")}}, "wait_full_grid must be"),
                        ({"baseline_coefs": {"contention_load": 1.0}}, "missing field 'baseline_coefs.wait_full_grid'"),
                        ({"baseline_coefs": None}, "baseline_coefs must be an object"), ({"schema": "other"}, "not a colopred model"),
                        ({"contention_load": "symmetric"}, "contention_load 'symmetric' is not the mps mode's")):
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps({**d, **change}))
        with pytest.raises(SchemaError, match=msg):
            Predictor.load(bad)
    pickle_like = tmp_path / "model.pkl"
    pickle_like.write_bytes(b"\x80\x04\x95 not json")
    with pytest.raises(SchemaError, match="not JSON"):
        Predictor.load(pickle_like)
    # a manifest pointing at a file that is not an XGBoost model (checksum made to match)
    import hashlib

    junk = tmp_path / "junk.ubj"
    junk.write_bytes(b"cos\nsystem\n(S'echo pwned'\ntR.")
    d["files"]["point"] = {"path": "junk.ubj", "sha256": hashlib.sha256(junk.read_bytes()).hexdigest()}
    bad = tmp_path / "bad2.json"
    bad.write_text(json.dumps(d))
    with pytest.raises(InputError, match="not a valid XGBoost model"):
        Predictor.load(bad)


def test_gpm_profiles_leave_kernel_level_features_missing_not_zero(profiles):
    """A GPM profile from counters alone has no MPS wait, no per-launch fill and no kernel DRAM distribution: its own and its
    partners' features built on them are missing (NaN), every other feature is filled (its SM fill is SM
    activity over graphics activity, from its own GPM counters), and the baseline's wait term counts as 0."""
    shipped = JobProfile.from_json(DATA / "profiles" / "nvml" / "vgg16-b32-fp32.json")
    assert shipped.mps_wait_us is not None and shipped.kernels_per_iteration is not None  # from its solo timeline
    gpm = shipped.with_(mps_wait_us=None, kernels_per_iteration=None, stream_overlap=None)  # counters alone
    assert gpm.mps_wait_us is None and gpm.launch_fill_pct is None and "dram_pct" not in gpm.distributions
    counters = gpm.meta["gpm"]
    assert gpm.sm_fill_pct == pytest.approx(min(100.0, counters["sm_util_pct"] / counters["graphics_util_pct"] * 100), rel=1e-12)
    a, b = profiles["resnet18-b64-fp32"], profiles["lstm_lm-b64-fp32"]
    f = feature_frame([[a, gpm, b]]).set_index("job")
    for base, own in (("busy_mps_wait_us", lambda p: min(1, p.busy_fraction) * p.mps_wait_us),
                      ("dram_util_p25", lambda p: p.distributions["dram_pct"]["p25"])):
        cols = [c for c in FEATURES if c.endswith(base)]
        assert np.isnan(f.loc["vgg16-b32-fp32", f"t_{base}"])
        assert f.loc["resnet18-b64-fp32", cols].isna().sum() == len(cols) - 1  # only its own value known
        assert f.loc["vgg16-b32-fp32", f"co_max_{base}"] == pytest.approx(max(own(a), own(b)))
    assert f.loc["vgg16-b32-fp32", "t_sm_fill"] == gpm.sm_fill_pct
    assert np.isnan(f.loc["vgg16-b32-fp32", "t_launch_fill"])
    others = [c for c in FEATURES if not c.endswith(("busy_mps_wait_us", "dram_util_p25", "launch_fill", "mps_wait_cross_us"))]
    assert np.isfinite(f[others].to_numpy()).all()
    # the waits' stretch term is missing where a co-runner's wait is, known where the co-runners' waits are
    assert np.isnan(f.loc["resnet18-b64-fp32", "mps_wait_cross_us"]) and np.isfinite(f.loc["vgg16-b32-fp32", "mps_wait_cross_us"])
    from colopred.runtime.baseline import (
        baseline_terms,  # missing wait: 0, missing per-launch fill: 1
    )

    T = pd.DataFrame(baseline_terms(f[list(FEATURES)].to_numpy(), "mps_share"), index=f.index)
    assert np.isfinite(T.to_numpy()).all() and (T.loc["resnet18-b64-fp32", [1, 2]] == 0).all()


def test_gpm_profiles_get_the_gpm_model_and_the_ncu_model_refuses_them(profiles):
    """Issue 23: a prediction from GPM profiles never uses the ncu model. ``Predictor.for_profiles`` picks the model
    of the profiles' source; the ncu model refuses a GPM profile, the GPM model an ncu one, and a set mixing both is
    refused naming one profile of each kind. The GPM model's trees see no feature a GPM profile lacks, and its
    prediction of resnet18-b64 + gpt2_small-b8 under MPS is a slowdown (the ncu model fed these GPM profiles
    predicted 0.94 / 0.92, a speed-up, where the measured slowdowns are ~1.45 / ~1.15)."""
    from colopred.runtime.sources import GPM_LACKS

    nvml = {n: JobProfile.from_json(DATA / "profiles" / "nvml" / f"{n}.json") for n in ("resnet18-b64-fp32", "gpt2_small-b8-bf16")}
    gpm = list(nvml.values())
    ncu = [profiles[n] for n in nvml]
    for mode in ("timeslice", "mps"):
        g = Predictor.for_profiles(mode, gpm)
        assert g.profile_source == "nvml" and g.manifest["profile_source"] == "nvml" and g.mode == mode
        assert not [f for f in g.model.features_ if f.endswith(GPM_LACKS)]
        assert Predictor.for_profiles(mode, ncu).profile_source == "ncu"
        with pytest.raises(ValueError, match=r"resnet18-b64-fp32 is an NVML GPM profile and this .* trained on ncu"):
            Predictor.default(mode).predict(gpm)
        with pytest.raises(ValueError, match="is an NVML GPM profile"):
            Predictor.default(mode).predict_many([gpm])
        with pytest.raises(ValueError, match=r"resnet18-b64-fp32 is an ncu profile and this .* reads NVML GPM profiles"):
            g.predict(ncu)
        with pytest.raises(ValueError, match="is an ncu profile and gpt2_small-b8-bf16 an NVML GPM profile"):
            Predictor.for_profiles(mode, [ncu[0], gpm[1]])
        with pytest.raises(ValueError, match="is an ncu profile and gpt2_small-b8-bf16 an NVML GPM profile"):
            g.rank_partners(ncu[0], [gpm[1]])
        with pytest.raises(ValueError, match="an NVML GPM profile"):
            Predictor.default(mode).pack([ncu[0], gpm[1]], n_gpus=1)
    with pytest.warns(UserWarning, match=r"predicted from GPM profiles under MPS.*cross-validated error is 7% \(leave-arch\)") as rec:
        p = Predictor.for_profiles("mps", gpm).predict(gpm)
    assert not [w for w in rec if "predict better" in str(w.message)]  # it reads the timeline fields
    assert min(p.slowdown) > 1.05 and all(lo <= s <= hi for s, (lo, hi) in zip(p.slowdown, p.interval))
    three = [*gpm, JobProfile.from_json(DATA / "profiles" / "nvml" / "vgg16-b32-fp32.json")]
    g3 = Predictor.for_profiles("mps", three)
    triples_pct = g3.manifest["metrics"]["pairs->triples"]["slowdown_mape_pct"]
    with pytest.warns(UserWarning, match=rf"error is {triples_pct:.0f}% \(pairs->triples\)"):
        Predictor.for_profiles("mps", three).predict_many([three])


def test_mps_share_load_splits_each_pair_by_who_holds_the_sms_longer(profiles):
    """contention_load(kind="mps_share") = min(1, busy_j) · Σ_{k≠j} busy_k · fill_k · 2(u_k + ε)/(u_j + u_k + 2ε),
    u = busy · mps_wait_us, fill = sm_fill_pct / 100, computed per co-runner (not from aggregates): equal waits
    give the fill-weighted symmetric load, the job of longer kernels loses less of its time, its partner more;
    a co-runner without a wait (a GPM profile from counters alone) shares evenly, weighted by its SM fill."""
    from colopred.constants import SHARE_EPS_US
    from colopred.runtime.baseline import contention_load

    jobs = [profiles["lstm_lm-b16-fp32"], profiles["vgg16-b256-fp32"], profiles["resnet18-b64-fp32"]]
    f = feature_frame([jobs]).set_index("job")
    X = f[list(FEATURES)].to_numpy()
    share = pd.Series(contention_load(X, "mps_share"), index=f.index)
    sym = pd.Series(contention_load(X), index=f.index)
    u = {p.name: min(1, p.busy_fraction) * p.mps_wait_us for p in jobs}
    for j in jobs:
        expect = min(1, j.busy_fraction) * sum(
            min(1, k.busy_fraction) * k.sm_fill_pct / 100 * 2 * (u[k.name] + SHARE_EPS_US) / (u[j.name] + u[k.name] + 2 * SHARE_EPS_US)
            for k in jobs if k is not j)
        assert share[j.name] == pytest.approx(expect, rel=1e-12)
    assert share["vgg16-b256-fp32"] < sym["vgg16-b256-fp32"] and share["lstm_lm-b16-fp32"] > sym["lstm_lm-b16-fp32"]
    twin = feature_frame([[jobs[2], jobs[2].with_(name="twin")]])
    T = twin[list(FEATURES)].to_numpy()
    assert contention_load(T, "mps_share") == pytest.approx(contention_load(T) * jobs[2].sm_fill_pct / 100)
    gpm = JobProfile.from_json(DATA / "profiles" / "nvml" / "vgg16-b32-fp32.json").with_(mps_wait_us=None)  # counters alone
    G = feature_frame([[jobs[2], gpm]]).set_index("job")
    assert contention_load(G.loc[["resnet18-b64-fp32"], list(FEATURES)].to_numpy(), "mps_share") == pytest.approx(
        contention_load(G.loc[["resnet18-b64-fp32"], list(FEATURES)].to_numpy()) * gpm.sm_fill_pct / 100)
    with pytest.raises(ValueError, match="unknown contention load"):
        contention_load(X, "fair")


def test_the_mps_wait_stretches_beside_several_co_runners_where_the_target_does_not_hold_the_sms(profiles):
    """baseline.wait_load: in a pair, K_j/t_j · u_k · b_j^g; beside two co-runners each co-runner's wait u_k is
    stretched by 1 + λ·G_j·b_m (m the other co-runner, G_j the gate's share of the target's launches: 1 − b_j for
    ``idle``, 1 − b_j·φ_j for ``own_share``, φ_j the per-launch SM fill), so a host-bound target waits more than the
    sum of its pair waits under every gate, a busy one of small grids only where the gate counts its unfilled SMs,
    and a target of busy 1 whose grids fill the GPU exactly that sum."""
    from colopred.constants import MPS_WAIT_CROSS_GATE, MPS_WAIT_CROSS_SCALE, WAIT_BUSY_GATE_EXPONENT
    from colopred.runtime.baseline import CROSS_GATES, wait_load

    host, a, b = profiles["transformer_seq2seq-b32-bf16"], profiles["vgg16-b256-fp32"], profiles["resnet18-b64-fp32"]
    assert host.busy_fraction < 0.5 and MPS_WAIT_CROSS_SCALE > 0

    def w(jobs, target, gate=None):
        f = feature_frame([jobs]).set_index("job")
        return float(wait_load(f.loc[[target.name], list(FEATURES)].to_numpy(), gate=gate)[0])

    def bu(p):
        return min(1.0, p.busy_fraction)

    scale = (host.kernels_per_iteration / (host.stream_overlap or 1.0)) / (1e3 * host.iteration_ms) * bu(host) ** WAIT_BUSY_GATE_EXPONENT
    ua, ub = bu(a) * a.mps_wait_us, bu(b) * b.mps_wait_us
    assert w([host, a], host) == pytest.approx(scale * ua, rel=1e-9)
    for gate, share in (("idle", 1 - bu(host)), ("own_share", 1 - bu(host) * host.launch_fill_pct / 100)):
        assert CROSS_GATES[gate](bu(host), host.launch_fill_pct / 100) == pytest.approx(share)
        stretch = MPS_WAIT_CROSS_SCALE * share
        assert w([host, a, b], host, gate) == pytest.approx(scale * (ua * (1 + stretch * bu(b)) + ub * (1 + stretch * bu(a))), rel=1e-9)
        assert w([host, a, b], host, gate) > w([host, a], host, gate) + w([host, b], host, gate)
    assert w([host, a, b], host) == w([host, a, b], host, MPS_WAIT_CROSS_GATE)  # the default gate is the constant's
    small = profiles["lstm_lm-b64-fp32"]  # busy, but its recurrent GEMMs fill about a third of the SMs
    assert small.busy_fraction >= 1 and small.launch_fill_pct < 40
    pairs = w([small, a], small) + w([small, b], small)
    assert w([small, a, b], small, "own_share") > 1.2 * pairs
    assert w([small, a, b], small, "idle") == pytest.approx(pairs, rel=1e-12)  # no idle time: nothing stretched
    busy = profiles["vgg16-b32-fp32"].with_(busy_fraction=1.0, launch_fill_pct=100.0)
    for gate in CROSS_GATES:
        assert w([busy, a, b], busy, gate) == pytest.approx(w([busy, a], busy, gate) + w([busy, b], busy, gate), rel=1e-12)


def test_the_wait_gate_travels_in_the_manifest_and_a_manifest_without_it_reads_as_idle(dataset, tmp_path):
    """SlowdownModel(wait_gate=...) builds the MPS wait's stretch with that gate of baseline.CROSS_GATES (default
    constants.MPS_WAIT_CROSS_GATE); the manifest records it as mps_wait_cross_gate and the loaded model predicts the
    same; a manifest written before the field reads as 'idle', the only gate then, and a model of another gate
    predicts otherwise where the gates differ (a busy target of small grids beside two co-runners); an unknown gate
    is refused."""
    from colopred.constants import MPS_WAIT_CROSS_GATE
    from colopred.runtime.baseline import CROSS_GATES, baseline_terms
    from colopred.runtime.manifest import load_model, save_model

    rows = dataset.for_mode("mps")
    train = rows[rows["window_id"].isin(rows["window_id"].unique()[::4])]
    default = SlowdownModel(mode="mps")
    default._resolve()
    assert default.wait_gate_ == MPS_WAIT_CROSS_GATE
    m = SlowdownModel(mode="mps", calibrate=False, wait_gate="own_share").fit(train[list(FEATURES)], train["slowdown"])
    assert m.wait_gate_ == "own_share" and set(CROSS_GATES) == {"idle", "own_share", "launch"}
    small = rows[(rows["job"] == "lstm_lm-b64-fp32") & (rows["n_jobs"] >= 3)][list(FEATURES)].to_numpy()
    assert len(small) and (baseline_terms(small, "mps_share", "own_share")[:, 1:].sum(axis=1)
                           > baseline_terms(small, "mps_share", "idle")[:, 1:].sum(axis=1)).all()
    path = tmp_path / "m-mps.json"
    save_model(path, m, "mps", max_set_size=4)
    man = json.loads(path.read_text())
    assert man["mps_wait_cross_gate"] == "own_share"
    loaded, _ = load_model(path)
    assert loaded.wait_gate_ == "own_share" and np.array_equal(loaded.predict(small), m.predict(small))
    del man["mps_wait_cross_gate"]
    path.write_text(json.dumps(man))
    old, _ = load_model(path)
    assert old.wait_gate_ == "idle" and not np.allclose(old.predict(small), m.predict(small))
    path.write_text(json.dumps({**man, "mps_wait_cross_gate": "always"}))
    with pytest.raises(InputError, match="mps_wait_cross_gate"):
        load_model(path)
    with pytest.raises(ValueError, match="unknown wait gate"):
        SlowdownModel(mode="mps", wait_gate="always").fit(train[list(FEATURES)], train["slowdown"])


def test_an_ncu_profile_without_mps_wait_warns_under_mps_only(profiles):
    """An ncu profile made before mps_wait_us existed still predicts, with its wait counted as 0, but
    the MPS predictor says so, naming the profile; time-slicing does not use the wait and stays quiet."""
    import warnings

    old = profiles["vgg16-b256-fp32"].with_(mps_wait_us=None)
    small = profiles["lstm_lm-b16-fp32"]
    with pytest.warns(UserWarning, match="vgg16-b256-fp32 has no mps_wait_us"):
        stale = Predictor.default("mps").predict([small, old])
    with pytest.warns(UserWarning, match="no mps_wait_us"):
        Predictor.default("mps").predict_many([[small, old]])
    fresh = Predictor.default("mps").predict([small, profiles["vgg16-b256-fp32"]])
    assert stale.slowdown[0] < fresh.slowdown[0]  # the missing wait lowers the small job's predicted slowdown
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Predictor.default("timeslice").predict([small, old])


def test_wait_load_is_launches_times_co_runners_mps_wait(profiles):
    """W_j = K_j / o_j / t_j · Σ_{k≠j} u_k·(1 + λ·G_j·Σ_{m∉{j,k}} b_m) · b_j^g, u = b·w, b = min(1, busy) (t_j in µs,
    o_j the stream overlap, g the gate exponent, λ the stretch by the set's other co-runners, G_j the shipped gate's
    share of the target's launches, 1 − b_j for ``idle``); the
    baseline's terms are L, W·φ_j and W·(1 − φ_j) (φ_j the per-launch SM fill), their coefficients
    the non-negative least-squares fit."""
    from colopred.constants import MPS_WAIT_CROSS_GATE, MPS_WAIT_CROSS_SCALE, WAIT_BUSY_GATE_EXPONENT
    from colopred.runtime.baseline import (
        baseline_terms,
        contention_load,
        fit_coefs,
        wait_load,
    )

    jobs = [profiles["lstm_lm-b16-fp32"], profiles["vgg16-b256-fp32"], profiles["resnet18-b64-fp32"]]
    f = feature_frame([jobs]).set_index("job")
    X = f[list(FEATURES)].to_numpy()
    W = pd.Series(wait_load(X), index=f.index)
    for j in jobs:
        others = [k for k in jobs if k is not j]
        launches = j.kernels_per_iteration / (j.stream_overlap or 1.0)
        b, phi = min(1, j.busy_fraction), j.launch_fill_pct / 100
        unheld = {"idle": 1 - b, "own_share": 1 - b * phi, "launch": max(1 - b, 1 - phi)}[MPS_WAIT_CROSS_GATE]
        stretched = sum(min(1, k.busy_fraction) * k.mps_wait_us
                        * (1 + MPS_WAIT_CROSS_SCALE * unheld * sum(min(1, m.busy_fraction) for m in others if m is not k))
                        for k in others)
        expect = launches / (1e3 * j.iteration_ms) * stretched * min(1, j.busy_fraction) ** WAIT_BUSY_GATE_EXPONENT
        assert W[j.name] == pytest.approx(expect, rel=1e-9)
    assert profiles["lstm_lm-b16-fp32"].stream_overlap > 1.05  # cuDNN's LSTM runs kernels on several streams
    assert W["lstm_lm-b16-fp32"] > 10 * W["vgg16-b256-fp32"]  # many short kernels beside long SM-filling ones
    T = baseline_terms(X)
    assert T[:, 0] == pytest.approx(contention_load(X))
    for i, j in enumerate(f.index):  # the wait split by the target's per-launch SM fill
        phi = profiles[j].launch_fill_pct / 100
        assert 0 < phi < 1 and T[i, 1:] == pytest.approx([W[j] * phi, W[j] * (1 - phi)], rel=1e-9)
    assert fit_coefs(T, 1 + T @ [0.3, 0.7, 0.2]) == pytest.approx([0.3, 0.7, 0.2])
    coefs = fit_coefs(T, 1 + T @ [0.3, -0.7, 0.0])  # a negative term is dropped
    assert coefs[1] == 0 and (coefs >= 0).all()
    # two rows whose terms are near zero ask for coefficients beyond what a manifest takes: bounded at the limit, and
    # the remaining term refitted (the least-squares optimum inside the bounds)
    from colopred.constants import MAX_BASELINE_COEF

    tiny = np.array([[1e-3, 0.0, 0.0], [0.0, 1e-3, 0.0], [0.0, 0.0, 1.0]])
    bounded = fit_coefs(tiny, np.array([1.5, 1.05, 1.3]))  # unbounded: 500, 50, 0.3
    assert bounded == pytest.approx([MAX_BASELINE_COEF, 50.0, 0.3], rel=1e-6)



@pytest.mark.slow
def test_evaluation_runs_when_profiles_lack_sm_fill(dataset):
    """A lab's ncu reports without launch__waves_per_multiprocessor give profiles without SM fill
    or MPS wait:
    every method of the evaluation still fits and predicts (missing features stay missing for
    XGBoost; the ridge baseline imputes them)."""
    from colopred.research.evaluation import evaluate_mode

    df = dataset.for_mode("timeslice")
    df = df[df["set_archs"].map(lambda a: {"resnet18", "vgg16", "lstm_lm"} & set(a) != set())].reset_index(drop=True)
    for c in FEATURES:
        if c.endswith(("sm_fill", "busy_mps_wait_us")):
            df[c] = np.nan
    table, preds = evaluate_mode(df)
    assert set(table["split"]) == {"random", "leave-arch", "pairs->triples", "pairs+triples->quads"}
    assert table["slowdown_mape_pct"].notna().all() and np.isfinite(preds["pred"]).all()


def test_mps_trees_see_the_wait_features_and_time_slicing_trees_do_not():
    """Per-mode feature sets (features.model_features): the shipped MPS model's trees split on the
    co-runners' MPS wait, their DRAM p25 and the loads of the baseline's terms (MPS_TREE_LOADS); time-slicing's
    never see them (the wait made its placements worse, the p25 did not help)."""
    from colopred.runtime.features import MPS_TREE_FEATURES, MPS_TREE_LOADS, model_features

    mps, ts = Predictor.default("mps"), Predictor.default("timeslice")
    assert mps.manifest["model_features"] == list(model_features("mps"))
    assert ts.manifest["model_features"] == list(model_features("timeslice"))
    assert not set(MPS_TREE_FEATURES) & set(ts.model.features)
    gain = mps.model.feature_importance()
    for group in ("busy_mps_wait_us", "dram_util_p25"):
        assert gain[[f for f in MPS_TREE_FEATURES if f.endswith(group)]].sum() > 0, group
    for load in MPS_TREE_LOADS:
        assert load in MPS_TREE_FEATURES and gain[load] > 0, load
    # monotone in the co-runners' mean wait where the trees see it
    assert mps.model._constraints().count("1") == 3 and ts.model._constraints().count("1") == 2


def test_feature_rows_match_a_direct_computation_for_any_set_size(profiles):
    """feature_matrix's vectorised aggregates equal the definitions computed set by set (sizes 2 to 5, GPM profiles
    with missing values, empty slots anywhere)."""
    from colopred.runtime.features import profile_matrix

    gpm = [JobProfile.from_json(p) for p in sorted((DATA / "profiles" / "nvml").glob("*.json"))[:6]]
    P = profile_matrix(list(profiles.values()) + gpm)
    rng = np.random.default_rng(0)
    sets = np.full((400, 5), -1)
    for r in range(400):
        k = rng.integers(2, 6)
        slots = np.sort(rng.choice(5, k, replace=False))
        sets[r, slots] = rng.choice(len(P), k, replace=False)
    packed = np.array([sorted(r, key=lambda v: v < 0) for r in sets])  # every set fills its first slots, as a dataset's
    for some in (sets, packed):
        check_rows(P, some)


def check_rows(P, sets):
    """Each row of feature_matrix(P, sets) against a direct computation of its columns."""
    import math

    from colopred.constants import SHARE_EPS_US
    from colopred.runtime.features import AGGS, BASE, CO_AGG, feature_matrix

    X, set_of, pos = feature_matrix(P, sets)
    for x, s, i in zip(X, set_of, pos):
        own, co = sets[s, i], [j for j in sets[s] if j >= 0 and j != sets[s, i]]
        assert np.array_equal(x[: len(BASE)], P[own], equal_nan=True)
        for b, name in enumerate(CO_AGG):
            v = P[co, BASE.index(name)]
            want = (dict(sum=v.sum(), max=v.max(), min=v.min(), mean=v.mean()) if not np.isnan(v).any()
                    else dict.fromkeys(AGGS, np.nan))
            for a, agg in enumerate(AGGS):
                got = x[len(BASE) + 4 * b + a]
                assert (math.isnan(got) and math.isnan(want[agg])) or got == pytest.approx(want[agg], rel=1e-12), (name, agg)
        assert x[FEATURES.index("n_jobs")] == len(co) + 1
        u = P[:, BASE.index("busy_mps_wait_us")]
        share = [1.0 if np.isnan(u[own] + u[k]) else 2 * (u[k] + SHARE_EPS_US) / (u[own] + u[k] + 2 * SHARE_EPS_US) for k in co]
        fill = [1.0 if np.isnan(P[k, BASE.index("sm_fill")]) else P[k, BASE.index("sm_fill")] / 100 for k in co]
        load = sum(P[k, BASE.index("busy")] * f * w for k, f, w in zip(co, fill, share)) * min(1.0, P[own, BASE.index("busy")])
        assert x[FEATURES.index("mps_share_load")] == pytest.approx(load, rel=1e-12)
        b = P[:, BASE.index("busy")]
        cross = sum(u[k] * sum(b[m] for m in co if m != k) for k in co)  # missing if a co-runner's wait is
        got = x[FEATURES.index("mps_wait_cross_us")]
        assert (math.isnan(got) and math.isnan(cross)) or got == pytest.approx(cross, rel=1e-12, abs=1e-12)


def test_the_batch_columns_are_the_feature_rows_bit_for_bit(profiles):
    """feature_columns (the batch path: only the trees' and the baseline's columns) holds exactly feature_matrix's
    values, float32 where the trees read them, for sets of 1 to 5 jobs; it declines sets it cannot build."""
    from colopred.runtime.baseline import BASELINE_COLUMNS
    from colopred.runtime.features import feature_columns, feature_matrix, model_features, profile_matrix

    P = profile_matrix(list(profiles.values()))
    rng = np.random.default_rng(1)
    for k in range(1, 6):
        sets = np.array([rng.choice(len(P), k, replace=False) for _ in range(300)])
        X, set_of, pos = feature_matrix(P, sets)
        names = model_features("mps")
        X32, X64 = feature_columns(P, sets, names, BASELINE_COLUMNS)
        assert X32.dtype == np.float32 and X32.flags.f_contiguous
        assert np.array_equal(X32, X[:, [FEATURES.index(f) for f in names]].astype(np.float32))
        for f in BASELINE_COLUMNS:
            assert np.array_equal(X64[f], X[:, FEATURES.index(f)]), f
        assert (set_of == np.tile(np.arange(len(sets)), k)).all() and (pos == np.repeat(np.arange(k), len(sets))).all()
    gpm = JobProfile.from_json(sorted((DATA / "profiles" / "nvml").glob("*.json"))[0])
    assert feature_columns(profile_matrix([gpm, *list(profiles.values())[:2]]), np.array([[0, 1]]), names) is None
    assert feature_columns(P, np.array([[0, -1]]), names) is None


def test_batch_predictions_equal_the_row_path(profiles, monkeypatch):
    """predict_index through the batch columns gives the same slowdowns as through full feature rows."""
    import colopred.runtime.predictor as predictor_module

    jobs = list(profiles.values())
    rng = np.random.default_rng(2)
    idx = np.full((500, 4), -1)
    for r in range(500):
        k = rng.integers(1, 5)
        idx[r, :k] = rng.choice(len(jobs), k, replace=False)
    for mode in ("mps", "timeslice"):
        pr = Predictor.default(mode)
        fast = pr.slowdown_index(jobs, idx)
        with monkeypatch.context() as m:
            m.setattr(predictor_module, "feature_columns", lambda *a, **k: None)
            rows = pr.slowdown_index(jobs, idx)
        assert np.array_equal(fast, rows, equal_nan=True) and np.isnan(fast[idx < 0]).all()
        assert (fast[(idx >= 0).sum(1) == 1, 0] == 1).all()


def test_predict_many_gives_every_slot_its_own_prediction_whatever_the_layout(profiles):
    pr = Predictor.default("timeslice")
    jobs = list(profiles.values())[:6]
    idx = np.array([[0, -1, 1, 2], [3, 4, -1, -1], [-1, 5, 0, -1]])
    s = pr.slowdown_index(jobs, idx)
    assert np.isnan(s[idx < 0]).all()
    for row, r in zip(idx, s):
        members = [jobs[i] for i in row if i >= 0]
        assert r[row >= 0] == pytest.approx(pr.predict(members).slowdown, rel=1e-9)


def test_the_gpm_model_refuses_a_gpm_profile_without_its_timeline_fields():
    """The GPM model reads the kernel count and MPS wait a solo timeline gives (runtime.sources.GPM_TIMELINE_FIELDS):
    a GPM profile from counters alone is refused, naming the profile, what it lacks and the command that adds it,
    in every entry point; with the fields back it predicts."""
    from colopred.runtime.sources import missing_timeline_fields

    nvml = [JobProfile.from_json(DATA / "profiles" / "nvml" / f"{n}.json") for n in ("resnet18-b64-fp32", "gpt2_small-b8-bf16")]
    bare = nvml[1].with_(kernels_per_iteration=None, mps_wait_us=None, stream_overlap=None)
    assert missing_timeline_fields(bare) == ("kernels_per_iteration", "mps_wait_us") and missing_timeline_fields(nvml[1]) == ()
    assert missing_timeline_fields(nvml[1].with_(stream_overlap=None)) == ()  # a missing overlap counts as 1
    for mode in ("timeslice", "mps"):
        g = Predictor.for_profiles(mode, nvml)
        assert "t_log_kernels" in g.model.features_
        msg = r"gpt2_small-b8-bf16 is a GPM profile without kernels_per_iteration and mps_wait_us.*colopred profile add-timeline"
        with pytest.raises(ValueError, match=msg):
            g.predict([nvml[0], bare])
        with pytest.raises(ValueError, match=msg):
            g.predict_many([[nvml[0], bare]])
        with pytest.raises(ValueError, match=msg):
            g.rank_partners(nvml[0], [bare])
        with pytest.raises(ValueError, match=msg):
            g.pack([nvml[0], bare], n_gpus=1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert min(g.predict(nvml).slowdown) > 1.0


def test_one_set_skips_the_queue_load_only_where_the_model_does_not_read_it(profiles, monkeypatch):
    """``predict`` of one set solves the time-slicing queue's fixed point only for a model that reads
    ``queue_load`` (time-slicing); an MPS prediction skips it and gives the batch path's slowdowns."""
    import colopred.runtime.features as features_module

    jobs = list(profiles.values())[:3]
    calls = []
    real = features_module.queue_load
    monkeypatch.setattr(features_module, "queue_load", lambda busy: calls.append(busy.shape) or real(busy))
    for mode, reads in (("mps", False), ("timeslice", True)):
        pr = Predictor.default(mode)
        assert pr._reads_queue_load is reads
        calls.clear()
        s = pr.predict(jobs).slowdown
        assert bool(calls) is reads
        assert np.allclose(s, pr.slowdown_index(jobs, np.array([[0, 1, 2]]))[0], rtol=1e-12)
