#!/usr/bin/env python3
"""Choose ``constants.INTERVAL_UNSEEN_WIDTHS`` on the development architectures only: how much wider the interval of
a job the model was not trained on is in a set larger than any it trained on, per profile source (``--profiles``),
mode and class of target job (docs/model.md, "Intervals"). The design and the rule, fixed before their first run:
``research.interval_rules.unseen_width``. It reads the fold predictions of the nested cross-validation
(``research/nested_cv.py``, which must have run on the same data): the development folds choose, the locked fold 0 and
the nested estimate (each fold's κ chosen on the other development folds) are reported beside it.

  PYTHONPATH=. python research/dev_unseen_width.py [--nested reports/h100/nested] [--profiles ncu] [--out FOLDER]

Writes ``coverage.csv`` (mode, class, κ: the development folds' coverage) and ``README.md``.
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

from colopred.constants import INTERVAL_UNSEEN_WIDTHS  # noqa: E402
from colopred.io import write_csv_atomic, write_text_atomic  # noqa: E402
from research.interval_rules import unseen_width  # noqa: E402
from colopred.research.report import md_table  # noqa: E402


def read_folds(folder: Path) -> tuple[pd.DataFrame, set[str]]:
    """Every fold's predictions (``folder/foldK.csv.gz``) and the data hashes they were made on."""
    frames, hashes = [], set()
    for meta_path in sorted(folder.glob("fold*.json")):
        meta = json.loads(meta_path.read_text())
        hashes.add(meta["data_hash"])
        frames.append(pd.read_csv(meta_path.with_suffix(".csv.gz")))
    if not frames:
        raise SystemExit(f"{folder}: no fold predictions; run research/nested_cv.py first")
    return pd.concat(frames, ignore_index=True), hashes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profiles", default="ncu", choices=("ncu", "nvml"))
    ap.add_argument("--nested", default=None, help="the nested cross-validation's folder (default reports/h100[-nvml]/nested)")
    ap.add_argument("--out", default=None, help="folder for README.md and coverage.csv (default: print only)")
    a = ap.parse_args()
    nested = Path(a.nested or ROOT / "reports" / ("h100" if a.profiles == "ncu" else "h100-nvml") / "nested")
    pred, hashes = read_folds(nested / "folds")
    rows = unseen_width.unseen_rows(pred)
    dev = rows[rows["fold"] != unseen_width.LOCKED_FOLD]
    cov = unseen_width.coverage_by_factor(dev)
    chosen = unseen_width.choose(cov)
    shipped = INTERVAL_UNSEEN_WIDTHS.get(a.profiles, {})
    nested_inside, _ = unseen_width.nested_covered(rows)
    table = []
    for (mode, split), g in rows.groupby(["mode", "split"], sort=False):
        d, lk = g[g["fold"] != unseen_width.LOCKED_FOLD], g[g["fold"] == unseen_width.LOCKED_FOLD]
        pct = lambda inside: round(100 * float(np.mean(inside)), 1) if len(inside) else float("nan")  # noqa: E731
        table.append({"mode": mode, "split": split, "development rows": len(d),
                      "development, κ = 1": pct(unseen_width.covered_at(d, {})),
                      "development, chosen κ": pct(unseen_width.covered_at(d, chosen)),
                      "locked rows": len(lk), "locked, κ = 1": pct(unseen_width.covered_at(lk, {})),
                      "locked, chosen κ": pct(unseen_width.covered_at(lk, chosen)),
                      "nested, κ = 1": pct(unseen_width.covered_at(g, {}, tag="")),
                      "nested, κ of the other folds": pct(nested_inside[g.index])})
    table = pd.DataFrame(table)
    wide = cov.pivot_table(index=["mode", "jobs", "rows"], columns="kappa", values="coverage_pct", sort=False).reset_index()
    wide = wide[["mode", "jobs", "rows", *[k for k in unseen_width.GRID if k in wide.columns and (round(k * 4, 6) % 1 == 0)]]]
    wide.columns = [c if isinstance(c, str) else f"κ={c:g}" for c in wide.columns]
    verdict = "chosen κ: " + "; ".join(f"{m} " + ", ".join(f"{c} {k:g}" for c, k in v.items()) for m, v in chosen.items())
    verdict += "; in use: " + ("; ".join(f"{m} " + ", ".join(f"{c} {k:g}" for c, k in v.items()) for m, v in shipped.items()) or "none")
    print(wide.round(1).to_string(index=False))
    print(table.to_string(index=False))
    print(verdict)
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        write_csv_atomic(cov, out / "coverage.csv", index=False)
        shown = nested.resolve().relative_to(ROOT) if nested.resolve().is_relative_to(ROOT) else nested
        write_text_atomic(out / "README.md",
            "# Interval width of an unseen job in a set larger than trained, chosen on the development architectures\n\n"
            f"`PYTHONPATH=. python research/dev_unseen_width.py --profiles {a.profiles} --out {a.out}`, from the fold "
            f"predictions of `{shown}` (data hash `{', '.join(sorted(hashes))}`). The design and the rule: "
            "`research/interval_rules/unseen_width.py`. Coverage (%) of the 90% interval of the jobs held out "
            "with their outer fold's architectures in the sets larger than the model trained on (triples from pairs, "
            "four-job sets from pairs and triples, pooled), development folds (1 and up), shipped constants, by the "
            "factor κ of the log half-width (every 0.25 shown; the rule searches every 0.05):\n\n"
            + md_table(wide, digits=1) + f"\n\n{verdict}.\n\nEach split with the chosen κ: development folds (where it was "
            "chosen), the locked fold 0 (shipped constants), and nested (each fold's own constants and a κ chosen by the "
            "rule on the other development folds; all folds):\n\n" + md_table(table, digits=1) + "\n")
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
