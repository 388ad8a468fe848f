#!/usr/bin/env python3
"""Nested cross-validation of the interval's calibration over architectures (``research.nested``: the design,
and what is and is not nested): every architecture held out once, the interval's constants chosen again on the rest.

Each outer fold takes ~10 minutes on two cores (the slowdown-scale rule fits 5 exponents × 2 modes × 3 splits); a
finished fold is kept in ``OUT/folds/`` with the data hash it was computed on, and a rerun on the same data resumes
after it.

  PYTHONPATH=. python research/nested_cv.py [--data datasets/h100] [--profiles ncu] [--out reports/h100/nested]

Writes ``README.md``, ``summary.csv`` (per mode and kind of split), ``by_fold.csv`` (each fold's constants and
figures), ``by_arch.csv`` (each architecture's rows, MAPE and coverage) and ``folds/`` (each fold's predictions).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colopred.io import write_csv_atomic, write_text_atomic  # noqa: E402
from colopred.research.dataset import load_dataset  # noqa: E402
from colopred.research.evaluation import covered  # noqa: E402
from research.nested import (  # noqa: E402
    OUTER_FOLDS,
    choose_constants,
    fold_predictions,
    outer_folds,
    summary,
    with_unseen_widths,
)
from colopred.research.protocol import is_locked, locked_architectures  # noqa: E402
from colopred.research.report import md_table  # noqa: E402

MODES = ("timeslice", "mps")


PREDICTIONS_VERSION = 2  # of a fold's predictions file: 2 added the report's splits (column training)


def run_fold(ds, k: int, fold: list[str], folder: Path, log) -> pd.DataFrame:
    """Fold ``k``'s predictions. A finished run on the same data and fold left its constants in ``folder`` (and its
    predictions, kept if of this script's ``PREDICTIONS_VERSION``): they are not chosen again."""
    meta_path, csv_path = folder / f"fold{k}.json", folder / f"fold{k}.csv.gz"
    t0 = time.monotonic()
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    if meta.get("data_hash") == ds.data_hash and meta.get("architectures") == fold:
        constants = meta["constants"]
        if meta.get("predictions_version") == PREDICTIONS_VERSION and csv_path.exists():
            log(f"fold {k}: kept from {csv_path}")
            return pd.read_csv(csv_path)
        log(f"fold {k}: constants kept from {meta_path}")
    else:
        dev = {}
        for mode in MODES:
            df = ds.for_mode(mode)
            dev[mode] = df[~is_locked(df, fold)].reset_index(drop=True)
        constants = choose_constants(dev, source=ds.profile_source, timeline=ds.timeline,
                                     log=lambda line: log(f"fold {k}:{line} ({time.monotonic() - t0:.0f} s)"))
        meta = {"data_hash": ds.data_hash, "architectures": fold, "constants": constants,
                "choice_seconds": round(time.monotonic() - t0)}
    pred = fold_predictions(ds, fold, constants, MODES).assign(fold=k)
    folder.mkdir(parents=True, exist_ok=True)
    write_csv_atomic(pred, csv_path, index=False)  # predictions first: they count as done once the meta names them
    write_text_atomic(meta_path, json.dumps({**meta, "predictions_version": PREDICTIONS_VERSION}, indent=1) + "\n")
    log(f"fold {k}: done, {len(pred)} rows ({time.monotonic() - t0:.0f} s)")
    return pred


def by_fold_table(pred: pd.DataFrame, folder: Path, folds: list[list[str]], kappa_of: dict) -> pd.DataFrame:
    """Each fold's figures (``nested.summary``'s) beside the constants its rules chose (``kappa_of``: the unseen job's
    width factor κ of each fold, ``nested.with_unseen_widths``)."""
    rows = []
    for k, fold in enumerate(folds):
        const = json.loads((folder / f"fold{k}.json").read_text())["constants"]
        for r in summary(pred[pred["fold"] == k]).to_dict("records"):
            c, a = const[r["mode"]]["slowdown_exponents"], const[r["mode"]]["size_exponents"]
            rows.append({"fold": k, "architectures": " ".join(fold), **{x: r[x] for x in ("mode", "split", "training", "rows")},
                         "c saturating / host-bound": f"{c['saturating']:g} / {c['host_bound']:g}",
                         "growth": const[r["mode"]]["interval_scale"],
                         "a saturating / host-bound": f"{a['saturating']:g} / {a['host_bound']:g}",
                         "κ saturating / host-bound": "{saturating:g} / {host_bound:g}".format(**kappa_of[k][r["mode"]])
                         if k in kappa_of and r["mode"] in kappa_of[k] else "",
                         **{x: r[x] for x in ("slowdown_mape_pct", "coverage_pct", "coverage_shipped_constants_pct")}})
    return pd.DataFrame(rows)


