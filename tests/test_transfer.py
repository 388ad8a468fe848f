"""The cross-GPU transfer study (research.transfer) on the recorded H200 campaigns and H100 profiles."""

import json
import re

import numpy as np
import pytest

from colopred.errors import InputError
from colopred.measurement.harness.reader import read_windows, slowdown_table
from research import transfer
from colopred.research.dataset import load_profiles_dir
from colopred.runtime.predictor import Predictor

from .conftest import DATA, ROOT, load_study

H200 = ROOT / "datasets" / "h200"
C1R = H200 / "campaigns" / "h200-c1r"  # 16 sets in both modes on one machine: the smallest real campaign
RESERVED = re.compile(r"densenet|vit_|\bvit\b|bert|mobilenet_?v3|efficientnet", re.IGNORECASE)


@pytest.fixture(scope="module")
def ncu100():
    return load_profiles_dir(DATA / "profiles" / "ncu")


@pytest.fixture(scope="module")
def c1r(ncu100):
    return transfer.load_windows(C1R, ncu100)


@pytest.mark.data
def test_h200_records_are_h200_with_provenance_and_no_reserved_architecture():
    w = read_windows(H200 / "campaigns")
    assert w["gpu"].eq("NVIDIA H200").all()
    assert not w.duplicated(["campaign", "window_id"]).any()
    assert (w["status"] == "ok").all()
    for f in H200.rglob("*"):
        if f.is_file() and f.suffix in (".json", ".jsonl", ".txt", ".md", ".log"):
            assert not RESERVED.search(f.read_text()), f
    for sub in ("ncu", "nvml"):  # profiles under datasets/h200 were measured on an H200
        for f in (H200 / "profiles" / sub).glob("*.json"):
            assert json.loads(f.read_text())["gpu"]["name"] == "NVIDIA H200", f
    s = slowdown_table(w)
    for mode in ("mps", "timeslice"):  # the campaign as planned: >= 150 sets per mode, >= 16 jobs
        assert s.loc[s["mode"] == mode, "set"].nunique() >= 150
    assert s["job"].nunique() >= 16


def test_load_windows_describes_h200_windows_by_retimed_h100_profiles(c1r, ncu100):
    rows = c1r.rows
    assert c1r.gpu == "NVIDIA H200"
    assert rows["window_id"].nunique() == 36  # 16 sets + 2 repeats in each mode
    # re-timed: each row's own iteration-time feature is its H200 solo time, not the H100 profile's
    assert np.allclose(rows["t_log_iter_ms"], np.log(rows["solo_ms"]))
    assert not np.allclose(rows["t_log_iter_ms"], [np.log(ncu100[j].iteration_ms) for j in rows["job"]])
    # the same kernels: GPU time per iteration (busy x iteration) is the H100 profile's (the feature caps busy at 1)
    busy_ms = np.array([ncu100[j].busy_fraction * ncu100[j].iteration_ms for j in rows["job"]])
    assert np.allclose(rows["t_busy"], np.minimum(busy_ms / rows["solo_ms"], 1))


def test_load_windows_keeps_only_windows_with_every_profile(ncu100):
    some = {j: ncu100[j] for j in ("lstm_lm-b64-fp32", "unet-b8-fp32", "se_resnet50-b32-fp32", "vgg11-b64-bf16")}
    ds = transfer.load_windows(C1R, some)
    assert set(ds.rows["set"]) == {"lstm_lm-b64-fp32+unet-b8-fp32", "lstm_lm-b64-fp32+se_resnet50-b32-fp32",
                                   "se_resnet50-b32-fp32+unet-b8-fp32"}
    with pytest.raises(InputError, match="no measured collocation"):
        transfer.load_windows(C1R, {"lstm_lm-b64-fp32": ncu100["lstm_lm-b64-fp32"]})
    with pytest.raises(InputError, match="no such"):
        transfer.load_windows(H200 / "nowhere", ncu100)


def test_fill_missing_takes_stream_overlap_from_the_other_gpu(ncu100):
    ncu200 = load_profiles_dir(H200 / "profiles" / "ncu")
    assert ncu200["lstm_lm-b64-fp32"].stream_overlap is None
    filled = transfer.fill_missing(ncu200, ncu100)
    assert filled["lstm_lm-b64-fp32"].stream_overlap == ncu100["lstm_lm-b64-fp32"].stream_overlap > 1
    assert filled["lstm_lm-b64-fp32"].dram_util_pct == ncu200["lstm_lm-b64-fp32"].dram_util_pct  # nothing else taken
    assert filled["lstm_lm-b64-fp32"].meta["filled_from_other_profile"]["gpu"] == "NVIDIA H100 80GB HBM3"


