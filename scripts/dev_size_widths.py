#!/usr/bin/env python3
"""Study (development rows, then the locked split once): one conformal width per set size for unseen target jobs.

The interval's widths are calibrated per class of target job (host-bound or saturating) on out-of-fold residuals of
unseen architectures, pooled over set sizes. On the development leave-arch predictions an unseen saturating job is
then covered ~95% in pairs and ~81% in triples and four-job sets under time-slicing (its own bias meets more
co-runners in a larger set). ``SlowdownModel(interval_classes="host_bound_size")`` keeps the class widths for the
jobs the model was trained on (whose extrapolating splits chose the growth and slowdown exponents) and gives an
unseen target job the width of its class *and set size* (Mondrian calibration by size; sizes beyond training take
the largest trained size's width times the growth). The study was proposed after the locked split's coverage
(issue 23's remainder: locked time-slicing triples from pairs 84.7%, four-job sets 80.3%).

For each mode and design (``host_bound``, shipped; ``host_bound_size``): the development cross-validation's coverage
per split, and on leave-arch per (class, set size); the mean log half-width per split; then the locked figures'
coverage (``protocol.locked_tests``). Verdict in the README the script writes; the figures decide nothing by
themselves (no rule was fixed before the run).

  PYTHONPATH=. python scripts/dev_size_widths.py [--data datasets/h100] [--modes timeslice,mps] [--out FOLDER]
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

from colopred.constants import HOST_BOUND_BUSY  # noqa: E402
from colopred.io import write_csv_atomic, write_text_atomic  # noqa: E402
from colopred.research.dataset import load_dataset  # noqa: E402
from colopred.research.evaluation import evaluate_mode, job_fit_args, new_model  # noqa: E402
from colopred.research.protocol import is_locked, locked_architectures, locked_tests  # noqa: E402
from colopred.research.report import md_table  # noqa: E402
from colopred.runtime.features import FEATURES  # noqa: E402

DESIGNS = ("host_bound", "host_bound_size")


def _rows(p: pd.DataFrame, **labels) -> pd.DataFrame:
    out = p[["split", "n_jobs", "t_busy", "slowdown", "pred", "lo", "hi"]].dropna(subset=["pred"]).copy()
    out["covered"] = (out["slowdown"] >= out["lo"]) & (out["slowdown"] <= out["hi"])
    out["log_half_width"] = (np.log(out["hi"]) - np.log(out["lo"])) / 2
    out["cls"] = np.where(out["t_busy"] < HOST_BOUND_BUSY, "host_bound", "saturating")
    return out.assign(**labels)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT / "datasets" / "h100"))
    ap.add_argument("--modes", default="timeslice,mps")
    ap.add_argument("--out", default=str(ROOT / "reports" / "h100" / "intervals" / "size_widths"))
    a = ap.parse_args()
    t0 = time.time()
    ds = load_dataset(a.data)
    locked = locked_architectures(ds.root)
    parts = []
    for mode in a.modes.split(","):
        df = ds.for_mode(mode)
        dev = df[~is_locked(df, locked)].reset_index(drop=True)
        X, s = df[list(FEATURES)].to_numpy(), df["slowdown"].to_numpy()
        for design in DESIGNS:
            kw = {"interval_classes": design}
            _, p = evaluate_mode(dev, source="ncu", baselines=False, timeline=ds.timeline, model_kw=kw)
            parts.append(_rows(p, mode=mode, design=design, figure="development"))
            for kind, te, folds in locked_tests(df, locked):
                pred, iv = np.empty(len(te)), np.empty((len(te), 2))
                for pos, fit in folds:
                    m = new_model(mode, "ncu", ds.timeline, **kw).fit(X[fit], s[fit], groups=df["arch"].to_numpy()[fit],
                                                                      **job_fit_args(df.iloc[fit]))
                    pred[pos], iv[pos] = m.predict_with_interval(X[te[pos]], jobs=df["job"].to_numpy()[te[pos]])
                sub = df.iloc[te][["n_jobs", "t_busy", "slowdown"]].assign(split=kind, pred=pred, lo=iv[:, 0], hi=iv[:, 1])
                parts.append(_rows(sub, mode=mode, design=design, figure="locked"))
            print(f"{mode} {design}: {time.time() - t0:.0f} s", flush=True)
    rows = pd.concat(parts, ignore_index=True)
    by_split = (rows.groupby(["mode", "figure", "split", "design"])
                .agg(coverage_pct=("covered", lambda c: 100 * c.mean()), log_half_width=("log_half_width", "mean"),
                     rows=("covered", "size")).reset_index())
    la = rows[(rows["figure"] == "development") & (rows["split"] == "leave-arch")]
    by_size = (la.groupby(["mode", "cls", "n_jobs", "design"])
               .agg(coverage_pct=("covered", lambda c: 100 * c.mean()), log_half_width=("log_half_width", "mean"),
                    rows=("covered", "size")).reset_index())
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv_atomic(by_split, out / "by_split.csv", index=False)
    write_csv_atomic(by_size, out / "leave_arch_by_size.csv", index=False)

    def wide(t: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
        w = t.pivot_table(index=keys, columns="design", values=["coverage_pct", "log_half_width"])
        w.columns = [f"{'coverage %' if v == 'coverage_pct' else 'log half-width'} {d}" for v, d in w.columns]
        return w.reset_index().round(3)

    write_text_atomic(out / "README.md", "\n".join([
        "# One interval width per set size for unseen jobs (a study, not shipped)", "",
        f"`PYTHONPATH=. python scripts/dev_size_widths.py --out {out.resolve().relative_to(ROOT) if out.resolve().is_relative_to(ROOT) else out}` "
        f"(data hash `{ds.data_hash}`, ncu profiles; {time.time() - t0:.0f} s). Design in the script's docstring.", "",
        "Development leave-arch, per class of target job and set size:", "", md_table(wide(by_size, ["mode", "cls", "n_jobs"])), "",
        "Every split, development cross-validation and locked figure:", "", md_table(wide(by_split, ["mode", "figure", "split"])), ""]))
    print(f"wrote {out} ({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
