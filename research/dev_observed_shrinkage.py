#!/usr/bin/env python3
"""Choose ``constants.OBSERVED_PRIOR_WEIGHT`` (n₀ per mode) on the development architectures: how far a job's measured
collocations move its later predictions (``colopred.runtime.observed``).

With k measured collocations of a job, r the mean of log(s / ŝ) over them (s measured, ŝ predicted), each later
prediction of the job is multiplied by exp(w·r), w = k / (k + n₀). The rows are ``research/leave_arch_roles.py``'s
``target_rows.csv``: every job's collocations predicted by models that never saw its architecture, the situation of a
scheduler's new job. For every row of a job, ``DRAWS`` draws of k of the job's other rows (seed ``SEED``) play the
observations; the row is scored with the correction they give. q (``constants.OBSERVED_OFFSET_SHARE``, the
narrowing of an observed job's interval) is estimated on the development rows: a variance decomposition, not a
choice.

**Rule, fixed before the first run**: per mode, the n₀ of ``GRID`` (∞: no correction) of least development MAPE
averaged over k = 1, 2 and 4 (rows of architectures outside ``datasets/h100/locked_split.json``; a job scored at k
only if it has more than k rows); ties go to the larger n₀. The locked architectures' figures are reported beside it,
not used.

  PYTHONPATH=. python research/dev_observed_shrinkage.py [--rows reports/h100/leave_arch_roles/target_rows.csv]
      [--data datasets/h100] [--out reports/h100/observed]

Writes ``table.csv`` (mode, split, n₀, k: rows, MAPE, interval coverage), ``observed.png`` and ``README.md``.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colopred.io import atomic_file, write_csv_atomic, write_text_atomic  # noqa: E402
from colopred.research.evaluation import covered  # noqa: E402
from colopred.research.protocol import locked_architectures  # noqa: E402
from colopred.research.report import md_table, shown_path  # noqa: E402
from colopred.runtime.observed import corrected, interval_width_factor, offset_weight  # noqa: E402

GRID = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0, math.inf)
KS = (1, 2, 4)
DRAWS = 20
SEED = 0


def observed_log_offsets(rows: pd.DataFrame, k: int, draws: int = DRAWS, seed: int = SEED) -> np.ndarray:
    """n_rows x draws: the mean log(s / ŝ) of k other rows of the row's job (mode), drawn without replacement; NaN
    where the job has k rows or fewer."""
    rng = np.random.default_rng(seed)
    log_ratio = np.log(rows["slowdown"].to_numpy() / rows["pred"].to_numpy())
    out = np.full((len(rows), draws), np.nan)
    for idx in rows.groupby(["mode", "job"], sort=True).indices.values():
        n = len(idx)
        if n <= k:
            continue
        for i, row in enumerate(idx):
            others = np.delete(idx, i)
            picks = np.argsort(rng.random((draws, n - 1)), axis=1)[:, :k]  # k distinct others per draw
            out[row] = log_ratio[others[picks]].mean(axis=1)
    return out


def offset_share(rows: pd.DataFrame) -> dict[str, float]:
    """q per mode: the share of the rows' log-error variance that is their job's own offset — the variance of the job
    means net of the scatter each mean carries (within-job variance / rows of the job), over that plus the
    within-job variance (``constants.OBSERVED_OFFSET_SHARE``)."""
    e = np.log(rows["slowdown"] / rows["pred"])
    out = {}
    for mode, g in e.groupby(rows["mode"], sort=False):
        jobs = rows.loc[g.index, "job"]
        stats = g.groupby(jobs).agg(["mean", "size", "var"])
        within = ((stats["size"] - 1) * stats["var"].fillna(0)).sum() / (len(g) - len(stats))
        between = max(stats["mean"].var() - within * (1 / stats["size"]).mean(), 0.0)
        out[mode] = float(between / (between + within))
    return out


def corrected_scores(rows: pd.DataFrame, offsets: np.ndarray, prior_weight: float, k: int,
                     share: dict[str, float] | None = None) -> pd.DataFrame:
    """Per row (those with offsets): absolute % error and interval coverage (%) of the corrected prediction, averaged
    over the draws; the interval's log half-widths times ρ(k) of ``runtime.observed`` (q of the row's mode from
    ``share``; none given: the width kept)."""
    ok = ~np.isnan(offsets[:, 0])
    w = offset_weight(k, prior_weight)
    f = np.exp(w * offsets[ok])  # rows x draws
    s = rows["slowdown"].to_numpy()[ok, None]
    pred = rows["pred"].to_numpy()[ok, None]
    p = corrected(pred, f)
    q = np.array([share[m] for m in rows["mode"].to_numpy()[ok]])[:, None] if share else None
    rho = 1.0 if q is None else interval_width_factor(w, k, q)
    lo = pred * f * (rows["lo"].to_numpy()[ok, None] / pred) ** rho
    hi = pred * f * (rows["hi"].to_numpy()[ok, None] / pred) ** rho
    return pd.DataFrame({"ape_pct": (100 * np.abs(p - s) / s).mean(axis=1),
                         "covered_pct": (100 * covered(s, lo, hi)).mean(axis=1)}, index=rows.index[ok])


def score_table(rows: pd.DataFrame, grid=GRID, ks=KS, draws: int = DRAWS, seed: int = SEED,
                share: dict[str, float] | None = None) -> pd.DataFrame:
    """MAPE and coverage per (mode, split, n₀, k); ``rows`` carries ``split`` (development or locked)."""
    out = []
    for k in ks:
        offsets = observed_log_offsets(rows, k, draws, seed)
        for n0 in grid:
            sc = corrected_scores(rows, offsets, n0, k, share).join(rows[["mode", "split"]])
            g = sc.groupby(["mode", "split"], sort=False).agg(rows=("ape_pct", "size"), slowdown_mape_pct=("ape_pct", "mean"),
                                                              interval_coverage_pct=("covered_pct", "mean"))
            out.append(g.reset_index().assign(prior_weight=n0, k=k))
    return pd.concat(out, ignore_index=True)[["mode", "split", "prior_weight", "k", "rows", "slowdown_mape_pct",
                                             "interval_coverage_pct"]]


def choose(table: pd.DataFrame) -> dict[str, float]:
    """The rule's n₀ per mode (module doc)."""
    dev = table[table["split"] == "development"]
    obj = dev.groupby(["mode", "prior_weight"])["slowdown_mape_pct"].mean().round(6).reset_index()
    return {mode: float(g.sort_values(["slowdown_mape_pct", "prior_weight"], ascending=[True, False]).iloc[0]["prior_weight"])
            for mode, g in obj.groupby("mode", sort=False)}


