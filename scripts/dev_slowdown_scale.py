#!/usr/bin/env python3
"""Study, on the development architectures only: should the interval's width scale with each row's predicted slowdown?

``SlowdownModel(slowdown_exponents=...)`` makes a row's conformal scale σ(x) = ((n − 1)/(m − 1))^a · p̂^c, p̂ its point
prediction and c its class's exponent (host-bound target job or saturating), calibrated on |log residual| / σ. With
c = 0 (shipped) each class has one width whatever its contention: on the development rows a host-bound job's
relative error under time-slicing shrinks as its slowdown grows (a host time that is a fixed, noisy share of its
iteration weighs less the more its GPU share stretches), while under MPS the errors grow with the slowdown; so the
intervals over-cover host-bound four-job sets under time-slicing and under-cover MPS triples from a model of pairs.
For each mode and c of ``GRID`` (both classes at once: a class's c changes only its own scores and widths), the
development rows' out-of-sample intervals of three splits are computed (``evaluation.evaluate_mode`` on the sets
without a locked architecture; the beyond-size exponents a of ``constants.INTERVAL_SIZE_EXPONENTS`` as they stand).

**Rule, fixed before the first run**: per (mode, class) the objective is the mean |coverage − 90| over six cells: the
random split's rows in four quartiles of p̂ (whether the width follows the error where the model was calibrated),
pairs → triples, and pairs and triples → four-job sets (whether it carries to larger sets). A c ≠ 0 replaces 0 only if
it lowers the objective by more than 1 point; among those the lowest objective wins (ties: the smaller |c|). The study
writes its table and verdict; applying a chosen c (``constants``, retraining, re-choosing a) is a separate step.

  PYTHONPATH=. python scripts/dev_slowdown_scale.py [--data datasets/h100] [--profiles ncu] [--out FOLDER]
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

from colopred.constants import HOST_BOUND_BUSY, INTERVAL_COVERAGE  # noqa: E402
from colopred.io import write_csv_atomic, write_text_atomic  # noqa: E402
from colopred.research.dataset import load_dataset  # noqa: E402
from colopred.research.evaluation import covered, evaluate_mode  # noqa: E402
from colopred.research.protocol import is_locked, locked_architectures  # noqa: E402
from colopred.research.report import md_table  # noqa: E402
from colopred.runtime.estimator import INTERVAL_CLASS_NAMES  # noqa: E402

GRID = (-1.0, -0.5, 0.0, 0.5, 1.0)
MODES = ("timeslice", "mps")
SPLITS = ("random", "pairs->triples", "pairs+triples->quads")
MIN_GAIN_POINTS = 1.0  # the rule's margin over c = 0
TARGET_PCT = 100 * INTERVAL_COVERAGE


def cells(pred: pd.DataFrame) -> pd.DataFrame:
    """Coverage % and rows of each (mode, class, cell): the random split in quartiles of p̂, and the two extrapolating
    splits pooled. ``pred``: development predictions with ``c``, ``mode``, ``split``, ``t_busy``, ``slowdown``,
    ``pred``, ``lo``, ``hi``."""
    p = pred.dropna(subset=["pred"]).copy()
    p["cls"] = np.where(p["t_busy"] < HOST_BOUND_BUSY, "host_bound", "saturating")
    p["covered"] = covered(p["slowdown"], p["lo"], p["hi"])
    p["cell"] = p["split"]
    rnd = p["split"] == "random"
    # quartiles of p̂ within each (c, mode, class) of the random split; the same rows fall in the same cells for
    # every c, since c moves the interval and not the point
    q = p[rnd].groupby(["c", "mode", "cls"])["pred"].transform(lambda s: pd.qcut(s.rank(method="first"), 4, labels=False))
    p.loc[rnd, "cell"] = "random q" + (q.astype(int) + 1).astype(str)
    return (p.groupby(["mode", "cls", "c", "cell"])["covered"].agg(coverage_pct=lambda s: 100 * s.mean(), rows="size")
            .reset_index())


def choose(table: pd.DataFrame) -> tuple[dict, pd.DataFrame]:
    """The rule (module doc): the chosen c of each (mode, class), and the objective of every (mode, class, c)."""
    obj = (table.assign(miss=(table["coverage_pct"] - TARGET_PCT).abs())
           .groupby(["mode", "cls", "c"])["miss"].mean().rename("objective").reset_index())
    chosen: dict = {}
    for (mode, cls), g in obj.groupby(["mode", "cls"]):
        base = float(g.loc[g["c"] == 0.0, "objective"].iloc[0])
        better = g[(g["c"] != 0.0) & (g["objective"] < base - MIN_GAIN_POINTS)]
        if better.empty:
            chosen.setdefault(mode, {})[cls] = 0.0
        else:
            best = better.assign(absc=better["c"].abs()).sort_values(["objective", "absc"]).iloc[0]
            chosen.setdefault(mode, {})[cls] = float(best["c"])
    return chosen, obj


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT / "datasets" / "h100"))
    ap.add_argument("--profiles", default="ncu", choices=("ncu", "nvml"))
    ap.add_argument("--out", default=str(ROOT / "reports" / "h100" / "intervals" / "slowdown_scale"))
    a = ap.parse_args()
    t0 = time.time()
    ds = load_dataset(a.data, profile_source=a.profiles)
    locked = locked_architectures(ds.root)
    preds = []
    for mode in MODES:
        df = ds.for_mode(mode)
        dev = df[~is_locked(df, locked)].reset_index(drop=True)
        for c in GRID:
            _, p = evaluate_mode(dev, source=ds.profile_source, kinds=SPLITS, baselines=False, timeline=ds.timeline,
                                 model_kw={"slowdown_exponents": dict.fromkeys(INTERVAL_CLASS_NAMES, c)})
            preds.append(p.assign(mode=mode, c=c)[["mode", "c", "split", "t_busy", "slowdown", "pred", "lo", "hi"]])
            print(f"{mode} c={c:+.2f}: {time.time() - t0:.0f} s", flush=True)
    table = cells(pd.concat(preds, ignore_index=True))
    chosen, obj = choose(table)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    shown = out.resolve().relative_to(ROOT) if out.resolve().is_relative_to(ROOT) else out
    wide = table.pivot_table(index=["mode", "cls", "cell"], columns="c", values="coverage_pct").reset_index()
    rows = table[table["c"] == 0.0].set_index(["mode", "cls", "cell"])["rows"]
    wide.insert(3, "rows", [int(rows[(m, k, e)]) for m, k, e in zip(wide["mode"], wide["cls"], wide["cell"])])
    wide.columns = [f"c={x:+g}" if isinstance(x, float) else x for x in wide.columns]
    objective = obj.pivot_table(index=["mode", "cls"], columns="c", values="objective").reset_index()
    objective.columns = [f"c={x:+g}" if isinstance(x, float) else x for x in objective.columns]
    write_csv_atomic(table, out / "coverage.csv", index=False)
    write_text_atomic(out / "README.md", "\n".join([
        "# Interval width by predicted slowdown (a study, development rows)", "",
        f"`PYTHONPATH=. python scripts/dev_slowdown_scale.py --profiles {a.profiles} --out {shown}` (data hash "
        f"`{ds.data_hash}`; {time.time() - t0:.0f} s). The script's docstring has the design and the rule. Coverage (%) "
        "of the 90% interval on the development rows, by the exponent c of the per-row scale p̂^c:", "",
        md_table(wide.round(1)), "",
        "Objective (mean |coverage − 90| over the six cells of each mode and class):", "",
        md_table(objective.round(2)), "",
        f"Chosen by the rule: {chosen}.", ""]))
    print(f"chosen (rule in the docstring): {chosen} ({time.time() - t0:.0f} s)\nwrote {out}")


if __name__ == "__main__":
    main()
