"""The rule that chooses ``constants.INTERVAL_UNSEEN_WIDTHS``: how much wider the interval of a job the model was
not trained on is in a set larger than any it trained on (docs/model.md, "Intervals").

Two calibrations meet there and neither sees the case. The conformal width is calibrated on jobs held out with their
architecture in sets of the trained sizes (an unseen job's own error); the growth beyond the trained sizes
(``size_exponent``) on the report's extrapolating splits, whose models trained on every architecture's smaller sets
(a trained job's extrapolation error, inside an interval as wide as an unseen job's). An unseen job in a larger set
carries both errors, so its log half-width takes a factor κ ≥ 1 of its mode and class of target job
(``SlowdownModel(unseen_widths=...)``).

**Rows.** The fold-out rows of the extrapolating splits of the nested cross-validation (``nested.fold_predictions``,
training ``fold-out``): an outer fold's rows in triples (four-job sets) predicted by a model fitted on the pairs (pairs
and triples) without any set holding one of the fold's architectures, with κ = 1. Their half-width is log(hi / pred),
so every κ is scored from one frame. The shipped constants are chosen on the development folds (1 …, not the locked
fold 0) with the shipped constants' intervals (columns ``pred_shipped``, ``hi_shipped``); :func:`nested_covered` says
what each fold's rows are covered with a κ chosen on the other development folds and the fold's own constants.

**Rule** (fixed before its first run): per (mode, class), the rows of both splits of the development folds pooled; the
κ of :data:`GRID` whose coverage is closest to 90% (ties: the smaller) replaces 1 only if it brings the coverage closer
by more than one binomial standard error of that coverage (100·√(0.09/rows) points), as ``size_exponent``'s rule.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from colopred.runtime.estimator import INTERVAL_CLASS_NAMES
from . import closer_by_a_standard_error, target_class

GRID = tuple(float(k) for k in np.round(np.arange(1.0, 3.0001, 0.05), 2))
EXTRAPOLATING = ("pairs->triples", "pairs+triples->quads")
LOCKED_FOLD = 0  # nested.outer_folds: fold 0 is the locked split


def unseen_rows(pred: pd.DataFrame) -> pd.DataFrame:
    """The fold-out rows of the extrapolating splits of nested fold predictions (``nested.fold_predictions``)."""
    return pred[(pred["training"] == "fold-out") & pred["split"].isin(EXTRAPOLATING)].reset_index(drop=True)


def _frame(rows: pd.DataFrame, tag: str) -> tuple[np.ndarray, np.ndarray]:
    """(log half-width at κ = 1, |log error|) of each row, from columns ``pred{tag}`` and ``hi{tag}``."""
    p = rows[f"pred{tag}"].to_numpy(float)
    return np.log(rows[f"hi{tag}"].to_numpy(float) / p), np.abs(np.log(rows["slowdown"].to_numpy(float) / p))


def coverage_by_factor(rows: pd.DataFrame, tag: str = "_shipped") -> pd.DataFrame:
    """Coverage % of every (mode, class, κ of :data:`GRID`) over ``rows`` (both splits pooled), their intervals those
    of columns ``pred{tag}``, ``hi{tag}``."""
    w, err = _frame(rows, tag)
    labels = pd.DataFrame({"mode": rows["mode"].to_numpy(), "jobs": target_class(rows["t_busy"])})
    out = []
    for k in GRID:
        g = labels.assign(covered=err <= k * w).groupby(["mode", "jobs"], sort=False)["covered"].agg(["mean", "count"])
        out += [{"mode": m, "jobs": c, "kappa": k, "rows": int(r["count"]), "coverage_pct": 100 * r["mean"]}
                for (m, c), r in g.iterrows()]
    return pd.DataFrame(out)


def choose(cov: pd.DataFrame) -> dict[str, dict[str, float]]:
    """The rule (module doc): ``{mode: {class: κ}}`` from :func:`coverage_by_factor`; a class without rows keeps 1."""
    chosen: dict[str, dict[str, float]] = {}
    for mode in cov["mode"].unique():
        chosen[mode] = dict.fromkeys(INTERVAL_CLASS_NAMES, 1.0)
        for cls in INTERVAL_CLASS_NAMES:
            g = cov[(cov["mode"] == mode) & (cov["jobs"] == cls)]
            if g.empty:
                continue
            chosen[mode][cls] = closer_by_a_standard_error(g["kappa"], g["coverage_pct"], int(g["rows"].iloc[0]), 1.0)
    return chosen


def covered_at(rows: pd.DataFrame, chosen: Mapping[str, Mapping[str, float]], tag: str = "_shipped") -> np.ndarray:
    """Whether each row is covered with the κ of its mode and class in ``chosen``."""
    w, err = _frame(rows, tag)
    k = np.array([chosen.get(m, {}).get(c, 1.0) for m, c in zip(rows["mode"], target_class(rows["t_busy"]))])
    return err <= k * w


def nested_covered(rows: pd.DataFrame) -> tuple[np.ndarray, dict[int, dict[str, dict[str, float]]]]:
    """(whether each row is covered, κ of each fold): each fold's rows with a κ chosen by the rule on the other
    development folds' rows, every row's interval its own fold's (``pred``, ``hi``: the fold's own constants)."""
    inside = np.zeros(len(rows), bool)
    fold = rows["fold"].to_numpy()
    chosen_of = {}
    for k in sorted(set(fold.tolist())):
        others = rows[(fold != k) & (fold != LOCKED_FOLD)]
        chosen_of[int(k)] = choose(coverage_by_factor(others, tag=""))
        inside[fold == k] = covered_at(rows[fold == k], chosen_of[int(k)], tag="")
    return inside, chosen_of