def plot(table: pd.DataFrame, chosen: dict[str, float], path: Path) -> None:
    """MAPE against the number of a job's observed collocations (0: none), at each mode's chosen n₀, development and
    locked architectures."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(chosen), figsize=(4.2 * len(chosen), 3.4), sharey=True)
    for ax, (mode, n0) in zip(np.atleast_1d(axes), chosen.items()):
        for split, style in (("development", "o-"), ("locked", "s--")):
            t = table[(table["mode"] == mode) & (table["split"] == split)]
            at = t[t["prior_weight"] == n0].sort_values("k")
            none = t[np.isinf(t["prior_weight"])]["slowdown_mape_pct"].iloc[0]
            ax.plot([0, *at["k"]], [none, *at["slowdown_mape_pct"]], style, label=split)
        ax.set_title(f"{mode} (n₀ = {n0:g})")
        ax.set_xlabel("observed collocations of the job")
        ax.set_xticks([0, *KS])
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel("slowdown MAPE of its other rows, %")
    np.atleast_1d(axes)[0].legend()
    fig.tight_layout()
    with atomic_file(path, "wb", encoding=None) as f:
        fig.savefig(f, format="png", dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default=str(ROOT / "reports/h100/leave_arch_roles/target_rows.csv"))
    ap.add_argument("--data", default=str(ROOT / "datasets/h100"))
    ap.add_argument("--out", default=str(ROOT / "reports/h100/observed"))
    a = ap.parse_args(argv)
    rows = pd.read_csv(a.rows)
    arch = rows["held_out"]
    rows["split"] = np.where(arch.isin(locked_architectures(a.data)), "locked", "development")
    share = offset_share(rows[rows["split"] == "development"])
    table = score_table(rows, share=share)
    chosen = choose(table)
    wide = table.pivot_table(index=["mode", "split", "k", "rows"], columns="prior_weight", values="slowdown_mape_pct",
                             sort=False).reset_index()
    wide.columns = [c if isinstance(c, str) else f"n₀={c:g}" for c in wide.columns]
    at = pd.concat([table[(table["mode"] == m) & (table["prior_weight"].isin([n0, math.inf]))] for m, n0 in chosen.items()])
    at = at.assign(prior_weight=at["prior_weight"].map(lambda v: "none" if math.isinf(v) else f"{v:g}"))
    print(wide.round(2).to_string(index=False))
    print("chosen:", chosen, "offset share q (development rows):", {m: round(v, 2) for m, v in share.items()},
          "locked rows:", {m: round(v, 2) for m, v in offset_share(rows[rows["split"] == "locked"]).items()})
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv_atomic(table, out / "table.csv", index=False)
    plot(table, chosen, out / "observed.png")
    write_text_atomic(out / "README.md",
        "# What a job's measured collocations buy its later predictions\n\n"
        f"`PYTHONPATH=. python research/dev_observed_shrinkage.py --rows {shown_path(a.rows, ROOT)} --out {shown_path(a.out, ROOT)}` (rows: "
        "`research/leave_arch_roles.py`'s unseen jobs, each predicted by models that never saw its architecture). "
        "The script's docstring has the design and the rule. Slowdown MAPE (%) of a job's other rows once k of its "
        "measured collocations shift its predictions by exp(k/(k + n₀)·r), r their mean log(measured / predicted); "
        "n₀ = inf: no correction:\n\n" + md_table(wide, digits=2)
        + "\n\nChosen on the development rows: " + ", ".join(f"{m} n₀ = {v:g}" for m, v in chosen.items())
        + ". Share of the log-error variance that is the job's own offset (q, `OBSERVED_OFFSET_SHARE`; development "
        "rows): " + ", ".join(f"{m} {v:.2f}" for m, v in share.items())
        + ". At the chosen n₀ against none, with interval coverage (the interval moves with the prediction, its log "
        "half-widths times ρ(k) = √((1 − w)²q + (1 − q)(1 + w²/k))):\n\n"
        + md_table(at.round(2)) + "\n\n![MAPE against observed collocations](observed.png)\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