def by_arch_table(pred: pd.DataFrame) -> pd.DataFrame:
    p = pred.assign(err=(pred["pred"] - pred["slowdown"]) / pred["slowdown"],
                    inside=covered(pred["slowdown"], pred["lo"], pred["hi"]))
    g = p.groupby(["mode", "split", "training", "fold", "arch"])
    return pd.DataFrame({"rows": g.size(), "slowdown_mape_pct": 100 * g["err"].apply(lambda e: e.abs().mean()),
                         "mean_signed_error_pct": 100 * g["err"].mean(),
                         "coverage_pct": 100 * g["inside"].mean()}).reset_index()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT / "datasets" / "h100"))
    ap.add_argument("--profiles", default="ncu", choices=("ncu", "nvml"))
    ap.add_argument("--out", default=str(ROOT / "reports" / "h100" / "nested"))
    ap.add_argument("--folds", type=int, default=OUTER_FOLDS, help=f"outer folds, the locked split one of them (default {OUTER_FOLDS})")
    a = ap.parse_args()
    t0 = time.monotonic()

    def log(line: str) -> None:
        print(f"[{time.monotonic() - t0:6.0f} s] {line}", flush=True)

    ds = load_dataset(a.data, profile_source=a.profiles)
    archs = sorted(set(ds.for_mode("timeslice")["arch"]) | set(ds.for_mode("mps")["arch"]))
    folds = outer_folds(archs, locked_architectures(ds.root), a.folds)
    out = Path(a.out)
    folder = out / "folds"
    for k, f in enumerate(folds):
        log(f"fold {k}: {', '.join(f)}")
    raw = pd.concat([run_fold(ds, k, f, folder, log) for k, f in enumerate(folds)], ignore_index=True)
    pred, kappa_of = with_unseen_widths(raw, ds.profile_source)
    table = summary(pred)
    fold_table = by_fold_table(pred, folder, folds, kappa_of)
    write_csv_atomic(table, out / "summary.csv", index=False)
    write_csv_atomic(fold_table, out / "by_fold.csv", index=False)
    write_csv_atomic(by_arch_table(pred), out / "by_arch.csv", index=False)
    shown = out.resolve().relative_to(ROOT) if out.resolve().is_relative_to(ROOT) else out
    write_text_atomic(out / "README.md", "\n".join([
        "# Nested cross-validation of the interval's calibration over architectures", "",
        f"`PYTHONPATH=. python research/nested_cv.py --profiles {a.profiles} --out {shown}` (data hash `{ds.data_hash}`, "
        f"{len(folds)} outer folds, {len(archs)} architectures). The design, and what is and is not nested: "
        "`research/nested.py`. Every row is predicted in the outer fold of its job's architecture, its "
        "interval's constants (the slowdown scale c, the growth and its exponents a) chosen by their rules on the "
        "sets without any of that fold's architectures; fold 0 is the locked split. `training` split: the split as "
        "the report makes it (leave-arch without the row's own architecture, the extrapolating splits from every set "
        "of the training sizes), so these are the report's all-architecture figures with nested constants; fold-out: "
        "without any set of the fold's architectures (the locked protocol, fold by fold: on pairs → triples an unseen "
        "job in a larger set, whose interval takes the factor κ chosen on the other development folds, "
        "`research.interval_rules.unseen_width`; the shipped columns the shipped κ). `coverage_se_pct`: the coverage's standard error with the architectures resampled; "
        "`coverage_shipped_constants_pct`: the same rows' coverage with the shipped constants (chosen on the locked "
        "split's development rows, so they saw folds 1 and up).", "",
        md_table(table, digits=1), "",
        "Per outer fold (the constants its rules chose on the rest):", "",
        md_table(fold_table, digits=1), ""]))
    log(f"wrote {out}")
    print(table.round(2).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
