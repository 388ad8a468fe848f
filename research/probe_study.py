#!/usr/bin/env python3
"""One calibration co-run per mode: which reference job, measured once beside a new job, best corrects the new job's
later predictions (issue 23).

Most of the leave-architecture-out error is each unseen job's own offset (``reports/h100/leave_arch_roles``), and
``Predictor.observe`` removes part of it once a collocation of the job has been measured. A scheduler need not wait
for chance collocations: when a new job is profiled alone, it can also be run for a minute beside one fixed reference
job (a probe) in each mode, and that measured pair fed back. This study asks which zoo job makes the best probe
(``constants.CALIBRATION_REFERENCE_JOB``, the reference of ``colopred calibrate``).

Rows: ``research/leave_arch_roles.py``'s ``target_rows.csv``, every job's collocations predicted by models that never
saw its architecture. For a probe P and a job j measured beside P alone (a pair), r = mean log(s / ŝ) of that pair's
rows of j is its one observation (k = 1); j's other rows are scored with the correction exp(w·r), w = 1 / (1 + n₀)
(n₀ = ``constants.OBSERVED_PRIOR_WEIGHT``), and with the interval's log half-widths times ρ(1)
(``constants.OBSERVED_OFFSET_SHARE``), as ``runtime.observed`` applies them. Jobs never measured beside P are not
scored for P.

**Rule, fixed before the first run**: among the zoo jobs measured in a pair beside at least ``MIN_PROBED_JOBS``
development jobs in each mode, the probe of the largest development gain (MAPE without the correction minus MAPE
with it, on the same rows) averaged over the two modes; the locked architectures' figures are reported for the chosen
probe, not used to choose it.

  PYTHONPATH=. python research/probe_study.py [--rows reports/h100/leave_arch_roles/target_rows.csv]
      [--data datasets/h100] [--out reports/h100/probe]
  PYTHONPATH=. python research/probe_study.py --feature-check   # the measurement as a tree feature instead

The shift is the design, not a tree feature: with the reference's measurement as one more feature of the target
(``--feature-check``, development rows, leave-arch, 2 seeds, data hash 5f520d9e813259e7; rows of the 28 / 31 jobs
measured beside resnet50-b64-fp32) the trees gain little, time-slicing 5.65 → 5.58%, MPS 7.35 → 7.11%, where the
shift from the same folds' predictions gives 4.06% and 6.55%: a per-job constant says nothing to trees that never saw
the job's architecture.

Writes ``table.csv`` (every candidate: mode, split, probed jobs, rows, MAPE without and with the correction,
coverage), ``probe.png`` and ``README.md``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "research"))

from colopred.constants import CALIBRATION_REFERENCE_JOB, MODES, OBSERVED_OFFSET_SHARE, OBSERVED_PRIOR_WEIGHT  # noqa: E402
from colopred.io import write_csv_atomic, write_text_atomic  # noqa: E402
from colopred.research.protocol import locked_architectures  # noqa: E402
from colopred.research.report import md_table, save_figure, shown_path  # noqa: E402
from dev_observed_shrinkage import corrected_scores  # noqa: E402

MIN_PROBED_JOBS = 20
"""A candidate probe must have been measured in a pair beside this many development jobs in each mode (about half of
them), so that its gain is an average over many architectures, not a few."""


def co_runners(rows: pd.DataFrame) -> pd.Series:
    """Each row's co-runners (its set less its job), as a '+'-joined string."""
    return pd.Series(["+".join(j for j in s.split("+") if j != job) for s, job in zip(rows["set"], rows["job"])],
                     index=rows.index)


