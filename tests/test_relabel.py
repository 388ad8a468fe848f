"""Relabelled rows (colopred.research.dataset: the time-slicing sets re-measured under datasets/h100/relabel take the
mean of their windows there as their label) and the re-labelling scripts (research/relabel_status.py,
research/relabel_study.py), on the chunks measured on the H100."""

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from colopred.cli import main
from colopred.measurement.harness import reader as R
from colopred.research import dataset as D
from colopred.research.dataset import load_dataset, load_profiles_dir, relabelled_rows
from colopred.research.evaluation import metrics
from colopred.runtime.features import FEATURES, feature_frame

from .conftest import DATA, load_study, shipped_dataset

ROOT = Path(__file__).parents[1]
RELABEL = ROOT / "datasets" / "h100" / "relabel"
CHUNK = "h100-c16t-20"  # the smallest chunk measured: 72 windows
SMALL_CAMPAIGN = "h100-c13t"  # time-slicing; holds 4 of the chunk's 10 sets
MODELS = ROOT / "colopred" / "runtime" / "models"
pytestmark = pytest.mark.data
ROW_KEYS = ["window_id", "job", "mode", "set", "slowdown", "solo_ms", *FEATURES]


@pytest.fixture(scope="module")
def chunk_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("relabel")
    shutil.copytree(RELABEL / CHUNK, d / CHUNK)
    return d


@pytest.fixture(scope="module")
def raw():
    """datasets/h100 with every window its own label (the training rows before relabelling)."""
    return shipped_dataset(relabel=False)


@pytest.fixture(scope="module")
def relab():
    return shipped_dataset()


@pytest.fixture(scope="module")
def remeasured() -> pd.DataFrame:
    """The successful (window, job) rows of every relabel chunk, straight from the records."""
    return R.slowdown_table(R.read_windows(D.campaign_dirs(RELABEL)))


def test_each_relabelled_row_is_the_mean_of_its_windows_in_the_run(chunk_dir):
    """One row per (set, job) of the chunk: the mean of the slowdowns of its three windows, the job described by its
    profile re-timed to the mean of its solo baselines there."""
    assert load_study("relabel_study").relabelled_rows is relabelled_rows  # the study builds them as the library does
    profiles = load_profiles_dir(ROOT / "datasets" / "h100" / "profiles" / "ncu")
    rows = relabelled_rows(chunk_dir, profiles)
    w = R.read_windows(chunk_dir / CHUNK)
    sl = R.slowdown_table(w)
    assert set(sl["mode"]) == {"timeslice"}
    per = sl.groupby(["set", "job"]).agg(slowdown=("slowdown", "mean"), solo_ms=("solo_ms", "mean"), n=("slowdown", "size"))
    assert len(rows) == len(per) and (per["n"] == 3).all()
    got = rows.set_index(["set", "job"]).loc[per.index]
    assert np.allclose(got["slowdown"], per["slowdown"]) and (got["windows"] == 3).all() and got["relabelled"].all()
    # re-timed: a member's own iteration time feature is its mean solo baseline there
    assert np.allclose(got["t_log_iter_ms"], np.log(per["solo_ms"]))
    # the three members of one set share a synthetic window (so set features see all of them)
    assert rows.groupby("window_id")["job"].size().eq(rows["n_jobs"].groupby(rows["window_id"]).first()).all()


@pytest.mark.slow
def test_load_dataset_replaces_exactly_the_remeasured_sets_in_their_mode(raw, relab, remeasured):
    """relabel=True: every row of a set measured under relabel/ in that mode is gone and the set's relabelled rows
    (one per run and job) stand instead; every other row, the same set's in the other mode included, is the row
    relabel=False gives."""
    assert not raw.relabelled and relab.relabelled
    assert not raw.rows["relabelled"].any() and (raw.rows["windows"] == 1).all()
    assert "timeslice" in set(remeasured["mode"])
    for mode in ("timeslice", "mps"):
        again = remeasured[remeasured["mode"] == mode]
        raw_m, relab_m = raw.for_mode(mode), relab.for_mode(mode)
        new = relab_m[relab_m["relabelled"]]
        sets = set(again["set"])
        assert set(new["set"]) == sets and len(new) == len(again.groupby(["campaign", "segment", "set", "job"]))
        assert new["window_id"].str.startswith("relabel:").all()
        replaced = raw_m["set"].isin(sets)
        assert replaced.sum() >= len(sets)  # every re-measured set was a training set of that mode
        assert len(relab_m) == len(raw_m) - replaced.sum() + len(new)
        kept = relab_m[~relab_m["relabelled"]]
        assert not kept["set"].isin(sets).any()
        pd.testing.assert_frame_equal(kept[ROW_KEYS].reset_index(drop=True), raw_m.loc[~replaced, ROW_KEYS].reset_index(drop=True),
                                      check_exact=True)


