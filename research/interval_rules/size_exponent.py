"""The rules that choose ``constants.INTERVAL_SIZE_EXPONENTS`` and the growth in use (``constants.INTERVAL_SCALE_OF_SOURCE``)
on a set of development rows (``research/dev_size_exponent.py`` on the locked split's development architectures,
``research.nested`` on each outer fold's): how much wider the interval of a set larger than any in training is,
per mode and class of target job (docs/model.md, "Intervals").

The ``beyond_size`` growth widens the conformal half-width of a set of n jobs, from a model whose largest training set
had m, by ((n − 1)/(m − 1))^a; ``beyond_load`` by max(1, B/(m − 1))^a, B the co-runners' summed busy fraction.
Calibration rows are all of sizes ≤ m, where the growth is 1, so a does not change the calibrated widths: the
development predictions of the two extrapolating splits (pairs → triples, pairs and triples → four-job sets) are made
once (:func:`predictions`, ``beyond_size`` at a = 0.5), and each a's coverage is computed from them (the interval is
symmetric in log, half-width w·σ).

**Exponent rule** (:func:`choose`, fixed before its first run): per (mode, class), the rows of both splits pooled; an a
replaces 0.5 only if it brings the coverage closer to 90% by more than one binomial standard error of that coverage
(100·√(0.09/rows) points); among those, the closest wins (ties: the smaller a).

**Growth rule** (:func:`choose_scale`): each growth at its chosen a's is scored by the row-weighted mean |coverage − 90|
over the cells (mode, class, split, number of saturating co-runners: busy ≥ ``HOST_BOUND_BUSY``), the unevenness a
pooled coverage hides (:func:`design_objective`); the growth in use stays unless the other's objective is lower by
more than one bootstrap standard error of the difference (:func:`objective_difference_se`, ``BOOTSTRAP_DRAWS`` draws of
the development sets with replacement, seed ``BOOTSTRAP_SEED``): the two growths' objectives differed by 0.1–0.6
points and the winner flipped with nearly every batch of relabelled sets, each flip moving every interval of larger
sets.
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np
import pandas as pd

from colopred.constants import HOST_BOUND_BUSY, INTERVAL_COVERAGE, INTERVAL_SIZE_EXPONENT
from colopred.runtime.estimator import INTERVAL_CLASS_NAMES
from colopred.research.evaluation import evaluate_mode
from . import closer_by_a_standard_error

GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0)
SCALES = ("beyond_size", "beyond_load")
TRAINED_UP_TO = {"pairs->triples": 2, "pairs+triples->quads": 3}  # the largest set size each split trains on
BOOTSTRAP_DRAWS = 1000  # draws of the development sets for the SE of the objectives' difference (its SE within ~3%)
BOOTSTRAP_SEED = 0


def predictions(dev_by_mode: Mapping[str, pd.DataFrame], source: str = "ncu", timeline: bool = True,
                slowdown_exponents: Mapping[str, Mapping[str, float]] | None = None,
                log: Callable[[str], None] = lambda s: None) -> pd.DataFrame:
    """Each mode's development rows' out-of-sample predictions and intervals on the extrapolating splits, made with
    ``beyond_size`` at a = ``INTERVAL_SIZE_EXPONENT`` for every job (the frame every a is scored from) and, per mode,
    ``slowdown_exponents[mode]`` (default: the shipped ones of ``source``)."""
    out = []
    for mode, dev in dev_by_mode.items():
        kw = {"size_exponents": dict.fromkeys(INTERVAL_CLASS_NAMES, INTERVAL_SIZE_EXPONENT), "interval_scale": "beyond_size"}
        if slowdown_exponents is not None:
            kw["slowdown_exponents"] = dict(slowdown_exponents[mode])
        _, p = evaluate_mode(dev, source=source, kinds=tuple(TRAINED_UP_TO), baselines=False, timeline=timeline,
                             log=log, model_kw=kw)
        out.append(p.assign(mode=mode))
    return pd.concat(out, ignore_index=True)


def growth_ratio(pred: pd.DataFrame, scale: str) -> np.ndarray:
    """The base of each row's growth: (n − 1)/(m − 1) (``beyond_size``) or B/(m − 1) (``beyond_load``), at least 1."""
    m = pred["split"].map(TRAINED_UP_TO).to_numpy(float)
    co = pred["n_jobs"].to_numpy(float) - 1 if scale == "beyond_size" else np.nan_to_num(pred["co_sum_busy"].to_numpy(float))
    return np.maximum(co / (m - 1), 1.0)


def _frame(pred: pd.DataFrame, a0: float) -> tuple[np.ndarray, np.ndarray, pd.DataFrame]:
    """(calibrated half-width w of each row, |log error|, the rows' labels: mode, split, class, saturating co-runners)
    from predictions made with ``beyond_size`` at exponent ``a0``: w·σ = log(hi / pred)."""
    w = np.log(pred["hi"].to_numpy() / pred["pred"].to_numpy()) / growth_ratio(pred, "beyond_size") ** a0
    err = np.abs(np.log(pred["slowdown"].to_numpy() / pred["pred"].to_numpy()))
    saturating = (pred["t_busy"] >= HOST_BOUND_BUSY).astype(int)
    co_sat = saturating.groupby(pred["window_id"]).transform("sum") - saturating
    labels = pd.DataFrame({"mode": pred["mode"], "split": pred["split"], "co_saturating": co_sat,
                           "jobs": np.where(saturating == 1, "saturating", "host-bound")})
    return w, err, labels


