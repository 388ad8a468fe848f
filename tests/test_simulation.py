"""The cluster simulation: outcomes follow the measured slowdowns, policies keep their rules, every job finishes."""

import numpy as np
import pandas as pd
import pytest

from colopred.errors import InputError
from colopred.profile import JobProfile
from colopred.research.simulation import (
    GAVEL_TO_ZOO,
    POLICIES,
    MeasuredSets,
    TraceJob,
    read_gavel_trace,
    simulate,
    summarize,
)

from .conftest import DATA, ROOT

A, B, C = "resnet18-b64-fp32", "gpt2_small-b8-bf16", "lstm_lm-b64-fp32"
PROFILES = {n: JobProfile.from_json(DATA / "profiles" / "ncu" / f"{n}.json") for n in (A, B, C)}


def _sets(measured: dict, predicted: dict | None = None) -> MeasuredSets:
    rows, pred = [], []
    for members, slow in measured.items():
        for job, s in zip(members, slow):
            rows.append({"set": "+".join(sorted(members)), "job": job, "slowdown": s})
            pred.append((predicted or measured)[members][members.index(job)])
    return MeasuredSets(pd.DataFrame(rows), np.array(pred))


def _job(i, zoo, arrival, seconds):
    return TraceJob(i, "x", zoo, arrival, round(seconds * 1e3 / PROFILES[zoo].iteration_ms))


def test_a_shared_gpu_runs_each_job_at_its_measured_slowdown():
    sets = _sets({(A, B): (1.5, 2.0)})
    trace = [_job(0, A, 0.0, 100.0), _job(1, B, 0.0, 100.0)]
    run = simulate(trace, PROFILES, sets, n_gpus=1, policy="random").set_index("job_id")
    solo = run["solo_s"]
    # together until B's... A finishes first: at 1.5 x its solo time; B then runs alone for what is left
    t_a = 1.5 * solo[0]
    assert run.loc[0, "finish_s"] == pytest.approx(t_a)
    assert run.loc[1, "finish_s"] == pytest.approx(t_a + (solo[1] - t_a / 2.0))
    alone = simulate(trace, PROFILES, sets, n_gpus=1, policy="one per GPU").set_index("job_id")
    assert alone.loc[1, "start_s"] == pytest.approx(alone.loc[0, "finish_s"])  # waits its turn
    assert summarize(alone)["mean_slowdown_vs_solo"] == pytest.approx(1.0)


def test_policies_use_only_measured_sets_and_colopred_follows_the_predictions():
    # A+B measured and good, A+C measured but predicted (and measured) worse than one job alone: never used by colopred
    sets = _sets({(A, B): (1.2, 1.3), (A, C): (3.0, 3.0)})
    trace = [_job(0, A, 0.0, 50.0), _job(1, C, 1.0, 50.0), _job(2, B, 2.0, 50.0)]
    run = simulate(trace, PROFILES, sets, n_gpus=1, policy="colopred").set_index("job_id")
    assert run.loc[1, "start_s"] >= run.loc[0, "finish_s"] - 1e-9  # C never shares with A
    assert run.loc[2, "start_s"] == pytest.approx(2.0)  # B joins A at once
    for policy in POLICIES:
        r = simulate(trace, PROFILES, _sets({(A, B): (1.2, 1.3)}), n_gpus=1, policy=policy).set_index("job_id")
        assert r.loc[1, "start_s"] >= r.loc[0, "finish_s"] - 1e-9  # A+C was never measured: no policy co-locates it
        assert (r["finish_s"] >= r["arrival_s"] + r["solo_s"] - 1e-6).all()


def test_the_shipped_trace_is_read_and_every_job_finishes_under_every_policy():
    trace = read_gavel_trace(ROOT / "datasets" / "traces" / "gavel-msr" / "0e4a51.trace", max_jobs=40)
    assert len(trace) == 40 and all(j.zoo_job in GAVEL_TO_ZOO.values() for j in trace)
    profiles = {j.zoo_job: JobProfile.from_json(DATA / "profiles" / "ncu" / f"{j.zoo_job}.json") for j in trace}
    names = sorted(profiles)
    rng = np.random.default_rng(0)
    sets = _sets({(a, b): tuple(rng.uniform(1.1, 1.9, 2)) for i, a in enumerate(names) for b in names[i + 1:]})
    results = {p: summarize(simulate(trace, profiles, sets, n_gpus=2, policy=p)) for p in POLICIES}
    for p, r in results.items():
        assert np.isfinite(list(r.values())).all(), p
    assert results["colopred"]["mean_jct_h"] < results["one per GPU"]["mean_jct_h"]  # two jobs per GPU at < 2x each


def test_a_trace_of_another_format_is_refused(tmp_path):
    bad = tmp_path / "t.trace"
    bad.write_text("ResNet-18 (batch size 16)\tcmd\t-step\t1\n")
    with pytest.raises(InputError, match="7 tab-separated columns"):
        read_gavel_trace(bad)
    bad.write_text("NewModel\tcmd\t-step\t1\t100\t0.0\t1\n")
    with pytest.raises(InputError, match="no zoo job mapped"):
        read_gavel_trace(bad)