def test_zero_shot_scores_the_shipped_models_per_mode_and_subset(c1r):
    models = {m: Predictor.default(m) for m in ("mps", "timeslice")}
    table, pred = transfer.zero_shot(models, c1r, {"pairs": lambda d: (d["n_jobs"] == 2).to_numpy()})
    assert set(zip(table["mode"], table["rows"])) == {(m, r) for m in models for r in ("all", "pairs")}
    full = table[table["rows"] == "all"].set_index("mode")
    assert (full["n_sets"] == 18).all()  # windows, repeats included
    assert len(pred) == len(c1r.rows) and np.isfinite(pred["pred"]).all() and (pred["pred"] >= 1).all()
    per_job = transfer.per_job_mape(pred)
    assert set(per_job["job"]) == set(c1r.rows["job"])
    # the table's MAPE is the mean of the rows' absolute percentage errors
    mps = pred[pred["mode"] == "mps"]
    assert full.loc["mps", "slowdown_mape_pct"] == pytest.approx(float(np.mean(np.abs(mps["pred"] / mps["slowdown"] - 1)) * 100))


def test_learning_curve_never_tests_on_a_trained_set(c1r, monkeypatch):
    seen = []
    fit = transfer._fit

    def spy(df, mode):
        seen.append(set(df["set"]))
        return fit(df, mode)

    monkeypatch.setattr(transfer, "_fit", spy)
    curve = transfer.learning_curve(c1r, None, modes=("mps",), fractions=(0.5, 1.0), seeds=(0,), n_folds=2)
    assert list(curve["fraction"]) == [0.5, 1.0, 0.5, 1.0] and (curve["variant"] == "new GPU only").all()
    folds = transfer.set_folds(c1r.for_mode("mps")["set"], 2, 0)
    for (_, r), trained in zip(curve.iterrows(), seen):
        assert not trained & set(folds[r["fold"]])  # grouped by set: repeats of a test set are not trained on
        assert len(trained) == r["n_train_sets"]
    assert seen[0] < seen[1] and seen[2] < seen[3]  # nested fractions
    assert transfer.curve_summary(curve)["n_train_sets"].tolist() == [4.0, 8.0]


def test_same_set_pairs_the_measurements_of_both_gpus():
    old = slowdown_table(read_windows(DATA / "campaigns" / "h100-c1"))
    new = slowdown_table(read_windows(C1R))
    pairs = transfer.same_set(old, new)
    assert len(pairs) > 0
    row = pairs.iloc[0]
    o = old[(old["mode"] == row["mode"]) & (old["set"] == row["set"]) & (old["job"] == row["job"])]["slowdown"]
    n = new[(new["mode"] == row["mode"]) & (new["set"] == row["set"]) & (new["job"] == row["job"])]["slowdown"]
    assert row["slowdown_old"] == pytest.approx(o.mean()) and row["windows_old"] == len(o)
    assert row["slowdown_new"] == pytest.approx(n.mean()) and row["windows_new"] == len(n)
    summary = transfer.same_set_summary(pairs)
    assert set(summary["mode"]) <= {"mps", "timeslice"} and (summary["job_rows"] > 0).all()


def test_transfer_study_script_refuses_bad_arguments(capsys, tmp_path):
    script = load_study("transfer_study")
    assert script.main(["--fractions", "0,1"]) == 2
    assert "--fractions" in capsys.readouterr().err
    assert script.main(["--seeds", "a"]) == 2
    assert "--seeds" in capsys.readouterr().err
    assert script.main(["--h200", str(H200 / "nowhere"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nowhere" in err and "no such" in err


def test_gpm_held_out_models_read_only_what_gpm_profiles_give():
    """The profile-swap study's GPM models are GPM models: their trees never read a feature a GPM profile lacks
    (ncu-only fields), while the ncu models do read them."""
    from colopred.runtime.sources import GPM_LACKS

    gpm = transfer.load_windows(C1R, load_profiles_dir(H200 / "profiles" / "nvml"))
    held = transfer._held_out_models(gpm, set(), ("mps",), "nvml")["mps"]
    assert held.features_ and not [f for f in held.features_ if f.endswith(GPM_LACKS)]
    ncu = transfer._held_out_models(gpm, set(), ("mps",))["mps"]
    assert [f for f in ncu.features_ if f.endswith(GPM_LACKS)]