@pytest.mark.slow
def test_a_relabelled_row_is_its_windows_mean_described_by_the_profile_retimed_to_their_mean_solo_time(relab, remeasured):
    new = relab.rows[relab.rows["relabelled"]]
    per = remeasured.groupby(["campaign", "segment", "set", "job"]).agg(
        slowdown=("slowdown", "mean"), solo_ms=("solo_ms", "mean"), n=("slowdown", "size"))
    got = new.set_index(["campaign", "segment", "set", "job"]).loc[per.index]
    assert np.allclose(got["slowdown"], per["slowdown"], rtol=1e-12) and np.allclose(got["solo_ms"], per["solo_ms"], rtol=1e-12)
    assert (got["windows"].to_numpy() == per["n"].to_numpy()).all() and (per["n"] >= 2).any()
    assert np.allclose(got["colo_ms"], got["slowdown"] * got["solo_ms"])
    # one window per (run, set), named after them, holding every member
    keys = per.index.to_frame(index=False)
    assert list(got["window_id"]) == list("relabel:" + keys["campaign"] + "#" + keys["segment"].astype(str) + ":" + keys["set"])
    size = new.groupby("window_id").agg(rows=("job", "size"), n_jobs=("n_jobs", "first"), sets=("set", "nunique"))
    assert (size["rows"] == size["n_jobs"]).all() and (size["sets"] == 1).all()
    # every feature of a set's rows: its members' profiles re-timed to their mean solo times there
    for wid in new["window_id"].drop_duplicates().sample(5, random_state=0):
        g = new[new["window_id"] == wid]
        expected = feature_frame([[relab.profiles[j].retimed(t) for j, t in zip(g["job"], g["solo_ms"])]])
        assert np.allclose(g[list(FEATURES)].to_numpy(float), expected[list(FEATURES)].to_numpy(float), equal_nan=True)
        assert np.allclose(g["t_busy"], [min(1, relab.profiles[j].busy_fraction * relab.profiles[j].iteration_ms / t)  # capped
                                         for j, t in zip(g["job"], g["solo_ms"])])


@pytest.mark.slow
def test_set_level_metrics_read_the_relabelled_sets_outcome(relab):
    """δ and throughput of a relabelled set are those of its mean labels: scored against themselves every set agrees."""
    ts = relab.for_mode("timeslice")
    assert ts[["delta", "throughput"]].notna().all().all()
    m = metrics(ts, ts["slowdown"].to_numpy())
    assert m["delta_mae"] == pytest.approx(0, abs=1e-12) and m["pays_off_agreement_pct"] == 100
    assert m["n_sets"] == ts["window_id"].nunique() and m["slowdown_mape_pct"] == 0
    plain = relab.with_profile_times()
    assert plain.relabelled and len(plain.rows) == len(relab.rows)
    new = plain.rows[plain.rows["relabelled"]]
    assert np.allclose(new["t_log_iter_ms"], np.log(new["job"].map(lambda j: relab.profiles[j].iteration_ms)))


@pytest.mark.slow
def test_the_data_hash_covers_the_relabel_records_only_when_they_are_used(raw, relab):
    """relabel=False gives the hash of the profiles and campaigns alone (the one every manifest trained before the
    relabelled rows records); relabel=True another."""
    assert raw.data_hash != relab.data_hash
    files = sorted((DATA / "profiles" / "ncu").glob("*.json")) + R.campaign_record_files(DATA / "campaigns")
    assert raw.data_hash == D.hash_files(files)
    for f in MODELS.glob("*.json"):
        man = json.loads(f.read_text())
        if man.get("profile_source", "ncu") == "ncu":
            assert man["data_hash"] == (relab if man.get("relabelled") else raw).data_hash, f.name


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    """A dataset folder: the ncu profiles, one time-slicing campaign and one relabel chunk."""
    d = tmp_path_factory.mktemp("small") / "data"
    shutil.copytree(DATA / "profiles" / "ncu", d / "profiles" / "ncu")
    shutil.copytree(DATA / "campaigns" / SMALL_CAMPAIGN, d / "campaigns" / SMALL_CAMPAIGN)
    shutil.copytree(RELABEL / CHUNK, d / "relabel" / CHUNK)
    (d / "relabel" / "README.md").write_text("not a campaign\n")
    return d


def test_relabel_records_change_the_hash_by_content_and_place(small, tmp_path):
    a, b = load_dataset(small), load_dataset(small, relabel=False)
    chunk_sets = set(R.slowdown_table(R.read_windows(small / "relabel" / CHUNK))["set"])
    assert set(a.rows.loc[a.rows["relabelled"], "set"]) == chunk_sets
    assert 0 < b.rows["set"].isin(chunk_sets).sum() < len(b.rows)  # some of the chunk's sets were measured there
    d = tmp_path / "data"
    shutil.copytree(small, d)
    rec = d / "relabel" / CHUNK / "windows.jsonl"
    rec.write_text(rec.read_text() + "\n")  # the same records, other bytes
    assert load_dataset(d).data_hash != a.data_hash and load_dataset(d, relabel=False).data_hash == b.data_hash
    shutil.move(d / "relabel" / CHUNK, d / "campaigns" / CHUNK)  # the chunk as an ordinary campaign: other rows
    moved = load_dataset(d)
    assert not moved.relabelled and moved.data_hash not in (a.data_hash, b.data_hash)


