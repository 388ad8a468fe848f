#!/usr/bin/env python3
"""Does anything in a job's solo profile or solo timeline foretell its leave-architecture-out bias? (issue 23)

Most of the leave-architecture-out error is each unseen job's own offset: time-slicing 4.78% falls to 2.67% once every
unseen job's mean signed error is removed (``reports/h100/leave_arch_roles``). If a solo measurement predicted that
offset, it would belong in the trees' features; if nothing does, a measured collocation (``colopred calibrate``) is
the way to remove it.

The bias of job j in a mode is b_j = mean over its leave-arch target rows (``target_rows.csv``) of log(ŝ / s):
> 0 over-predicted. Candidates: every numeric field of its ncu profile (with its kernel-share distributions) and, from
its solo torch.profiler timeline (``datasets/h100/timelines/JOB.timeline.csv.gz``), the GPU's idle gaps per
iteration longer than each of ``GAP_THRESHOLDS_US`` (a time-sliced job that leaves the GPU idle and comes back waits
for the co-runner's slice), those gaps per ms of iteration, the idle ms per iteration and the host syncs per
iteration. Two tests: each candidate's correlation with b_j (Pearson, over the jobs), and the out-of-sample R² of b_j
predicted from all candidates together by a ridge regression and by a random forest, each job predicted by a model
fitted on the other architectures' jobs (R² ≤ 0: no better than the mean bias). ``research/dev_features.py --bias-rank``
asked the narrower question before (the rank correlation of the time-slicing bias with gaps over each threshold, per
ms, on the development rows) to choose ``RELEASE_GAP_US``; its gaps are the ones counted here.

  PYTHONPATH=. python research/job_bias_study.py [--rows reports/h100/leave_arch_roles/target_rows.csv]
      [--data datasets/h100] [--out reports/h100/job_bias]

Writes ``job_bias.csv`` (per mode and job: bias, rows, candidates), ``correlates.csv`` (per mode and candidate:
correlation; the rows ``ridge (all)``, ``forest (all)``: out-of-sample R²) and ``README.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "research"))

import dev_features  # noqa: E402
from colopred.io import write_csv_atomic, write_text_atomic  # noqa: E402
from colopred.measurement.profiling.timeline import read_timeline  # noqa: E402
from colopred.research.report import shown_path  # noqa: E402

GAP_THRESHOLDS_US = (20, 100, 500)
"""Idle gaps counted: 20 µs (a launch's latency), 100 µs, 500 µs (half of the 1 ms slice the kernel simulator uses)."""
GPU_KINDS = ("kernel", "memset", "memcpy")
SHORT_KERNEL_US = (20, 100)
"""Kernel-grain thresholds: 20 µs (a launch's latency), 100 µs (the gap threshold above)."""
REGISTERS_PER_SM = 65536
"""32-bit registers per SM on Hopper (CUDA C Programming Guide, compute capability 9.0 table)."""
MAX_THREADS_PER_SM = 2048
"""Resident threads per SM at 100% theoretical occupancy (64 warps of 32, compute capability 9.0)."""
FOREST_SEED = 0


def timeline_gaps(events: pd.DataFrame, iterations: int) -> dict[str, float]:
    """Idle-gap statistics of one solo timeline (``kind``, ``name``, ``start_us``, ``dur_us`` rows of ``iterations``
    timed iterations): gaps between the GPU's busy intervals (its activities merged) longer than each threshold, per
    iteration; the idle ms per iteration in gaps over the smallest threshold; the host syncs per iteration."""
    gap, _ = dev_features.kernel_gaps_us(events, GPU_KINDS)
    out = {f"gaps_over_{th}us_per_iter": float((gap > th).sum()) / iterations for th in GAP_THRESHOLDS_US}
    out["idle_ms_per_iter"] = float(gap[gap > GAP_THRESHOLDS_US[0]].sum()) / 1e3 / iterations
    out["syncs_per_iter"] = float(events["name"].astype(str).str.contains("Synchronize|cudaMemcpy", regex=True).sum()) / iterations
    return out


def launch_attributes(report: Path) -> dict[str, float]:
    """Duration-weighted launch attributes of one raw ncu report (``read_ncu_csv``'s kernel table): registers per
    thread; the register-file share of an SM its resident threads hold, registers × (theoretical occupancy × 2,048
    threads) / 65,536 (capped at 1); the block size; the duration-weighted median kernel (µs); the share of kernel
    time in kernels shorter than each of ``SHORT_KERNEL_US`` and in grids of less than one wave."""
    from colopred.measurement.profiling.ncu_csv import read_ncu_csv
    from colopred.measurement.profiling.ncu_profile import weighted_mean, weighted_percentiles

    k = read_ncu_csv(report).kernels
    t = k["duration_ns"].to_numpy(float)
    regs = k["registers_per_thread"].to_numpy(float)
    resident = k["theo_occupancy_pct"].to_numpy(float) / 100 * MAX_THREADS_PER_SM
    out = {"registers_per_thread": weighted_mean(regs, t),
           "register_file_share": weighted_mean(np.minimum(1.0, regs * resident / REGISTERS_PER_SM), t),
           "block_size": weighted_mean(k["block_size"].to_numpy(float), t),
           "median_kernel_us": weighted_percentiles(t / 1e3, t, qs=(50,))["p50"],
           "under_one_wave_share": float(t[k["waves_per_sm"].to_numpy(float) < 1].sum() / t.sum())}
    for th in SHORT_KERNEL_US:
        out[f"kernels_under_{th}us_share"] = float(t[t < th * 1e3].sum() / t.sum())
    return out


def profile_fields(doc: dict) -> dict[str, float]:
    """The numeric fields of a profile document, its distributions flattened (``dram_pct.p50``, ...)."""
    out = {k: float(v) for k, v in doc.items() if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "schema_version"}
    for name, dist in (doc.get("distributions") or {}).items():
        out.update({f"{name}.{k}": float(v) for k, v in (dist or {}).items() if isinstance(v, (int, float))})
    return out


def candidates(data: Path) -> pd.DataFrame:
    """One row per job with an ncu profile, a solo timeline and a raw ncu report: its profile fields, timeline gap
    statistics and launch attributes."""
    rows = {}
    for f in sorted((data / "profiles" / "ncu").glob("*.json")):
        doc = json.loads(f.read_text())
        tl = data / "timelines" / f"{doc['name']}.timeline.csv.gz"
        raw = data / "ncu_reports" / f"{doc['name']}.csv.gz"
        if not (tl.is_file() and raw.is_file()):
            continue
        meta = json.loads(tl.with_name(f"{doc['name']}.timeline.json").read_text())
        r = profile_fields(doc) | timeline_gaps(read_timeline(tl), int(meta["iterations"])) | launch_attributes(raw)
        for th in GAP_THRESHOLDS_US:
            r[f"gaps_over_{th}us_per_ms"] = r[f"gaps_over_{th}us_per_iter"] / r["iteration_ms"]
        rows[doc["name"]] = r
    return pd.DataFrame.from_dict(rows, orient="index").dropna(axis=1, how="any")


def job_bias(rows: pd.DataFrame) -> pd.DataFrame:
    """Per mode and job: the mean log(ŝ / s) of its leave-arch target rows, their count, and its architecture."""
    r = rows.assign(log_err=np.log(rows["pred"] / rows["slowdown"]))
    g = r.groupby(["mode", "job"]).agg(bias=("log_err", "mean"), rows=("log_err", "size"), held_out=("held_out", "first"))
    return g.reset_index()


def out_of_sample_r2(X: np.ndarray, y: np.ndarray, groups: np.ndarray, model) -> float:
    """R² of y predicted for each group's members by ``model`` fitted on the other groups (1 − SSE / SS around the
    mean of y): 0 is no better than the mean bias."""
    from sklearn.base import clone

    pred = np.empty_like(y)
    for g in np.unique(groups):
        test = groups == g
        pred[test] = clone(model).fit(X[~test], y[~test]).predict(X[test])
    return float(1 - ((y - pred) ** 2).sum() / ((y - y.mean()) ** 2).sum())


def study(rows: pd.DataFrame, cand: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.linear_model import RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    bias = job_bias(rows).merge(cand, left_on="job", right_index=True)
    out = []
    for mode, b in bias.groupby("mode", sort=True):
        y = b["bias"].to_numpy()
        cols = [c for c in cand.columns if b[c].nunique() > 3]  # a field of a few values (iterations profiled) says nothing
        for col in cols:
            out.append({"mode": mode, "candidate": col, "jobs": len(b), "correlation": float(np.corrcoef(b[col].to_numpy(float), y)[0, 1])})
        X = b[cols].to_numpy(float)
        models = {"ridge (all)": make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-2, 3, 11))),
                  "forest (all)": RandomForestRegressor(n_estimators=300, min_samples_leaf=3, random_state=FOREST_SEED)}
        for name, m in models.items():
            out.append({"mode": mode, "candidate": name, "jobs": len(b), "out_of_sample_r2": out_of_sample_r2(X, y, b["held_out"].to_numpy(), m)})
    return bias, pd.DataFrame(out)


