#!/usr/bin/env python3
"""How many held-out observations, and what margin, the promotion of a retrained model needs.

**Question.** ``colopred train --store`` promotes a new version only if it beats the version serving on the most
recent observations (``colopred.service.versions.verdict``: mean gain in absolute % error at least a margin, over at
least a number of held-out job rows, and the lower end of its one-sided 95% bootstrap interval, observations
resampled, above 0). How often does that rule promote a version that is no better, and how often one that is?

**Design.** The shipped data's leave-architecture-out predictions (``research/learning_curve.py``'s
``fold_rows.csv.gz``: every row of every set holding a held-out architecture, by a model that never saw it) play the
version serving; the stream of observations is drawn from those sets' windows (all of a window's members, as an
observation reports them). *No better*: the same folds fitted with another tree seed (``random_state`` 1): a version
that differs by chance only. *Better*: the version serving with each unseen job's offset taken from its other sets
(k = 4 of them, the online update's shipped n₀): about a point better on those jobs' rows. For each held-out size (in
observations) and mode, ``DRAWS`` streams; the promotion rate of each (least rows, margin) of the grid.

**Rule, fixed before the run**: the smallest margin, then the smallest least number of rows, of the grid that
promotes the no-better version in at most 5% of the draws at every held-out size and in both modes.

  PYTHONPATH=. python research/promotion_rule.py [--data datasets/h100] [--rows reports/h100/learning/fold_rows.csv.gz]
      [--out reports/h100/promotion]

Writes ``table.csv`` and ``README.md`` in ``--out`` (and ``seed1_rows.csv.gz``, the other seed's predictions).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colopred.io import write_csv_atomic, write_text_atomic  # noqa: E402
from colopred.research.dataset import load_dataset  # noqa: E402
from colopred.research.evaluation import job_fit_args, new_model  # noqa: E402
from colopred.research.report import md_table, shown_path  # noqa: E402
from colopred.runtime.features import FEATURES  # noqa: E402
from colopred.runtime.observed import offset_weight, prior_weight_of  # noqa: E402
from colopred.service.versions import CONFIDENCE, verdict  # noqa: E402

MODES = ("timeslice", "mps")
SIZES = (10, 20, 40, 80)
"""Held-out observations (windows) per draw."""
MIN_ROWS = (20, 40, 80)
MARGINS = (0.0, 0.1, 0.25)
DRAWS = 400
BOOTSTRAP = 500
SEED = 0
K_BETTER = 4


def other_seed(ds, rows: pd.DataFrame, mode: str) -> np.ndarray:
    """The fold rows of ``mode`` predicted by the same folds fitted with tree seed 1."""
    df = ds.for_mode(mode)
    sub = rows[rows["mode"] == mode]
    out = np.full(len(sub), np.nan)
    for arch, g in sub.groupby("held_out"):
        t0 = time.monotonic()
        te = df["set_archs"].map(lambda a: arch in a).to_numpy()
        train = df[~te]
        m = new_model(mode, ds.profile_source, ds.timeline, params={"random_state": 1}, interval=False, calibrate=False)
        m.fit(train[list(FEATURES)].to_numpy(), train["slowdown"].to_numpy(), **job_fit_args(train))
        test = df.iloc[g["row"].to_numpy()]
        out[sub.index.get_indexer(g.index)] = m.predict(test[list(FEATURES)].to_numpy(), jobs=test["job"].to_numpy())
        print(f"[{time.strftime('%H:%M:%S')}] seed 1 {mode} {arch}: {time.monotonic() - t0:.0f} s", flush=True)
    return out


def better(rows: pd.DataFrame, k: int = K_BETTER, seed: int = SEED) -> np.ndarray:
    """Each target row's prediction moved by its job's offset from k of the job's other sets (shipped n₀); co-runner
    rows as they are."""
    rng = np.random.default_rng(seed)
    pred = rows["pred"].to_numpy().copy()
    e = np.log(rows["slowdown"].to_numpy() / rows["pred"].to_numpy())
    t = rows[rows["role"] == "target"]
    for (mode, _arch, _job), g in t.groupby(["mode", "held_out", "job"]):
        sets = g["set"].unique()
        w = offset_weight(k, prior_weight_of(mode))
        for s in sets:
            others = [x for x in sets if x != s]
            if len(others) < k:
                continue
            pick = set(rng.choice(others, size=k, replace=False))
            r = e[g.index[g["set"].isin(pick)]].mean()
            idx = g.index[g["set"] == s]
            pred[idx] = pred[idx] * np.exp(w * r)
    return pred


def simulate(rows: pd.DataFrame, candidate: np.ndarray, sizes=SIZES, draws: int = DRAWS, seed: int = SEED) -> pd.DataFrame:
    """Per (mode, size, min rows, margin): how often the rule promotes ``candidate`` over the rows' ``pred``."""
    s = rows["slowdown"].to_numpy()
    cur = 100 * np.abs(rows["pred"].to_numpy() - s) / s
    cand = 100 * np.abs(candidate - s) / s
    out = []
    rng = np.random.default_rng(seed)
    for mode in MODES:
        windows = list(rows[rows["mode"] == mode].groupby(["held_out", "window_id"]).indices.values())
        for n in sizes:
            hits = {(m, g): 0 for m in MIN_ROWS for g in MARGINS}
            gains = []
            for _ in range(draws):
                pick = [windows[i] for i in rng.choice(len(windows), size=n, replace=False)]
                idx = np.concatenate(pick)
                sizes_ = np.array([len(p) for p in pick])
                _, gain, lower = verdict(cur[idx], cand[idx], sizes_, 0, -np.inf, CONFIDENCE, BOOTSTRAP, int(rng.integers(1 << 30)))
                gains.append(gain)
                for m in MIN_ROWS:
                    for g in MARGINS:
                        hits[(m, g)] += bool(len(idx) >= m and gain >= g and lower > 0)
            rows_n = float(np.mean([len(np.concatenate([windows[i] for i in rng.choice(len(windows), size=n, replace=False)]))
                                    for _ in range(20)]))
            for (m, g), h in hits.items():
                out.append({"mode": mode, "observations": n, "rows": rows_n, "min_rows": m, "margin_points": g,
                            "promoted_pct": 100.0 * h / draws, "mean_gain_points": float(np.mean(gains))})
    return pd.DataFrame(out)


