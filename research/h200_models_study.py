#!/usr/bin/env python3
"""Which model for H200 profiles: one trained on the H200 alone, on both GPUs' data, or the H100's?

Question: on an H200, for an architecture no model was trained on, which training data predicts its slowdowns
best: the H200's measured sets alone (its jobs described by their H200 ncu profiles), those plus the H100's (each
GPU's rows described by that GPU's profiles), or the H100's alone (what the shipped models are)? Split:
leave-architecture-out over the H200's architectures (each architecture's rows in the H200 sets holding it, every
training variant fitted without any set holding it, on either GPU); the shipped H100 model, which saw every one of
these architectures on the H100, is scored beside them for reference. H200 profiles lack the stream overlap (no
timeline was taken on the H200): it is taken from the job's H100 profile (``research.transfer.fill_missing``), as a
profile made by ``colopred profile run`` would carry it. Point models with the shipped settings and job offsets
(``evaluation.new_model``, ``job_fit_args``); nothing is tuned here. Figures: per-job slowdown MAPE over every
held-out row, by set size, on sets holding copies of one job, on the locked architectures
(``datasets/h200/locked_split.json``) and on the development ones, and pays-off agreement.

Finding: see the report it writes (``reports/h200/models/README.md``).

  PYTHONPATH=. python research/h200_models_study.py [--h100 datasets/h100] [--h200 datasets/h200] [--out reports/h200/models]
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

from colopred.constants import MODES  # noqa: E402
from colopred.io import write_csv_atomic, write_text_atomic  # noqa: E402
from colopred.research.dataset import dataset_from, load_dataset, load_profiles_dir  # noqa: E402
from colopred.research.evaluation import job_fit_args, metrics, new_model, splits  # noqa: E402
from colopred.research.protocol import locked_architectures  # noqa: E402
from colopred.research.report import md_table  # noqa: E402
from colopred.runtime.features import FEATURES  # noqa: E402
from colopred.runtime.manifest import default_model_path, load_model  # noqa: E402
from research.transfer import fill_missing  # noqa: E402

VARIANTS = ("H200 only", "H100 + H200", "H100 only")


def _fit(df: pd.DataFrame, mode: str):
    return new_model(mode, "ncu", interval=False, calibrate=False).fit(
        df[list(FEATURES)].to_numpy(), df["slowdown"].to_numpy(), **job_fit_args(df))


def predictions(h200: pd.DataFrame, h100: pd.DataFrame, mode: str, log=print) -> dict[str, np.ndarray]:
    """Leave-architecture-out predictions of every H200 row of ``mode`` by each of :data:`VARIANTS`, and the shipped
    H100 model's."""
    preds = {v: np.full(len(h200), np.nan) for v in VARIANTS}
    folds = list(splits(h200, "leave-arch"))
    t0 = time.monotonic()
    for i, (arch, tr, te) in enumerate(folds):
        old = h100[~h100["set_archs"].map(lambda a: arch in a)]
        new = h200.iloc[tr]
        X = h200.iloc[te][list(FEATURES)].to_numpy()
        for name, rows in (("H200 only", new), ("H100 + H200", pd.concat([old, new], ignore_index=True)), ("H100 only", old)):
            preds[name][te] = _fit(rows, mode).predict(X)
        log(f"  {mode} fold {i + 1}/{len(folds)} ({arch}): {time.monotonic() - t0:.0f} s")
    model, _ = load_model(default_model_path(mode))
    preds["shipped H100 model (saw the architecture on the H100)"] = model.predict(h200[list(FEATURES)].to_numpy())
    return preds


def summary(df: pd.DataFrame, preds: dict[str, np.ndarray], locked: list[str]) -> pd.DataFrame:
    copies = df.groupby("window_id")["job"].transform(lambda j: j.duplicated(keep=False).any()).to_numpy()
    on_locked = df["set_archs"].map(lambda a: bool(set(locked) & set(a))).to_numpy()
    subsets = {"all": np.ones(len(df), bool), "pairs": df["n_jobs"].to_numpy() == 2, "triples": df["n_jobs"].to_numpy() == 3,
               "four-job sets": df["n_jobs"].to_numpy() == 4, "sets with copies": copies,
               "locked architectures' sets": on_locked, "development sets": ~on_locked}
    out = []
    for name, p in preds.items():
        for sub, mask in subsets.items():
            ok = mask & ~np.isnan(p)
            if not ok.any():
                continue
            m = metrics(df[ok].reset_index(drop=True), p[ok])
            out.append({"variant": name, "rows": sub, "n_rows": m["n_rows"], "n_sets": m["n_sets"],
                        "slowdown_mape_pct": round(m["slowdown_mape_pct"], 2),
                        "pays_off_agreement_pct": round(m["pays_off_agreement_pct"], 1)})
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--h100", default="datasets/h100")
    ap.add_argument("--h200", default="datasets/h200")
    ap.add_argument("--out", default="reports/h200/models")
    ap.add_argument("--modes", default=",".join(MODES))
    a = ap.parse_args(argv)
    h200_root = Path(a.h200)
    pdir = h200_root / "profiles" / "ncu"
    h100 = load_dataset(Path(a.h100))
    own = load_profiles_dir(pdir)
    filled = fill_missing(own, load_profiles_dir(Path(a.h100) / "profiles" / "ncu"))
    h200 = dataset_from(h200_root, filled, sorted(pdir.glob("*.json")))
    locked = locked_architectures(h200_root)
    tables, per_row = [], []
    for mode in a.modes.split(","):
        df = h200.for_mode(mode)
        preds = predictions(df, h100.for_mode(mode), mode)
        tables.append(summary(df, preds, locked).assign(mode=mode))
        per_row.append(df[["window_id", "set", "n_jobs", "job", "instance", "arch", "slowdown"]].assign(
            mode=mode, **{f"pred {k}": np.round(v, 5) for k, v in preds.items()}))
    table = pd.concat(tables, ignore_index=True)[["mode", "variant", "rows", "n_rows", "n_sets", "slowdown_mape_pct",
                                                   "pays_off_agreement_pct"]]
    print(md_table(table))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv_atomic(table, out / "summary.csv")
    write_csv_atomic(pd.concat(per_row, ignore_index=True), out / "predictions.csv.gz")
    wide = table.pivot_table(index=["mode", "rows"], columns="variant", values="slowdown_mape_pct", sort=False).reset_index()
    write_text_atomic(out / "README.md", (
        "# Which model for H200 profiles\n\n"
        f"`PYTHONPATH=. python research/h200_models_study.py --h100 {a.h100} --h200 {a.h200} --out {a.out}` "
        f"(H200 data hash `{h200.data_hash}`, H100 `{h100.data_hash}`; the design is in the script's docstring). "
        "Leave-architecture-out over the H200's architectures: per-job slowdown MAPE (%) of the rows of each "
        "held-out architecture, each variant fitted without any set holding it on either GPU; the shipped H100 "
        "model saw every architecture on the H100 and is shown for reference. Locked architectures: "
        f"{', '.join(locked)}.\n\n" + md_table(wide) + "\n\nEvery figure, with pays-off agreement and counts, in "
        "`summary.csv`; every row's predictions in `predictions.csv.gz`.\n"))
    print(f"wrote {out}/README.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
