#!/usr/bin/env python3
"""Leave-architecture-out by the role of the unseen job: the predicted job itself, or one of its co-runners.

``evaluation.splits("leave-arch")`` trains without every set holding an architecture and tests that architecture's
jobs: the job predicted is unseen, its co-runners may be seen. A scheduler also predicts a seen job (a zoo job, a
job it has run) beside an unseen one. This study fits the same folds (colopred with its calibrated interval, every
architecture held out in turn) and scores, per fold, both kinds of test row of the held-out sets: ``target unseen``
(the split's own rows) and ``co-runner unseen`` (a job of another architecture beside the held-out one; a row appears
once per held-out co-runner architecture).

Beside it, per held-out architecture, its unseen jobs' MAPE, mean signed error and coverage, and the MAPE that would
remain if each unseen job's own bias (its mean signed relative error over its rows) were known and removed: the share
of the leave-arch error that is a per-job offset, which no feature of the pair can fix unless the solo profile
reveals it. And what one measurement of the unseen job would buy a scheduler: its other rows' MAPE once its
predictions are scaled by measured over predicted slowdown of one of its rows (each of its rows in turn as that
one; a job of a single row is left out). ``target_rows.csv`` keeps every unseen job's rows (its set, measured and predicted
slowdown, interval) for ``research/dev_observed_shrinkage.py`` and ``research/probe_study.py``.

  PYTHONPATH=. python research/leave_arch_roles.py [--data datasets/h100] [--profiles ncu|nvml] [--out reports/h100/leave_arch_roles]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colopred.io import write_csv_atomic, write_text_atomic  # noqa: E402
from colopred.research.dataset import load_dataset  # noqa: E402
from colopred.research.evaluation import calibration_groups, covered, job_fit_args, new_model  # noqa: E402
from colopred.research.report import md_table  # noqa: E402
from colopred.runtime.features import FEATURES  # noqa: E402

MODES = ("timeslice", "mps")


def role_rows(df: pd.DataFrame, mode: str, source: str = "ncu", timeline: bool = True) -> pd.DataFrame:
    """One row per (fold, tested job row) of ``df`` (one mode): role, absolute percentage error, interval covered."""
    X, s = df[list(FEATURES)].to_numpy(), df["slowdown"].to_numpy()
    holds = df["set_archs"]
    out = []
    for arch in sorted(df["arch"].unique()):
        held = holds.map(lambda a: arch in a).to_numpy()
        tr, te = np.flatnonzero(~held), np.flatnonzero(held)
        if len(tr) == 0 or len(te) == 0:
            continue
        m = new_model(mode, source, timeline).fit(X[tr], s[tr], groups=calibration_groups(df, "leave-arch")[tr],
                                                  **job_fit_args(df.iloc[tr]))
        p, iv = m.predict_with_interval(X[te], jobs=df["job"].to_numpy()[te])
        out.append(pd.DataFrame({"held_out": arch,
                                 "job": df["job"].to_numpy()[te],
                                 "set": df["set"].to_numpy()[te],
                                 "role": np.where(df["arch"].to_numpy()[te] == arch, "target unseen", "co-runner unseen"),
                                 "slowdown": s[te], "pred": p, "lo": iv[:, 0], "hi": iv[:, 1],
                                 "error_pct": 100 * (p - s[te]) / s[te],
                                 "ape_pct": 100 * np.abs(p - s[te]) / s[te],
                                 "covered": covered(s[te], iv[:, 0], iv[:, 1])}))
    return pd.concat(out, ignore_index=True)


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """MAPE and interval coverage per (mode, role)."""
    g = rows.groupby(["mode", "role"], sort=False)
    return g.agg(rows=("ape_pct", "size"), slowdown_mape_pct=("ape_pct", "mean"),
                 interval_coverage_pct=("covered", lambda c: 100 * c.mean())).round(2).reset_index()


def without_job_bias(rows: pd.DataFrame) -> pd.Series:
    """Absolute percentage error of each row once its job's mean signed error (per mode) is subtracted."""
    bias = rows.groupby(["mode", "job"])["error_pct"].transform("mean")
    return (rows["error_pct"] - bias).abs()