def _covered_at(pred: pd.DataFrame, chosen: Mapping[str, Mapping[str, float]], scale: str, w: np.ndarray,
                err: np.ndarray, labels: pd.DataFrame) -> np.ndarray:
    """Whether each row's |log error| ``err`` lies within its half-width ``w`` grown by ``scale`` at the a of its mode
    and class in ``chosen`` (``{mode: {class: a}}``); ``w``, ``err`` and ``labels`` from :func:`_frame`."""
    cls = np.where(labels["jobs"] == "host-bound", "host_bound", "saturating")
    a = np.array([chosen[m][c] for m, c in zip(labels["mode"], cls)])
    return err <= w * growth_ratio(pred, scale) ** a


def coverage_by_exponent(pred: pd.DataFrame, a0: float = INTERVAL_SIZE_EXPONENT) -> pd.DataFrame:
    """Coverage % of every (scale, mode, class, a) over the pooled rows of both splits, and per split, from predictions
    made with ``beyond_size`` at exponent ``a0``."""
    w, err, labels = _frame(pred, a0)
    rows = []
    for scale in SCALES:
        ratio = growth_ratio(pred, scale)
        for a in GRID:
            frame = labels.assign(covered=err <= w * ratio ** a)
            for split_label, f in (("both", frame), *((k, frame[frame["split"] == k]) for k in TRAINED_UP_TO)):
                g = f.groupby(["mode", "jobs"], sort=False)["covered"].agg(["mean", "count"]).reset_index()
                rows += [{"scale": scale, "mode": r["mode"], "jobs": r["jobs"], "split": split_label, "a": a,
                          "rows": int(r["count"]), "coverage_pct": 100 * r["mean"]} for _, r in g.iterrows()]
    return pd.DataFrame(rows)


def cell_coverage(pred: pd.DataFrame, chosen: dict[str, dict[str, dict[str, float]]],
                  a0: float = INTERVAL_SIZE_EXPONENT) -> pd.DataFrame:
    """Coverage % of each design at its chosen a's in the cells of the design rule (module doc)."""
    w, err, labels = _frame(pred, a0)
    out = []
    for scale in SCALES:
        f = labels.assign(covered=_covered_at(pred, chosen[scale], scale, w, err, labels))
        g = f.groupby(["mode", "jobs", "split", "co_saturating"])["covered"].agg(["mean", "count"]).reset_index()
        out.append(g.rename(columns={"mean": "coverage_pct", "count": "rows"}).assign(scale=scale, coverage_pct=lambda d: 100 * d["coverage_pct"]))
    return pd.concat(out, ignore_index=True)


def design_objective(cells: pd.DataFrame) -> pd.Series:
    """Row-weighted mean |coverage − 90| over each design's cells."""
    miss = (cells["coverage_pct"] - 100 * INTERVAL_COVERAGE).abs()
    return (miss * cells["rows"]).groupby(cells["scale"]).sum() / cells.groupby("scale")["rows"].sum()


def objective_difference_se(pred: pd.DataFrame, chosen: dict[str, dict[str, dict[str, float]]],
                             a0: float = INTERVAL_SIZE_EXPONENT, draws: int = BOOTSTRAP_DRAWS,
                             seed: int = BOOTSTRAP_SEED) -> float:
    """Bootstrap standard error of ``design_objective`` of ``beyond_load`` minus that of ``beyond_size`` (each at its
    chosen a's): the development sets (``window_id``: a set's rows stay together) drawn with replacement."""
    w, err, labels = _frame(pred, a0)
    cell = labels.groupby(["mode", "jobs", "split", "co_saturating"], sort=False).ngroup().to_numpy()
    covered = {scale: _covered_at(pred, chosen[scale], scale, w, err, labels).astype(float) for scale in SCALES}
    sets, row_set = np.unique(pred["window_id"].to_numpy(), return_inverse=True)
    rng = np.random.default_rng(seed)
    target = 100 * INTERVAL_COVERAGE
    diffs = np.empty(draws)
    for i in range(draws):
        weight = np.bincount(rng.integers(0, len(sets), len(sets)), minlength=len(sets))[row_set].astype(float)
        rows = np.bincount(cell, weight)
        objective = {}
        for scale in SCALES:
            hit = np.bincount(cell, weight * covered[scale])
            ok = rows > 0
            objective[scale] = (rows[ok] * np.abs(100 * hit[ok] / rows[ok] - target)).sum() / rows[ok].sum()
        diffs[i] = objective["beyond_load"] - objective["beyond_size"]
    return float(diffs.std(ddof=1))


def choose_scale(objective: pd.Series, se: float, incumbent: str) -> str:
    """The hysteresis rule (module doc): the other growth replaces ``incumbent`` only if its objective is lower by
    more than ``se``."""
    other = next(s for s in SCALES if s != incumbent)
    return other if objective[other] < objective[incumbent] - se else incumbent


def choose(cov: pd.DataFrame, a0: float = INTERVAL_SIZE_EXPONENT) -> dict[str, dict[str, dict[str, float]]]:
    """The rule's a per (scale, mode, class) (module doc)."""
    chosen: dict[str, dict[str, dict[str, float]]] = {}
    both = cov[cov["split"] == "both"]
    for (scale, mode, jobs), g in both.groupby(["scale", "mode", "jobs"], sort=False):
        a = closer_by_a_standard_error(g["a"], g["coverage_pct"], int(g["rows"].iloc[0]), a0)
        chosen.setdefault(scale, {}).setdefault(mode, {})["host_bound" if jobs == "host-bound" else "saturating"] = a
    return chosen