def readme(bias: pd.DataFrame, corr: pd.DataFrame, a) -> str:
    """The study's README: the command, the spread of the biases, the strongest correlates and the R² of each mode."""
    lines = ["# Does a solo measurement foretell an unseen job's bias?", "",
             f"`PYTHONPATH=. python research/job_bias_study.py --rows {shown_path(a.rows, ROOT)} --data {shown_path(a.data, ROOT)} "
             f"--out {shown_path(a.out, ROOT)}`. The design is in the script's docstring: a job's bias is the mean log(predicted / "
             "measured) of its leave-arch rows (> 0 over-predicted); candidates are its ncu profile's fields, its solo "
             "timeline's idle gaps and its raw ncu report's launch attributes (register-file share, kernel grain); R² is out of sample, each architecture's jobs predicted from the others'.", "",
             "| mode | jobs | bias spread (sd of log) | strongest correlations | out-of-sample R², ridge | out-of-sample R², forest |",
             "|---|---|---|---|---|---|"]
    for mode, c in corr.groupby("mode", sort=True):
        r = c.dropna(subset=["correlation"])
        top = r.reindex(r["correlation"].abs().sort_values(ascending=False).index).head(4)
        r2 = c.set_index("candidate")["out_of_sample_r2"]
        sd = bias.loc[bias["mode"] == mode, "bias"].std()
        lines.append(f"| {mode} | {int(c['jobs'].iloc[0])} | {sd:.3f} | "
                     + ", ".join(f"`{t.candidate}` {t.correlation:+.2f}" for t in top.itertuples())
                     + f" | {r2['ridge (all)']:+.2f} | {r2['forest (all)']:+.2f} |")
    best_r2, best_r = corr["out_of_sample_r2"].max(), corr["correlation"].abs().max()
    if best_r2 < 0:
        lines += ["", f"No candidate, alone or all together, predicts the bias of a job whose architecture the model never "
                  f"saw: the strongest correlation is {best_r:.2f} and both regressions do worse out of sample than the "
                  "mean bias (R² < 0). The bias is the job's own, and one measured collocation (`colopred calibrate`, "
                  "`reports/h100/probe/`) is what removes it.", ""]
    else:
        lines += ["", f"The candidates together explain up to {100 * best_r2:.0f}% of the bias's variance out of sample: "
                  "a lead for the trees' features.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="reports/h100/leave_arch_roles/target_rows.csv")
    ap.add_argument("--data", default="datasets/h100")
    ap.add_argument("--out", default="reports/h100/job_bias")
    a = ap.parse_args(argv)
    bias, corr = study(pd.read_csv(a.rows), candidates(Path(a.data)))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv_atomic(bias.round(6), out / "job_bias.csv", index=False)
    write_csv_atomic(corr.round(4), out / "correlates.csv", index=False)
    write_text_atomic(out / "README.md", readme(bias, corr, a))
    print((out / "README.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
