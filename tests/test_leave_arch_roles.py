"""The per-architecture table of research/leave_arch_roles.py: how much of the leave-arch error is each unseen job's
own bias."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from .conftest import load_study

study = load_study("leave_arch_roles")


def _rows(errors: dict[str, list[float]], mode="mps", role="target unseen"):
    """Rows of the study's shape: job 'a-bN' of architecture 'a', signed errors in %."""
    out = []
    for job, errs in errors.items():
        e = np.asarray(errs, float)
        out.append(pd.DataFrame({"held_out": job.split("-")[0], "job": job, "role": role, "error_pct": e,
                                 "ape_pct": np.abs(e), "covered": np.abs(e) < 5, "mode": mode}))
    return pd.concat(out, ignore_index=True)


def test_a_constant_offset_per_job_is_all_bias():
    rows = _rows({"alpha-b1": [8.0, 8.0, 8.0], "beta-b1": [-4.0, -4.0]})
    assert np.allclose(study.without_job_bias(rows), 0.0)
    table = study.by_architecture(study.target_rows(rows)).set_index("held_out")
    assert table.loc["alpha", "slowdown_mape_pct"] == pytest.approx(8.0)
    assert table.loc["beta", "mean_error_pct"] == pytest.approx(-4.0)
    assert (table["mape_without_job_bias_pct"] == 0).all()
    # worst architecture first
    assert list(table.index) == ["alpha", "beta"]


def test_scatter_around_zero_is_not_bias_and_jobs_are_debiased_apart():
    rows = _rows({"alpha-b1": [6.0, -6.0], "alpha-b2": [10.0, 14.0]})
    # alpha-b1 has no bias (|±6| stays 6), alpha-b2 a bias of 12 (|−2|, |2| remain)
    assert list(study.without_job_bias(rows)) == pytest.approx([6.0, 6.0, 2.0, 2.0])
    row = study.by_architecture(study.target_rows(rows)).iloc[0]
    assert row["jobs"] == 2 and row["rows"] == 4
    assert row["slowdown_mape_pct"] == pytest.approx(9.0)
    assert row["mape_without_job_bias_pct"] == pytest.approx(4.0)
    assert row["interval_coverage_pct"] == pytest.approx(0.0)


def test_only_unseen_targets_enter_the_table_and_modes_stay_apart():
    rows = pd.concat([_rows({"alpha-b1": [3.0]}, mode="mps"), _rows({"alpha-b1": [-7.0]}, mode="timeslice"),
                      _rows({"beta-b1": [50.0]}, role="co-runner unseen")], ignore_index=True)
    table = study.by_architecture(study.target_rows(rows))
    assert set(table["held_out"]) == {"alpha"}
    by_mode = table.set_index("mode")["mean_error_pct"]
    assert by_mode["mps"] == pytest.approx(3.0) and by_mode["timeslice"] == pytest.approx(-7.0)
    # a job's bias is per mode: each mode's single row is its own bias
    assert np.allclose(study.without_job_bias(rows[rows["role"] == "target unseen"]), 0.0)


def test_one_measured_row_removes_a_constant_offset_and_leaves_the_scatter():
    rows = _rows({"alpha-b1": [10.0, 10.0, 10.0], "beta-b1": [0.0, 21.0]})
    one = study.one_shot_ape(rows)
    # a constant +10% is removed exactly by any other row's ratio
    assert np.allclose(one[:3], 0.0)
    # beta: scaled by the other row, 1/1.21 − 1 and 1.21/1 − 1
    assert list(one[3:]) == pytest.approx([100 * (1 - 1 / 1.21), 21.0])
    row = study.by_architecture(study.target_rows(rows)).set_index("held_out").loc["beta"]
    assert row["mape_one_measured_pct"] == pytest.approx((100 * (1 - 1 / 1.21) + 21.0) / 2, abs=0.01)  # table rounds to 0.01


def test_a_job_of_one_row_has_no_one_shot_figure():
    rows = _rows({"alpha-b1": [5.0], "beta-b1": [2.0, 4.0]})
    one = study.one_shot_ape(rows)
    assert np.isnan(one[0]) and not np.isnan(one[1:]).any()