def one_shot_ape(rows: pd.DataFrame) -> pd.Series:
    """Mean absolute percentage error of each row's prediction scaled by s/p̂ of one other row of its job (mode),
    averaged over the choice of that row: with e the signed relative error, (1 + e) / (1 + e_k) − 1. NaN for a job
    of one row."""
    e = rows["error_pct"].to_numpy() / 100.0
    out = np.full(len(rows), np.nan)
    for idx in rows.groupby(["mode", "job"]).indices.values():
        if len(idx) < 2:
            continue
        ej = e[idx]
        scaled = np.abs((1 + ej)[:, None] / (1 + ej)[None, :] - 1)  # [row, calibration row]
        np.fill_diagonal(scaled, np.nan)
        out[idx] = 100 * np.nanmean(scaled, axis=1)
    return pd.Series(out, index=rows.index)


def target_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The ``target unseen`` rows, with each row's error once its job's bias is removed (``debiased``) and once its
    job is scaled by one of its measured rows (``one_shot``)."""
    return rows[rows["role"] == "target unseen"].assign(debiased=without_job_bias, one_shot=one_shot_ape)


def by_architecture(target: pd.DataFrame) -> pd.DataFrame:
    """Per (mode, held-out architecture) of :func:`target_rows`: MAPE, mean signed error (+: over-predicted),
    coverage, the MAPE left once each job's own bias is removed and once it is scaled by one of its measured rows;
    worst MAPE first within each mode."""
    g = target.groupby(["mode", "held_out"], sort=False)
    out = g.agg(jobs=("job", "nunique"), rows=("ape_pct", "size"), slowdown_mape_pct=("ape_pct", "mean"),
                mean_error_pct=("error_pct", "mean"), mape_without_job_bias_pct=("debiased", "mean"),
                mape_one_measured_pct=("one_shot", "mean"),
                interval_coverage_pct=("covered", lambda c: 100 * c.mean())).reset_index()
    return (out.sort_values(["mode", "slowdown_mape_pct"], ascending=[False, False], kind="stable")
            .round(2).reset_index(drop=True))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="datasets/h100")
    ap.add_argument("--profiles", choices=("ncu", "nvml"), default="ncu")
    ap.add_argument("--out", default="reports/h100/leave_arch_roles")
    a = ap.parse_args(argv)
    ds = load_dataset(a.data, profile_source=a.profiles)
    rows = pd.concat([role_rows(ds.for_mode(mode).reset_index(drop=True), mode, ds.profile_source, ds.timeline)
                      .assign(mode=mode) for mode in MODES], ignore_index=True)
    table = summary(rows)
    target = target_rows(rows)
    debiased = (target.groupby("mode", sort=False)
                .agg(mape_without_job_bias_pct=("debiased", "mean"), mape_one_measured_pct=("one_shot", "mean"))
                .round(2).reset_index())
    table = table.merge(debiased.assign(role="target unseen"), on=["mode", "role"], how="left")
    arch_table = by_architecture(target)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv_atomic(table, out / "table.csv", index=False)
    write_csv_atomic(arch_table, out / "by_arch.csv", index=False)
    write_csv_atomic(target[["mode", "held_out", "job", "set", "slowdown", "pred", "lo", "hi"]], out / "target_rows.csv",
                     index=False, float_format="%.6g")
    cmd = f"PYTHONPATH=. python research/leave_arch_roles.py --data {a.data} --profiles {a.profiles} --out {a.out}"
    text = (f"# Leave-architecture-out by the role of the unseen job\n\n`{cmd}` (data hash `{ds.data_hash}`, "
            f"{a.profiles} profiles). The script's docstring has the design. `target unseen` is the report's "
            "leave-arch split; `co-runner unseen` scores the other jobs of the same held-out sets; "
            "`mape_without_job_bias_pct`, the target rows' MAPE once each unseen job's own mean signed error is "
            "removed; `mape_one_measured_pct`, once each unseen job's predictions are scaled by measured over "
            "predicted slowdown of one of its rows (its other rows scored, each row in turn the measured one).\n\n"
            + md_table(table)
            + "\n\n## By held-out architecture (`by_arch.csv`)\n\nIts unseen jobs' rows; `mean_error_pct` > 0: "
            "over-predicted.\n\n" + md_table(arch_table) + "\n")
    write_text_atomic(out / "README.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
