#!/usr/bin/env python3
"""Label noise study (issue 23, items 3 and 5): how far two measurements of the same slowdown differ, by what
separates them (the same run, another run on the same GPU, another GPU) and by job class (host-bound or not);
how much of the difference between machines follows the job's solo time (and whether colopred's predictions
follow it too); colopred's error by job class; and what longer windows and bracketed baselines do to the
window-to-window noise of host-bound jobs (``datasets/h100/window_noise``).

  PYTHONPATH=. python research/noise_study.py --data datasets/h100 --out reports/h100/noise     # ~1 min
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colopred.io import write_text_atomic  # noqa: E402
from colopred.measurement.harness.reader import read_windows, slowdown_table, solo_noise  # noqa: E402
from colopred.research.dataset import load_dataset  # noqa: E402
from colopred.research.evaluation import mape_pct, out_of_sample  # noqa: E402
from colopred.research.report import md_table as md  # noqa: E402
from research.noise import HOST_BOUND_BUSY, PAIR_KINDS, job_class, repeat_pairs, solo_time_effect, spread_table  # noqa: E402

# The window-length experiments on the same 14 jobs and 22 pairs (datasets/h100/README.md, "Noise"): campaign folder
# -> how its windows were taken.
WINDOW_CAMPAIGNS = {
    "campaigns/h100-c14": "60 iterations, a solo window after every 3 collocated",
    "campaigns/h100-c14r": "60 iterations, a solo window after every 3 collocated",
    "campaigns/h100-c14t": "60 iterations, a solo window after every 3 collocated",
    "window_noise/bracketed/h100-c15": "12 iterations, bracketed",
    "window_noise/bracketed/h100-c15b": "12 iterations, bracketed",
    "window_noise/bracketed/h100-c15t": "12 iterations, bracketed",
}


def window_table(data: Path, busy: dict[str, float]) -> pd.DataFrame:
    """Per campaign of WINDOW_CAMPAIGNS and job class: the median coefficient of variation of a job's solo windows in
    that run, the median relative spread (max − min)/mean of a set's repeated slowdowns, and the median timed
    iterations of a collocated window."""
    rows = []
    for folder, how in WINDOW_CAMPAIGNS.items():
        w = read_windows(data / folder)
        solo = solo_noise(w)
        slow = slowdown_table(w)
        g = slow.groupby(["set", "job"])["slowdown"]
        rep = g.agg(lambda x: (x.max() - x.min()) / x.mean() * 100)[g.size() > 1].reset_index()
        for hb in (True, False):
            sj, rj, sl = (t[t["job"].map(busy).lt(HOST_BOUND_BUSY) == hb] for t in (solo, rep, slow))
            rows.append({"campaign": Path(folder).name, "mode": w["mode"].iloc[0], "windows": how, "job_class": job_class(hb),
                         "solo_cv_median_pct": 100 * sj["cv"].median(), "repeated_slowdowns": len(rj),
                         "repeat_spread_median_pct": rj["slowdown"].median(), "repeat_spread_mean_pct": rj["slowdown"].mean(),
                         "colo_iterations_median": sl["iterations"].median()})
    return pd.DataFrame(rows)


def plot_solo_time_effect(pairs: pd.DataFrame, path: Path) -> None:
    """Δln s against Δln t_solo of the pairs measured on two GPUs, measured and predicted, one panel per mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from colopred.research.report import save_figure

    other = pairs[pairs["kind"] == PAIR_KINDS[2]]
    modes = list(other["mode"].unique())
    fig, axes = plt.subplots(1, len(modes), figsize=(5.5 * len(modes), 4.5), squeeze=False)
    for ax, mode in zip(axes[0], modes):
        d = other[other["mode"] == mode]
        hb = d["host_bound"]
        ax.scatter(100 * d.loc[~hb, "dlog_solo"], 100 * d.loc[~hb, "dlog_slowdown"], s=8, alpha=0.5, label="measured, busy ≥ 0.8")
        ax.scatter(100 * d.loc[hb, "dlog_solo"], 100 * d.loc[hb, "dlog_slowdown"], s=8, alpha=0.5, label="measured, host-bound")
        ax.scatter(100 * d["dlog_solo"], 100 * d["dlog_value"], s=6, alpha=0.35, marker="x", c="k", label="colopred (leave-arch)")
        lim = float(np.nanpercentile(np.abs(100 * d[["dlog_solo", "dlog_slowdown"]].to_numpy()), 99))
        ax.plot([-lim, lim], [lim, -lim], lw=0.8, c="grey", label="slope −1: collocated time unchanged")
        ax.set(xlim=(-lim, lim), ylim=(-lim, lim), title=f"{mode}: the same (set, job) on two GPUs",
               xlabel="solo time, Δln × 100 (%)", ylabel="slowdown, Δln × 100 (%)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="datasets/h100")
    ap.add_argument("--out", default="reports/h100/noise")
    a = ap.parse_args()
    data, out = Path(a.data), Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    ds = load_dataset(data, relabel=False)  # window-to-window noise: every window's own label, none averaged
    busy = {name: min(p.busy_fraction, 1.0) for name, p in ds.profiles.items()}
    spreads, effects, errors, all_pairs = [], [], [], []
    for mode in ("timeslice", "mps"):
        df = ds.for_mode(mode)
        df = df.assign(pred=out_of_sample(df, "leave-arch"))
        pairs = repeat_pairs(df, busy, value="pred")
        all_pairs.append(pairs)
        spreads.append(spread_table(pairs))
        effects.append(solo_time_effect(pairs))
        hb = df["t_busy"].lt(HOST_BOUND_BUSY)  # the busy fraction of the window's re-timed profile
        for cls, m in ((job_class(True), hb), (job_class(False), ~hb), ("all", hb | ~hb)):
            errors.append({"mode": mode, "job_class": cls, "rows": int(m.sum()),
                           "colopred_leave_arch_mape_pct": mape_pct(df.loc[m, "slowdown"].to_numpy(), df.loc[m, "pred"].to_numpy())})
    spread, effect, error = (pd.concat(spreads, ignore_index=True), pd.concat(effects, ignore_index=True), pd.DataFrame(errors))
    windows = window_table(data, busy)
    plot_solo_time_effect(pd.concat(all_pairs, ignore_index=True), out / "solo_time_effect.png")
    for name, t in (("spread", spread), ("solo_time_effect", effect), ("error_by_class", error), ("windows", windows)):
        t.to_csv(out / f"{name}.csv", index=False)
    text = f"""# Label noise (issue 23, items 3 and 5)

Dataset `{data}` (hash `{ds.data_hash}`), every measured window. `PYTHONPATH=. python research/noise_study.py --data {data}
--out {out}` rewrites this folder (~1 min). Host-bound: the job's solo busy fraction (ncu profile) below {HOST_BOUND_BUSY:g}.

## Two measurements of the same slowdown

Every two windows of the same (mode, set, job), by what separates them: the same run (one campaign and segment), another
run on the same GPU, another GPU. Relative difference = 100·|ln(a/b)|, of the slowdowns and of the solo and collocated
times they are formed from.

{md(spread)}

## Across machines, the slowdown follows the solo time

Pairs measured on two GPUs: slope of Δln s on Δln t_solo (through the origin; −1 if the collocated time did not move, 0 if
it moved with the solo time), their correlation, the median |Δln s| before and after removing that slope, and the same
slope of colopred's leave-architecture-out predictions (each window's members re-timed to their solo time there), with
their correlation to the measured Δln s.

{md(effect)}

![solo_time_effect](solo_time_effect.png)

A job that runs alone faster on another machine slows down more there: its collocated time, bound by the shared GPU,
moves less than its solo time. colopred's predictions follow with about the same slope, so most of the difference
between machines is signal the model uses, not noise; the spread of repeats on one GPU is the noise of a label.

## colopred's error by job class

Leave-architecture-out cross-validation on every architecture (the report's headline protocol); job class by the
busy fraction of the window's re-timed profile.

{md(error)}

## Longer windows and bracketed baselines (item 5)

The same 14 jobs and 22 pairs (each holding a host-bound job), one GPU per campaign: 60-iteration windows with a solo
window after every 3 collocated ones (`campaigns/h100-c14`, `h100-c14r`, `h100-c14t`), and the default 12-iteration
windows with every member measured alone right before and right after each collocated window (`colopred measure
--bracket`: `window_noise/bracketed/h100-c15`, `h100-c15b` (MPS, the same GPU a run later), `h100-c15t`). Solo CV: the
median over jobs of the coefficient of variation of a job's solo windows in the run; repeat spread: (max − min)/mean
of a (set, job)'s slowdowns in the run.

{md(windows)}
"""
    write_text_atomic(out / "README.md", text)
    print(text)


if __name__ == "__main__":
    main()
