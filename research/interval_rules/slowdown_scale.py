"""The rule that chooses the interval's per-row slowdown scale p̂^c (``constants.INTERVAL_SLOWDOWN_EXPONENTS``) on a
set of development rows (``research/dev_slowdown_scale.py`` on the locked split's development architectures,
``research.nested`` on each outer fold's).

``SlowdownModel(slowdown_exponents=...)`` makes a row's conformal scale σ(x) = growth · p̂^c, p̂ its point prediction
and c its class's exponent (host-bound target job or saturating), calibrated on |log residual| / σ. For each c of
:data:`GRID` (both classes at once: a class's c changes only its own scores and widths) the development rows'
out-of-sample intervals of :data:`SPLITS` are computed (:func:`predictions`).

**Rule** (fixed before its first run): per (mode, class) the objective is the mean |coverage − 90| over six cells: the
random split's rows in four quartiles of p̂ (whether the width follows the error where the model was calibrated),
pairs → triples, and pairs and triples → four-job sets (whether it carries to larger sets). A c ≠ 0 replaces 0 only if
it lowers the objective by more than :data:`MIN_GAIN_POINTS`; among those the lowest objective wins (ties: the smaller
|c|).
"""

from __future__ import annotations

from typing import Callable, Mapping

import pandas as pd

from colopred.constants import INTERVAL_COVERAGE
from colopred.runtime.estimator import INTERVAL_CLASS_NAMES
from colopred.research.evaluation import covered, evaluate_mode
from . import target_class

GRID = (-1.0, -0.5, 0.0, 0.5, 1.0)
SPLITS = ("random", "pairs->triples", "pairs+triples->quads")
MIN_GAIN_POINTS = 1.0  # the rule's margin over c = 0
TARGET_PCT = 100 * INTERVAL_COVERAGE
COLUMNS = ["mode", "c", "split", "t_busy", "slowdown", "pred", "lo", "hi"]


def predictions(dev_by_mode: Mapping[str, pd.DataFrame], source: str = "ncu", timeline: bool = True,
                model_kw: dict | None = None, keep: tuple[str, ...] = (),
                log: Callable[[str], None] = lambda s: None) -> pd.DataFrame:
    """Out-of-sample predictions of :data:`SPLITS` on each mode's development rows, once per c of :data:`GRID`
    (``model_kw``: more SlowdownModel parameters, e.g. the growth beyond the trained sizes); columns :data:`COLUMNS`
    and ``keep``."""
    out = []
    for mode, dev in dev_by_mode.items():
        for c in GRID:
            _, p = evaluate_mode(dev, source=source, kinds=SPLITS, baselines=False, timeline=timeline,
                                 model_kw={**(model_kw or {}), "slowdown_exponents": dict.fromkeys(INTERVAL_CLASS_NAMES, c)})
            out.append(p.assign(mode=mode, c=c)[COLUMNS + [k for k in keep if k not in COLUMNS]])
            log(f"  slowdown scale: {mode} c={c:+.2f}")
    return pd.concat(out, ignore_index=True)


def cells(pred: pd.DataFrame) -> pd.DataFrame:
    """Coverage % and rows of each (mode, class, cell): the random split in quartiles of p̂, and the two extrapolating
    splits pooled. ``pred``: development predictions with ``c``, ``mode``, ``split``, ``t_busy``, ``slowdown``,
    ``pred``, ``lo``, ``hi``."""
    p = pred.dropna(subset=["pred"]).copy()
    p["cls"] = target_class(p["t_busy"])
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
