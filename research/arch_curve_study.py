#!/usr/bin/env python3
"""Leave-architecture-out error against the number of architectures trained on, and what of it is diversity.

For each held-out architecture a and each k, the model is trained on the sets whose architectures all lie in a random
k of the other architectures (``diverse``), and, beside it, on as many rows drawn at random from all the sets without
a (``volume-matched``: the same amount of data, every other architecture in it). Both predict a's jobs in every set
holding a, as the report's leave-arch split does. ``diverse`` at k = all is the report's figure; the gap between the
two curves at a k is what k architectures lose to more architectures at equal data, the gap along ``volume-matched``
what they lose to more data. Point models (colopred's design and constants), ``--reps`` random draws per k below all.

  PYTHONPATH=. python research/arch_curve_study.py [--data datasets/h100] [--ks 6,10,14] [--reps 3] [--out reports/h100/arch_curve]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colopred.constants import MODES  # noqa: E402
from colopred.io import write_csv_atomic, write_text_atomic  # noqa: E402
from colopred.research.dataset import load_dataset  # noqa: E402
from colopred.research.evaluation import point_predictor  # noqa: E402
from colopred.research.report import md_table  # noqa: E402

SEED = 23
"""Seed of the architecture draws and the volume-matched row draws."""


def training_rows(df: pd.DataFrame, held_out: str, keep: set[str], rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(diverse, volume-matched) training masks of the fold holding out ``held_out``: the rows of the sets whose
    architectures all lie in ``keep``, and as many rows drawn at random from every set without ``held_out``."""
    without = ~df["set_archs"].map(lambda s: held_out in s).to_numpy()
    diverse = df["set_archs"].map(lambda s: set(s) <= keep).to_numpy() & without
    matched = np.zeros(len(df), bool)
    matched[rng.choice(np.flatnonzero(without), int(diverse.sum()), replace=False)] = True
    return diverse, matched


def curve(df: pd.DataFrame, mode: str, ks: list[int], reps: int, rng: np.random.Generator) -> pd.DataFrame:
    """One row per (k, draw, design): training rows (mean over folds) and leave-arch MAPE % over every row tested."""
    fit_predict = point_predictor(mode)
    archs = sorted(df["arch"].unique())
    out = []
    for k in [*ks, len(archs) - 1]:
        for rep in range(reps if k < len(archs) - 1 else 1):
            err = {"diverse": [], "volume-matched": []}
            n_train = []
            for a in archs:
                others = [x for x in archs if x != a]
                keep = set(rng.choice(others, k, replace=False)) if k < len(others) else set(others)
                diverse, matched = training_rows(df, a, keep, rng)
                te = (df["arch"] == a).to_numpy()
                s = df["slowdown"].to_numpy()[te]
                for design, tr in (("diverse", diverse), ("volume-matched", matched)):
                    if tr.sum() == 0:
                        continue
                    err[design].append(np.abs(fit_predict(df[tr], df[te]) - s) / s)
                n_train.append(int(diverse.sum()))
            for design, e in err.items():
                out.append({"mode": mode, "architectures_trained": k, "draw": rep, "design": design,
                            "training_rows_mean": float(np.mean(n_train)), "leave_arch_mape_pct": 100 * float(np.concatenate(e).mean())})
            print(out[-2], out[-1], sep="\n", flush=True)
    return pd.DataFrame(out)


def _shown(path: str) -> str:
    """``path`` relative to the checkout where it lies inside it (the README names no machine's folders)."""
    p = Path(path).resolve()
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT / "datasets/h100"))
    ap.add_argument("--ks", default="6,10,14", help="numbers of architectures to train on, below all")
    ap.add_argument("--reps", type=int, default=3, help="random draws of the architectures per k")
    ap.add_argument("--out", default=str(ROOT / "reports/h100/arch_curve"))
    a = ap.parse_args(argv)
    ds = load_dataset(a.data)
    rng = np.random.default_rng(SEED)
    rows = pd.concat([curve(ds.for_mode(m), m, [int(k) for k in a.ks.split(",")], a.reps, rng) for m in MODES])
    summary = (rows.groupby(["mode", "architectures_trained", "design"], as_index=False)
               .agg(draws=("draw", "size"), training_rows_mean=("training_rows_mean", "mean"),
                    leave_arch_mape_pct=("leave_arch_mape_pct", "mean"), spread_pct=("leave_arch_mape_pct", lambda x: x.max() - x.min())))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv_atomic(rows, out / "draws.csv", index=False, float_format="%.4f")
    write_csv_atomic(summary, out / "summary.csv", index=False, float_format="%.4f")
    write_text_atomic(out / "README.md", "# Leave-arch error against the architectures trained on\n\n"
                      f"Dataset `{_shown(a.data)}` (hash `{ds.data_hash}`). `PYTHONPATH=. python research/arch_curve_study.py "
                      f"--ks {a.ks} --reps {a.reps}` rewrites this folder; the design is in the script's docstring.\n\n"
                      + md_table(summary) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