def choose(null: pd.DataFrame) -> tuple[float, int]:
    """The rule's (margin, least rows) (module doc)."""
    worst = null.groupby(["margin_points", "min_rows"])["promoted_pct"].max().reset_index()
    ok = worst[worst["promoted_pct"] <= 5.0].sort_values(["margin_points", "min_rows"])
    if ok.empty:
        raise SystemExit("no (margin, rows) of the grid keeps the no-better version's promotions at 5% or fewer")
    return float(ok.iloc[0]["margin_points"]), int(ok.iloc[0]["min_rows"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT / "datasets/h100"))
    ap.add_argument("--rows", default=str(ROOT / "reports/h100/learning/fold_rows.csv.gz"))
    ap.add_argument("--out", default=str(ROOT / "reports/h100/promotion"))
    ap.add_argument("--reuse", action="store_true", help="reuse OUT/seed1_rows.csv.gz")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = pd.read_csv(a.rows)
    cache = out / "seed1_rows.csv.gz"
    if a.reuse and cache.is_file():
        cached = pd.read_csv(cache)
        alt = cached["pred_seed1"].to_numpy()
        data_hash = str(cached["data_hash"].iloc[0]) if "data_hash" in cached else "(reused)"
    else:
        ds = load_dataset(a.data)
        data_hash = ds.data_hash
        alt = np.full(len(rows), np.nan)
        for mode in MODES:
            alt[(rows["mode"] == mode).to_numpy()] = other_seed(ds, rows, mode)
        write_csv_atomic(pd.DataFrame({"pred_seed1": alt, "data_hash": data_hash}), cache, index=False, float_format="%.6g")
    null = simulate(rows, alt).assign(candidate="no better (another tree seed)")
    good = simulate(rows, better(rows)).assign(candidate=f"better (unseen jobs' offsets from {K_BETTER} other sets)")
    table = pd.concat([null, good], ignore_index=True)
    margin, min_rows = choose(null)
    write_csv_atomic(table, out / "table.csv", index=False, float_format="%.4g")
    at = table[(table["margin_points"] == margin) & (table["min_rows"] == min_rows)]
    wide = at.pivot_table(index=["mode", "observations", "rows"], columns="candidate", values="promoted_pct").reset_index()
    gains = at.pivot_table(index=["mode", "observations"], columns="candidate", values="mean_gain_points").round(2).reset_index()
    worst = null.groupby(["margin_points", "min_rows"])["promoted_pct"].max().unstack("min_rows")
    worst.columns = [f"least {c} rows" for c in worst.columns]
    cmd = (f"PYTHONPATH=. python research/promotion_rule.py --data {shown_path(a.data, ROOT)} --rows {shown_path(a.rows, ROOT)} "
           f"--out {shown_path(out, ROOT)}")
    text = ("# How much evidence a promotion needs\n\n"
            f"`{cmd}` (data hash `{data_hash}`; the script's docstring has the design and the rule). A stream of held-out "
            "observations is drawn from the windows of the shipped data's leave-architecture-out sets (every member of a "
            f"window, as an observation reports them; {DRAWS} streams per size and mode); the rule "
            "(`colopred.service.versions.verdict`, one-sided 95% bootstrap over observations) judges a candidate against "
            "the version serving (the folds' own predictions). A candidate that is no better (the same folds fitted with "
            "another tree seed) should almost never be promoted; one that is better should be.\n\n"
            f"**Chosen: a margin of {margin:g} points and at least {min_rows} held-out job rows** (`versions.MARGIN_POINTS`, "
            "`versions.MIN_HELD_OUT_ROWS`). Promotion rate (%) at that rule:\n\n" + md_table(wide.round(1))
            + "\n\nMean gain of the candidate on the held-out rows (points of MAPE):\n\n" + md_table(gains)
            + "\n\nThe no-better candidate's worst promotion rate (%) over sizes and modes, for each margin (rows) and least "
            "number of held-out rows (columns):\n\n" + md_table(worst.round(1).reset_index()) + "\n\nEvery rate, both "
            "candidates, every margin and least number of rows: `table.csv`.\n")
    write_text_atomic(out / "README.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
