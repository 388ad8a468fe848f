"""The honest protocol: figures on a locked split beside the development figures, and each split's noise floor.

``datasets/h100/locked_split.json`` (``research/lock_split.py``) names architectures drawn by a seeded rule before the
interval calibration was chosen. Development rows are those of sets without a locked architecture; locked rows are the
others. Every choice made after the lock is made on development rows only (``colopred.constants`` says which).

- Development figure: :func:`evaluation.evaluate_mode` on the development rows alone (the cross-validation the choices
  were made on).
- Locked figure: a model fitted on development rows predicts the locked rows, once: ``leave-arch`` every row of the
  locked sets by a model that never saw its job's architecture (as ``evaluation.splits`` tests): a locked job's
  from all development rows, a development job's beside a locked co-runner from the development sets without its
  architecture; ``pairs->triples`` locked triples from development pairs; ``pairs+triples->quads``
  locked four-job sets from development pairs and triples.
- Noise floor (:func:`noise_floor`): the MAPE of predicting each measured slowdown by the mean of the other
  measurements of the same job in the same set (same mode), over the split's test rows that were measured more than
  once: the error a model that knew the set's other repeats would make.
- Pays-off ceiling (:func:`pays_off_repeats`): how often the mean throughput of a set's other measurements agrees with
  one measurement on whether the set pays off (throughput > 1), over the split's test sets measured more than once,
  beside colopred's agreement on the same measurements: sets near break-even (two saturating jobs time-sliced) flip
  from one window to the next, so no predictor agrees with every window.
- Coverage spread (:func:`coverage_spread`): how far the interval coverage of as few architectures as the locked split
  holds strays by chance, from the development figure's rows: the standard deviation of the coverage over the rows of
  ``len(locked)`` target architectures drawn from the development ones. An unseen job's error is mostly its own bias,
  shared by all its rows, so a coverage over five architectures moves by several points with the draw.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from ..errors import InputError
from ..runtime.features import FEATURES
from .baselines import ContentionBaseline, LinearBaseline
from .dataset import Dataset
from .evaluation import SPLITS, covered, evaluate_mode, job_fit_args, metrics, new_model

LOCKED_SPLIT_FILE = "locked_split.json"
LOCKED_KINDS = {
    "leave-arch": (lambda n: n >= 2, lambda n: n >= 2),
    "pairs->triples": (lambda n: n == 2, lambda n: n == 3),
    "pairs+triples->quads": (lambda n: (n == 2) | (n == 3), lambda n: n == 4),
}
"""Locked figure of each kind of split: (training rows' set sizes, test rows' set sizes)."""
SPREAD_DRAWS = 2000
"""Draws of architectures behind :func:`coverage_spread`: its standard deviation then moves by ~1.6% of itself
(1/√(2·draws)) from one seed to another."""
SPREAD_SEED = 23
"""Seed of :func:`coverage_spread`'s draws (the locked split's)."""


def locked_architectures(root: str | Path) -> list[str]:
    """The locked architectures of ``root/locked_split.json``."""
    path = Path(root) / LOCKED_SPLIT_FILE
    try:
        doc = json.loads(path.read_text())
        locked = doc["locked"]
    except FileNotFoundError:
        raise InputError(path, "no locked split (research/lock_split.py draws one)") from None
    except (ValueError, KeyError, TypeError):
        raise InputError(path, "not a locked split (expected a JSON object with a 'locked' list)") from None
    if not isinstance(locked, list) or not all(isinstance(a, str) for a in locked):
        raise InputError(path, "'locked' must be a list of architecture names")
    return locked


def is_locked(df: pd.DataFrame, locked: list[str]) -> np.ndarray:
    """Rows of a set holding a locked architecture."""
    lock = set(locked)
    return df["set_archs"].map(lambda a: bool(lock.intersection(a))).to_numpy()


def noise_floor(df: pd.DataFrame) -> pd.Series:
    """Per row: |mean of the other measurements of the same (set, instance)| − its own| / its own; NaN for a row measured
    once. A copy of a job (``JOB#2``) is compared with the same copy of its set in the other windows, not with the
    other copies of its own window."""
    g = df.groupby(["set", "instance"])["slowdown"]
    total, count = g.transform("sum"), g.transform("count")
    others = (total - df["slowdown"]) / (count - 1).where(count > 1)
    return (others - df["slowdown"]).abs() / df["slowdown"]


def hits_by_arch(preds: pd.DataFrame, lo: str = "lo", hi: str = "hi") -> tuple[np.ndarray, np.ndarray]:
    """(rows inside their interval, rows) of each architecture of ``preds`` (columns ``arch``, ``slowdown``, ``lo``,
    ``hi``), in ``pd.factorize`` order: what a coverage over a draw of architectures sums."""
    inside = covered(preds["slowdown"], preds[lo], preds[hi]).to_numpy()
    codes, archs = pd.factorize(preds["arch"])
    return (np.bincount(codes, weights=inside, minlength=len(archs)),
            np.bincount(codes, minlength=len(archs)).astype(float))


def coverage_spread(preds: pd.DataFrame, n_archs: int, draws: int = SPREAD_DRAWS, seed: int = SPREAD_SEED) -> float:
    """Standard deviation (points) of the interval coverage over the rows of ``n_archs`` target architectures drawn
    without replacement, ``draws`` times, from those of ``preds`` (one split's predictions: ``arch``, ``slowdown``,
    ``lo``, ``hi``); NaN with fewer than ``n_archs`` + 1 architectures."""
    hits, rows = hits_by_arch(preds.dropna(subset=["lo", "hi"]))
    if n_archs < 1 or len(rows) <= n_archs:
        return float("nan")
    rng = np.random.default_rng(seed)
    pick = np.argsort(rng.random((draws, len(rows))), axis=1)[:, :n_archs]
    return float(np.std(100 * hits[pick].sum(axis=1) / rows[pick].sum(axis=1)))


def _window_agreement(df: pd.DataFrame) -> pd.Series:
    """:func:`pays_off_repeats` per window (indexed by ``window_id``)."""
    w = df.groupby("window_id", sort=False)[["set", "throughput"]].first()
    g = w.groupby("set")["throughput"]
    count = g.transform("count")
    others = (g.transform("sum") - w["throughput"]) / (count - 1).where(count > 1)
    return ((others > 1) == (w["throughput"] > 1)).astype(float).where(others.notna())


def pays_off_repeats(df: pd.DataFrame) -> pd.Series:
    """Per row: 1 where the mean throughput of the other measurements of its set (one mode's rows) agrees with its
    window's on whether the set pays off (throughput > 1), 0 where not, NaN for a set measured once."""
    return df["window_id"].map(_window_agreement(df))


def protocol_table(ds: Dataset, locked: list[str], modes=("timeslice", "mps"),
                   log: Callable[[str], None] = lambda s: None) -> pd.DataFrame:
    """Development, locked and noise-floor figures of every mode and kind of split (module doc)."""
    rows = []
    for mode in modes:
        df = ds.for_mode(mode)
        if df.empty:
            continue
        lk = is_locked(df, locked)
        dev = df[~lk].reset_index(drop=True)
        floor = noise_floor(df).to_numpy()  # a set's repeats are all locked or all development
        agree = _window_agreement(df)  # per window; likewise all locked or all development
        log(f"  {mode}: development cross-validation ({dev['window_id'].nunique()} sets)")
        t, preds = evaluate_mode(dev, log=log, source=ds.profile_source, baselines=False, timeline=ds.timeline)
        for r in t.to_dict("records"):
            p = preds.loc[preds["split"] == r["split"]]
            rows.append({"mode": mode, "split": r["split"], "figure": "development (CV, development architectures)",
                         **{k: r[k] for k in ("slowdown_mape_pct", "interval_coverage_pct", "delta_mae", "pays_off_agreement_pct", "n_sets")},
                         "coverage_sd_at_locked_size_pct": coverage_spread(p, len(locked)),
                         **_on_repeats(p["slowdown"].to_numpy(), p["pred"].to_numpy(), _dev_floor(dev, p)),
                         **_pays_off_on_repeats(p, p["window_id"].map(agree).to_numpy())})
        X, s = df[list(FEATURES)].to_numpy(), df["slowdown"].to_numpy()
        for kind, te, folds in locked_tests(df, locked):
            pred, iv = np.empty(len(te)), np.empty((len(te), 2))
            base = {"contention baseline MAPE %": np.empty(len(te)), "ridge MAPE %": np.empty(len(te))}
            for pos, fit_rows in folds:
                m = new_model(mode, ds.profile_source, ds.timeline).fit(X[fit_rows], s[fit_rows], groups=df["arch"].to_numpy()[fit_rows],
                                                                        **job_fit_args(df.iloc[fit_rows]))
                pred[pos], iv[pos] = m.predict_with_interval(X[te[pos]], jobs=df["job"].to_numpy()[te[pos]])
                base["contention baseline MAPE %"][pos] = ContentionBaseline(m.load_).fit(X[fit_rows], s[fit_rows]).predict(X[te[pos]])
                base["ridge MAPE %"][pos] = LinearBaseline().fit(X[fit_rows], s[fit_rows]).predict(X[te[pos]])
            sub = df.iloc[te]
            met = metrics(sub, pred, iv)
            rows.append({"mode": mode, "split": kind, "figure": "locked (fitted on development, tested on locked sets)",
                         **{k: met[k] for k in ("slowdown_mape_pct", "interval_coverage_pct", "delta_mae", "pays_off_agreement_pct", "n_sets")},
                         **{k: float(np.mean(np.abs(p - s[te]) / s[te]) * 100) for k, p in base.items()},
                         **_on_repeats(s[te], pred, floor[te]),
                         **_pays_off_on_repeats(sub.assign(pred=pred), sub["window_id"].map(agree).to_numpy())})
    out = pd.DataFrame(rows)
    order = {k: i for i, k in enumerate(SPLITS)}
    return out.sort_values(["mode", "split", "figure"], key=lambda c: c.map(order) if c.name == "split" else c,
                           kind="stable").reset_index(drop=True)


def locked_tests(df: pd.DataFrame, locked: list[str]):
    """Yield (kind, test rows, folds) of each locked figure of ``df`` (one mode's rows; :data:`LOCKED_KINDS`): the
    locked rows of the kind's test sizes, and :func:`locked_folds` of them from the development rows of its training
    sizes. A kind with nothing to train on or test is left out."""
    lk, n_jobs = is_locked(df, locked), df["n_jobs"].to_numpy()
    for kind, (train_size, test_size) in LOCKED_KINDS.items():
        tr, te = np.flatnonzero(~lk & train_size(n_jobs)), np.flatnonzero(lk & test_size(n_jobs))
        if len(tr) and len(te):
            yield kind, te, locked_folds(df, kind, locked, tr, te)


def locked_folds(df: pd.DataFrame, kind: str, locked: list[str], tr: np.ndarray, te: np.ndarray):
    """Yield (positions in ``te``, training rows) of a locked figure: all of ``te`` from ``tr``, but on leave-arch each
    development job's rows (beside a locked co-runner) from the rows of ``tr`` whose set does not hold its
    architecture, so that no test row's job was seen."""
    if kind != "leave-arch":
        yield np.arange(len(te)), tr
        return
    arch = df["arch"].to_numpy()[te]
    on_locked = np.isin(arch, locked)
    if on_locked.any():
        yield np.flatnonzero(on_locked), tr
    set_archs = df["set_archs"].to_numpy()
    for a in sorted(set(arch[~on_locked])):
        yield np.flatnonzero(arch == a), tr[[a not in set_archs[i] for i in tr]]


def _dev_floor(dev: pd.DataFrame, preds: pd.DataFrame) -> np.ndarray:
    """:func:`noise_floor` of the development rows a split's predictions cover (``preds`` keeps ``window_id`` and ``job``)."""
    f = dev.assign(floor=noise_floor(dev)).set_index(["window_id", "instance"])["floor"]
    return f.reindex(pd.MultiIndex.from_frame(preds[["window_id", "instance"]])).to_numpy()


def _pays_off_on_repeats(rows: pd.DataFrame, agree: np.ndarray) -> dict[str, float]:
    """The pays-off ceiling (:func:`pays_off_repeats` of each row, ``agree``) and colopred's pays-off agreement on the
    same windows (``rows``: window_id, throughput measured, pred of each job), over the windows of sets measured more
    than once."""
    w = rows.assign(agree=agree, inv=1.0 / rows["pred"].to_numpy()).groupby("window_id").agg(
        agree=("agree", "first"), throughput=("throughput", "first"), throughput_pred=("inv", "sum"))
    w = w[w["agree"].notna()]
    if w.empty:
        return {"pays_off_ceiling_pct": float("nan"), "colopred_pays_off_on_repeated_pct": float("nan")}
    return {"pays_off_ceiling_pct": float(w["agree"].mean() * 100),
            "colopred_pays_off_on_repeated_pct": float(np.mean((w["throughput_pred"] > 1) == (w["throughput"] > 1)) * 100)}


def _on_repeats(measured: np.ndarray, pred: np.ndarray, floor: np.ndarray) -> dict[str, float]:
    """The noise floor and colopred's MAPE on the same rows (those measured more than once), and their share."""
    rep = np.isfinite(floor)
    if not rep.any():
        return {"rows_repeated_pct": 0.0, "noise_floor_mape_pct": float("nan"), "colopred_mape_on_repeated_pct": float("nan")}
    return {"rows_repeated_pct": float(rep.mean() * 100), "noise_floor_mape_pct": float(floor[rep].mean() * 100),
            "colopred_mape_on_repeated_pct": float(np.mean(np.abs(pred[rep] - measured[rep]) / measured[rep]) * 100)}
