"""Label-noise analysis (research.noise) on hand-made tables with known answers and on recorded windows."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from colopred.measurement.harness.reader import read_windows, slowdown_table
from research.noise import PAIR_KINDS, repeat_pairs, solo_time_effect, spread_table

DATA = Path(__file__).resolve().parents[1] / "datasets" / "h100"


def rows(specs):
    """Measurements of one (mode, set, job) per spec: (campaign, segment, gpu, solo_ms, colo_ms)."""
    out = []
    for job, (camp, seg, gpu, solo, colo) in specs:
        out.append({"campaign": camp, "segment": seg, "gpu_uuid": gpu, "mode": "mps", "set": "a+b", "job": job,
                    "solo_ms": solo, "colo_ms": colo, "slowdown": colo / solo})
    return pd.DataFrame(out)


def test_pairs_are_labelled_by_what_separates_them():
    df = rows([("a", ("c1", 0, "GPU-1", 10.0, 20.0)), ("a", ("c1", 0, "GPU-1", 10.0, 21.0)),  # same run
               ("a", ("c2", 0, "GPU-1", 10.0, 22.0)),  # same GPU, another campaign
               ("a", ("c3", 0, "GPU-2", 10.0, 24.0))])  # another GPU
    p = repeat_pairs(df, {"a": 0.5}).set_index(["dlog_colo"])
    kinds = dict(zip(np.round(p.index, 6), p["kind"]))
    assert kinds[round(np.log(20 / 21), 6)] == PAIR_KINDS[0]
    assert kinds[round(np.log(20 / 22), 6)] == PAIR_KINDS[1]
    assert kinds[round(np.log(20 / 24), 6)] == PAIR_KINDS[2]
    assert len(p) == 6 and p["host_bound"].all()
    t = spread_table(repeat_pairs(df, {"a": 0.5}))
    same_run = t[t["kind"] == PAIR_KINDS[0]].iloc[0]
    assert same_run["pairs"] == 1 and same_run["slowdown_median_pct"] == pytest.approx(100 * np.log(21 / 20))


def test_a_collocated_time_that_does_not_move_gives_slope_minus_one():
    rng = np.random.default_rng(0)
    solo = 10 * np.exp(rng.normal(0, 0.1, 12))
    fixed = rows([("a", (f"c{i}", 0, f"GPU-{i}", s, 25.0)) for i, s in enumerate(solo)])
    e = solo_time_effect(repeat_pairs(fixed, {"a": 0.5}, value="slowdown")).iloc[0]
    assert e["slope_slowdown_on_solo"] == pytest.approx(-1.0) and e["residual_median_pct"] == pytest.approx(0.0, abs=1e-9)
    assert e["corr_prediction_measured"] == pytest.approx(1.0)  # a "prediction" equal to the measurement
    moving = rows([("b", (f"c{i}", 0, f"GPU-{i}", s, 2.5 * s)) for i, s in enumerate(solo)])
    e = solo_time_effect(repeat_pairs(moving, {"b": 1.0})).iloc[0]
    assert e["slope_slowdown_on_solo"] == pytest.approx(0.0, abs=1e-9) and e["job_class"] == "saturating"


def test_recorded_repeats_of_host_bound_jobs_spread_more_than_the_others():
    w = read_windows([DATA / "campaigns" / "h100-c14", DATA / "campaigns" / "h100-c14r"])
    slow = slowdown_table(w)
    busy = {"alexnet-b16-fp32": 0.5, "dlrm-b2048-fp32": 0.5, "dlrm-b512-fp32": 0.5, "gpt2_small-b8-bf16": 0.5,
            "convnext_tiny-b32-bf16": 0.5, "mobilenet_v2-b32-fp32-loader": 0.5, "shufflenet_v2-b32-fp32": 0.5}
    busy = {j: busy.get(j, 1.0) for j in slow["job"].unique()}  # h100-c14's host-bound jobs (its NOTES.md)
    t = spread_table(repeat_pairs(slow, busy)).set_index(["job_class", "kind"])["slowdown_median_pct"]
    assert set(t.index.get_level_values("kind")) == {PAIR_KINDS[0], PAIR_KINDS[2]}  # two GPUs, one run each
    for kind in (PAIR_KINDS[0], PAIR_KINDS[2]):
        assert t[("host-bound (busy < 0.8)", kind)] > 2 * t[("saturating", kind)]
