#!/usr/bin/env python3
"""Choose ``constants.INTERVAL_SIZE_EXPONENTS`` and the growth in use (``constants.INTERVAL_SCALE_OF_SOURCE``) on the
development architectures only (the sets without a locked architecture): how much wider the interval of a set larger
than any in training is, per profile source (``--profiles``), mode and class of target job (docs/model.md,
"Intervals"). The design and the rules, fixed before their first run: ``research.interval_rules.size_exponent``.

  PYTHONPATH=. python research/dev_size_exponent.py [--data datasets/h100] [--profiles ncu] [--out FOLDER]

Writes ``coverage.csv`` (each design, a, mode, class, split) and ``cells.csv`` (the design objective's cells).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colopred.constants import INTERVAL_SCALE_OF_SOURCE  # noqa: E402
from colopred.io import write_csv_atomic, write_text_atomic  # noqa: E402
from colopred.research.dataset import load_dataset  # noqa: E402
from research.interval_rules.size_exponent import (  # noqa: E402
    SCALES,
    cell_coverage,
    choose,
    choose_scale,
    coverage_by_exponent,
    design_objective,
    objective_difference_se,
    predictions,
)
from colopred.research.protocol import is_locked, locked_architectures  # noqa: E402
from colopred.research.report import md_table  # noqa: E402

MODES = ("timeslice", "mps")


def dev_predictions(ds, log=print) -> pd.DataFrame:
    """The development rows' predictions the rules score (``size_exponent.predictions``, the shipped slowdown scale)."""
    locked = locked_architectures(ds.root)
    dev = {}
    for mode in MODES:
        df = ds.for_mode(mode)
        dev[mode] = df[~is_locked(df, locked)].reset_index(drop=True)
    return predictions(dev, source=ds.profile_source, timeline=ds.timeline, log=log)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT / "datasets/h100"))
    ap.add_argument("--profiles", default="ncu", choices=("ncu", "nvml"))
    ap.add_argument("--out", default=None, help="folder for README.md and coverage.csv (default: print only)")
    a = ap.parse_args()
    t0 = time.monotonic()
    ds = load_dataset(a.data, profile_source=a.profiles)
    pred = dev_predictions(ds)
    cov = coverage_by_exponent(pred)
    chosen = choose(cov)
    cells = cell_coverage(pred, chosen)
    objective = design_objective(cells)
    se = objective_difference_se(pred, chosen)
    incumbent = INTERVAL_SCALE_OF_SOURCE[a.profiles]
    scale = choose_scale(objective, se, incumbent)
    wide = cov.pivot_table(index=["scale", "mode", "jobs", "split", "rows"], columns="a", values="coverage_pct", sort=False).reset_index()
    wide.columns = [c if isinstance(c, str) else f"a={c:g}" for c in wide.columns]
    cell_wide = cells.pivot_table(index=["mode", "jobs", "split", "co_saturating", "rows"], columns="scale",
                                  values="coverage_pct").reset_index()[["mode", "jobs", "split", "co_saturating", "rows", *SCALES]]
    print(wide.round(1).to_string(index=False))
    print(cell_wide.round(1).to_string(index=False))
    verdict = ("objective (row-weighted mean |coverage - 90| over the cells): "
               + ", ".join(f"{k} {objective[k]:.2f}" for k in SCALES)
               + f"; bootstrap SE of the difference {se:.2f}; in use: {incumbent}; chosen: {scale}, a = {chosen[scale]}")
    print(f"{verdict} ({time.monotonic() - t0:.0f} s)")
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        write_csv_atomic(cov, out / "coverage.csv", index=False)
        write_csv_atomic(cells, out / "cells.csv", index=False)
        write_text_atomic(out / "README.md",
            "# Interval width beyond the trained set size, chosen on the development architectures\n\n"
            f"`PYTHONPATH=. python research/dev_size_exponent.py --profiles {a.profiles} --out {a.out}` (data hash "
            f"`{ds.data_hash}`). The design and the rules: `research/interval_rules/size_exponent.py`. Coverage (%) of the 90% interval "
            "on the development rows of the splits that predict sets larger than trained on, by the exponent a of "
            "each growth (`beyond_size`: ((n − 1)/(m − 1))^a; `beyond_load`: max(1, B/(m − 1))^a, B the co-runners' "
            "summed busy fraction), per mode and class of target job, both splits pooled (`both`) and each alone:\n\n"
            + md_table(wide, digits=1) + "\n\nChosen a by the rule: "
            + "; ".join(f"{sc}: " + "; ".join(f"{m} " + ", ".join(f"{k} {v:g}" for k, v in c.items()) for m, c in ch.items())
                        for sc, ch in chosen.items())
            + ".\n\nEach design at its chosen a's, by number of saturating co-runners (coverage %):\n\n"
            + md_table(cell_wide, digits=1) + f"\n\n{verdict}.\n")
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