def probe_offsets(rows: pd.DataFrame, probe: str) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, scored): per row, the mean log(s / ŝ) of its job's rows in the pair beside ``probe`` (same mode;
    NaN where the job has no such pair) as a rows x 1 array, and which rows are scored (those with an offset, the
    probe pair's own rows left out)."""
    others = co_runners(rows)
    in_pair = (others == probe).to_numpy()
    log_ratio = np.log(rows["slowdown"] / rows["pred"])
    per_job = log_ratio[in_pair].groupby([rows["mode"][in_pair], rows["job"][in_pair]]).mean()
    keys = pd.MultiIndex.from_arrays([rows["mode"], rows["job"]])
    offsets = per_job.reindex(keys).to_numpy()
    scored = ~np.isnan(offsets) & ~in_pair
    return np.where(scored, offsets, np.nan)[:, None], scored


def candidate_table(rows: pd.DataFrame, min_jobs: int = MIN_PROBED_JOBS) -> pd.DataFrame:
    """Per candidate probe, mode and split: probed jobs, scored rows, MAPE without and with the correction, coverage."""
    others = co_runners(rows)
    pairs = rows[rows["set"].str.count(r"\+") == 1]
    dev_pairs = pairs[pairs["split"] == "development"]
    probed = dev_pairs.groupby(["mode", others[dev_pairs.index]])["job"].nunique()
    eligible = [p for p in probed.index.get_level_values(1).unique()
                if all(probed.get((m, p), 0) >= min_jobs for m in MODES)]
    out = []
    for probe in sorted(eligible):
        offsets, scored = probe_offsets(rows, probe)
        if not scored.any():
            continue
        sub = rows[scored]
        none = corrected_scores(sub, np.zeros((len(sub), 1)), OBSERVED_PRIOR_WEIGHT["timeslice"], 1)  # exp(0): unchanged
        fixed = pd.concat([corrected_scores(sub[sub["mode"] == m], offsets[scored][(sub["mode"] == m).to_numpy()],
                                            OBSERVED_PRIOR_WEIGHT[m], 1, OBSERVED_OFFSET_SHARE) for m in MODES])
        sc = sub[["mode", "split", "job"]].assign(mape_none_pct=none["ape_pct"], covered_none_pct=none["covered_pct"],
                                                 mape_probed_pct=fixed["ape_pct"], covered_probed_pct=fixed["covered_pct"])
        g = sc.groupby(["mode", "split"], sort=False).agg(
            probed_jobs=("job", "nunique"), rows=("job", "size"), mape_none_pct=("mape_none_pct", "mean"),
            mape_probed_pct=("mape_probed_pct", "mean"), coverage_none_pct=("covered_none_pct", "mean"),
            coverage_probed_pct=("covered_probed_pct", "mean")).reset_index()
        out.append(g.assign(probe=probe))
    t = pd.concat(out, ignore_index=True)
    t["gain_points"] = t["mape_none_pct"] - t["mape_probed_pct"]
    return t[["probe", "mode", "split", "probed_jobs", "rows", "mape_none_pct", "mape_probed_pct", "gain_points",
              "coverage_none_pct", "coverage_probed_pct"]]


def choose(table: pd.DataFrame) -> str:
    """The rule's probe (module doc): the largest development gain averaged over the modes."""
    dev = table[table["split"] == "development"]
    return str(dev.groupby("probe")["gain_points"].mean().sort_values(ascending=False, kind="stable").index[0])


def plot(table: pd.DataFrame, probe: str, path: Path) -> None:
    """Left: each candidate's development gain per mode, best first; right: the chosen probe's MAPE without and with
    its observation, per mode and split."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dev = table[table["split"] == "development"].pivot_table(index="probe", columns="mode", values="gain_points")
    dev = dev.loc[dev.mean(axis=1).sort_values().index]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 0.28 * len(dev) + 2.2), gridspec_kw={"width_ratios": [1.4, 1]})
    y = np.arange(len(dev))
    for i, mode in enumerate(MODES):
        left.barh(y + (i - 0.5) * 0.38, dev[mode], height=0.38, label=mode)
    left.set_yticks(y, [f"{p} ◀" if p == probe else p for p in dev.index], fontsize=8)
    left.axvline(0, color="black", lw=0.8)
    left.set_xlabel("development gain, MAPE points (more is better)")
    left.legend(fontsize=8)
    chosen = table[table["probe"] == probe].set_index(["mode", "split"])
    labels, none, probed = [], [], []
    for mode in MODES:
        for split in ("development", "locked"):
            if (mode, split) in chosen.index:
                labels.append(f"{mode}\n{split}")
                none.append(chosen.loc[(mode, split), "mape_none_pct"])
                probed.append(chosen.loc[(mode, split), "mape_probed_pct"])
    x = np.arange(len(labels))
    right.bar(x - 0.2, none, width=0.4, label="model alone")
    right.bar(x + 0.2, probed, width=0.4, label=f"with one co-run beside {probe}")
    right.set_xticks(x, labels, fontsize=8)
    right.set_ylabel("slowdown MAPE of the job's other rows, %")
    right.set_ylim(0, 1.3 * max(none + probed))  # room for the legend above the bars
    right.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def feature_against_shift(data: str, probe: str, seeds: int = 2) -> pd.DataFrame:
    """``--feature-check``: the probe's measurement as one more tree feature of the target (log of its mean slowdown
    beside ``probe``; missing on the probe pair's own rows and for jobs never measured beside it) against the shift of
    ``Predictor.observe`` from the same fold's prediction of the probe pair. Leave-architecture-out cross-validation
    on the development rows (``research/dev_features.py``'s point models, ``seeds`` tree seeds); MAPE over the rows of
    jobs measured beside the probe, the probe pair left out."""
    import dev_features

    from colopred.research.dataset import load_dataset
    from colopred.research.evaluation import mape_pct
    from colopred.research.protocol import is_locked

    ds = load_dataset(data)
    out = []
    for mode in MODES:
        df = ds.for_mode(mode).reset_index(drop=True)
        dev = df[~is_locked(df, locked_architectures(data))].reset_index(drop=True)
        beside = co_runners(dev) == probe
        pair = (beside | ((dev["job"] == probe) & (dev["n_jobs"] == 2))).to_numpy()
        feature = dev["job"].map(np.log(dev[beside].groupby("job")["slowdown"].mean())).mask(pair)
        scored = feature.notna().to_numpy()
        s = dev["slowdown"].to_numpy()
        w = 1 / (1 + OBSERVED_PRIOR_WEIGHT[mode])
        runs: dict[str, list[float]] = {"model": [], "probe as a tree feature": [], "shift (Predictor.observe)": []}
        for seed in range(seeds):
            X, feats = dev_features._inputs(dev, mode, None, None)
            p = dev_features._cv_predictions(dev, X, s, mode, feats, "leave-arch", seed)
            r = pd.Series(np.log(s / p)[beside], index=dev.index[beside]).groupby(dev["job"][beside]).mean()
            runs["model"].append(mape_pct(s[scored], p[scored]))
            runs["shift (Predictor.observe)"].append(mape_pct(s[scored], (p * np.exp(w * dev["job"].map(r).to_numpy()))[scored]))
            X, feats = dev_features._inputs(dev, mode, dev_features.EXTRA_SLOT, feature)
            p = dev_features._cv_predictions(dev, X, s, mode, feats, "leave-arch", seed)
            runs["probe as a tree feature"].append(mape_pct(s[scored], p[scored]))
        out.append({"mode": mode, "jobs": int(dev.loc[beside, "job"].nunique()), "rows": int(scored.sum()),
                    **{k: round(float(np.mean(v)), 2) for k, v in runs.items()}})
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default=str(ROOT / "reports/h100/leave_arch_roles/target_rows.csv"))
    ap.add_argument("--data", default=str(ROOT / "datasets/h100"))
    ap.add_argument("--out", default=str(ROOT / "reports/h100/probe"))
    ap.add_argument("--feature-check", action="store_true",
                    help="only compare the chosen reference's measurement as a tree feature with the shift (~8 min)")
    a = ap.parse_args(argv)
    if a.feature_check:
        print(feature_against_shift(a.data, CALIBRATION_REFERENCE_JOB).to_string(index=False))
        return 0
    rows = pd.read_csv(a.rows)
    if "set" not in rows.columns:
        print(f"{a.rows}: no 'set' column (rerun research/leave_arch_roles.py)", file=sys.stderr)
        return 2
    rows["split"] = np.where(rows["held_out"].isin(locked_architectures(a.data)), "locked", "development")
    table = candidate_table(rows)
    probe = choose(table)
    ranking = (table[table["split"] == "development"].groupby("probe")["gain_points"].mean()
               .sort_values(ascending=False).round(2).rename("development gain, mean of modes (points)").reset_index())
    chosen = table[table["probe"] == probe].round(2)
    print(ranking.to_string(index=False))
    print(chosen.to_string(index=False))
    if probe != CALIBRATION_REFERENCE_JOB:
        print(f"the rule now chooses {probe}; colopred calibrate uses constants.CALIBRATION_REFERENCE_JOB = "
              f"{CALIBRATION_REFERENCE_JOB}: update it")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv_atomic(table.round(3), out / "table.csv", index=False)
    plot(table, probe, out / "probe.png")
    write_text_atomic(out / "README.md",
        "# One calibration co-run: the best reference job to measure a new job beside\n\n"
        f"`PYTHONPATH=. python research/probe_study.py --rows {shown_path(a.rows, ROOT)} --out {shown_path(a.out, ROOT)}` (rows: "
        "`research/leave_arch_roles.py`'s unseen jobs, each predicted by models that never saw its architecture). "
        "The script's docstring has the design and the rule. A job's pair beside the probe, measured, corrects its "
        "other rows as `Predictor.observe` does with one observation (time-slicing n₀ "
        f"{OBSERVED_PRIOR_WEIGHT['timeslice']:g}, MPS {OBSERVED_PRIOR_WEIGHT['mps']:g}); MAPE and interval coverage "
        "of those rows without and with it.\n\n"
        f"Chosen on the development architectures: **{probe}**.\n\n" + md_table(chosen)
        + "\n\n![candidates' gains and the chosen probe](probe.png)\n\n"
        + f"Candidates (measured in a pair beside at least {MIN_PROBED_JOBS} development jobs in each mode), by "
        "development gain; every figure in `table.csv`:\n\n" + md_table(ranking) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