def test_train_records_the_labels_and_no_relabel_keeps_the_windows(small, tmp_path, capsys, few_trees):
    for flag, relabelled in (([], True), (["--no-relabel"], False)):
        out = tmp_path / ("r" if relabelled else "w") / "m"
        assert main(["train", "--data", str(small), "--out", str(out), "--modes", "timeslice", "--no-metrics", "-q", *flag]) == 0
        man = json.loads(out.with_name("m-timeslice.json").read_text())
        ds = load_dataset(small, relabel=relabelled)
        assert man["relabelled"] is relabelled and man["data_hash"] == ds.data_hash and man["n_rows"] == len(ds.for_mode("timeslice"))
    capsys.readouterr()


@pytest.mark.slow
def test_gpm_profiles_describe_the_same_relabelled_labels(relab):
    nvml = shipped_dataset(profile_source="nvml")
    assert nvml.relabelled and nvml.data_hash != relab.data_hash
    a, b = (d.rows[d.rows["relabelled"]].sort_values(["window_id", "job"]).reset_index(drop=True) for d in (relab, nvml))
    pd.testing.assert_frame_equal(a[["window_id", "job", "slowdown", "solo_ms", "windows"]], b[["window_id", "job", "slowdown", "solo_ms", "windows"]],
                                  check_exact=True)
    assert np.allclose(b["t_log_iter_ms"], np.log(b["solo_ms"]))
    assert np.allclose(b["t_busy"], [min(1, nvml.profiles[j].busy_fraction * nvml.profiles[j].iteration_ms / t)
                                     for j, t in zip(b["job"], b["solo_ms"])])
    assert len(nvml.for_mode("timeslice")) == len(relab.for_mode("timeslice"))


def test_relabel_status_label_table_gives_the_standard_error_of_each_mean(chunk_dir):
    status = load_study("relabel_status")
    w = R.read_windows(chunk_dir / CHUNK)
    lab = status.label_table(w)
    sl = R.slowdown_table(w)
    one = lab.iloc[0]
    s = sl[(sl["set"] == one["set"]) & (sl["job"] == one["job"])]["slowdown"]
    assert one["n"] == len(s) == 3
    assert one["mean"] == pytest.approx(s.mean())
    assert one["se_pct"] == pytest.approx(100 * s.std() / s.mean() / np.sqrt(3))


def test_an_mps_relabel_campaign_replaces_the_mps_rows_of_its_sets_only(tmp_path):
    """A relabel campaign measured under MPS (here h100-c14r, which repeated 22 of h100-c14's MPS sets) replaces those
    sets' MPS rows by the means of its windows and leaves the same sets' time-slicing rows (h100-c14t) as they are; a
    relabel campaign of two modes is refused, naming it."""
    d = tmp_path / "data"
    shutil.copytree(DATA / "profiles" / "ncu", d / "profiles" / "ncu")
    for c in ("h100-c14", "h100-c14t"):
        shutil.copytree(DATA / "campaigns" / c, d / "campaigns" / c)
    shutil.copytree(DATA / "campaigns" / "h100-c14r", d / "relabel" / "h100-c14r")
    raw, relab = load_dataset(d, relabel=False), load_dataset(d)
    again = R.slowdown_table(R.read_windows(d / "relabel" / "h100-c14r"))
    assert set(again["mode"]) == {"mps"}
    sets = set(again["set"])
    new = relab.rows[relab.rows["relabelled"]]
    assert (new["mode"] == "mps").all() and set(new["set"]) == sets
    per = again.groupby(["set", "job"])["slowdown"].mean()
    assert np.allclose(new.set_index(["set", "job"]).loc[per.index, "slowdown"], per, rtol=1e-12)
    assert not relab.for_mode("mps")[~relab.for_mode("mps")["relabelled"]]["set"].isin(sets).any()
    assert raw.for_mode("timeslice")["set"].isin(sets).any()  # the same sets under time-slicing: untouched
    pd.testing.assert_frame_equal(relab.for_mode("timeslice")[ROW_KEYS], raw.for_mode("timeslice")[ROW_KEYS], check_exact=True)
    shutil.copytree(DATA / "campaigns" / "h100-smoke", d / "relabel" / "h100-smoke")  # both modes in one campaign
    with pytest.raises(D.InputError, match="h100-smoke measured two modes"):
        load_dataset(d)