def test_the_bias_study_counts_idle_gaps_of_the_merged_gpu_activity_and_scores_out_of_sample():
    """``research/job_bias_study.py``: overlapping GPU activities are merged before gaps are counted, host events are
    not GPU activity; the grouped out-of-sample R² is high for a bias that is a function of a candidate and at most
    about zero for noise."""
    from sklearn.linear_model import LinearRegression

    bias = load_study("job_bias_study")
    ev = pd.DataFrame({"kind": ["kernel", "kernel", "runtime", "memcpy", "kernel"],
                       "name": ["a", "b", "cudaStreamSynchronize", "Memcpy DtoH", "c"],
                       "start_us": [0.0, 5.0, 20.0, 60.0, 700.0], "dur_us": [10.0, 10.0, 1.0, 5.0, 10.0]})
    g = bias.timeline_gaps(ev, iterations=2)  # busy 0-15, 60-65, 700-710: gaps of 45 and 635 µs
    assert g["gaps_over_20us_per_iter"] == 1.0 and g["gaps_over_100us_per_iter"] == 0.5 and g["gaps_over_500us_per_iter"] == 0.5
    assert g["idle_ms_per_iter"] == pytest.approx((45 + 635) / 1e3 / 2) and g["syncs_per_iter"] == 0.5
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    groups = np.repeat(np.arange(20), 3)
    assert bias.out_of_sample_r2(X, 0.1 * X[:, 0], groups, LinearRegression()) > 0.99
    assert bias.out_of_sample_r2(X, rng.normal(size=60), groups, LinearRegression()) < 0.05


def test_the_bias_study_weights_launch_attributes_by_kernel_time(monkeypatch):
    """``job_bias_study.launch_attributes``: each attribute is weighted by its kernel's duration, the register-file
    share is registers × resident threads / 65,536 capped at 1, and the grain shares count kernel time, not kernels."""
    from types import SimpleNamespace

    bias = load_study("job_bias_study")
    kernels = pd.DataFrame({"duration_ns": [10e3, 30e3, 160e3],  # 10, 30 and 160 µs
                            "registers_per_thread": [32.0, 64.0, 255.0], "theo_occupancy_pct": [100.0, 50.0, 100.0],
                            "block_size": [128.0, 256.0, 512.0], "waves_per_sm": [0.5, 2.0, 8.0]})
    monkeypatch.setattr("colopred.measurement.profiling.ncu_csv.read_ncu_csv", lambda path: SimpleNamespace(kernels=kernels))
    a = bias.launch_attributes("any.csv")
    w = np.array([10, 30, 160]) / 200
    assert a["registers_per_thread"] == pytest.approx(w @ [32, 64, 255])
    # 32 × 2048 / 65536 = 1; 64 × 1024 / 65536 = 1; 255 × 2048 / 65536 > 1 -> 1
    assert a["register_file_share"] == pytest.approx(1.0)
    assert a["block_size"] == pytest.approx(w @ [128, 256, 512])
    assert a["median_kernel_us"] == 160.0  # the 160 µs kernel holds 80% of the time
    assert a["kernels_under_20us_share"] == pytest.approx(0.05) and a["kernels_under_100us_share"] == pytest.approx(0.2)
    assert a["under_one_wave_share"] == pytest.approx(0.05)


def test_the_bias_study_reads_launch_attributes_from_a_real_report():
    """On a recorded H100 ncu report (resnet18-b64): every attribute is finite and in its range, and the shares agree
    with the kernel table read independently."""
    from colopred.measurement.profiling.ncu_csv import read_ncu_csv

    bias = load_study("job_bias_study")
    path = Path(__file__).parent / "fixtures" / "ncu_resnet18_b64_h100.csv.gz"
    a = bias.launch_attributes(path)
    k = read_ncu_csv(path).kernels
    t = k["duration_ns"].to_numpy(float)
    assert 0 < a["register_file_share"] <= 1 and 16 <= a["registers_per_thread"] <= 255
    assert a["kernels_under_20us_share"] < a["kernels_under_100us_share"] < 1
    assert a["kernels_under_100us_share"] == pytest.approx(t[t < 100e3].sum() / t.sum())
    assert a["under_one_wave_share"] == pytest.approx(t[k["waves_per_sm"].to_numpy() < 1].sum() / t.sum())
