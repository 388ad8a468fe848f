"""Evaluation of the slowdown model against baselines, on three kinds of split, per mode.

Splits (all grouped so that a set's repeated measurements never straddle train/test):
  random       5-fold cross-validation over sets
  leave-arch   each architecture held out in turn: train = sets without it, test = its jobs' rows in the sets
               containing it (the job predicted is never seen, its co-runners may be; each row is tested once)
  pairs->triples  train on 2-job sets, test on 3-job sets
  pairs+triples->quads  train on sets of 2 and 3 jobs, test on 4-job sets

Metrics: MAPE of per-job slowdown; MAE of δ; agreement on whether a set pays off
(normalised throughput > 1); Spearman rank correlation, per job, of its partners ordered
by slowdown (pairs only); coverage of the 90% interval (quantile model widened by
split-conformal calibration inside each training fold, its inner folds grouped by the
target job's architecture so that the width reflects jobs the model has not seen).
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from ..constants import (HOST_BOUND_BUSY, INTERVAL_SCALE_OF_SOURCE, INTERVAL_SIZE_EXPONENTS, INTERVAL_SLOWDOWN_EXPONENTS,
                         INTERVAL_UNSEEN_WIDTHS, JOB_OFFSET_WEIGHT)
from ..measurement.harness.reader import machine_key
from ..runtime import outcome
from ..runtime.baseline import load_kind
from ..runtime.estimator import SlowdownModel
from ..runtime.features import FEATURES
from ..runtime.sources import model_features_for
from .baselines import FIXED_BASELINES, ContentionBaseline, LinearBaseline
from .dataset import Dataset


# -------------------------------------------------------------------- metrics
def set_level(df: pd.DataFrame, pred: np.ndarray) -> pd.DataFrame:
    """δ and throughput per window (index: window_id, sorted), measured and predicted from the per-job
    slowdowns (:mod:`colopred.runtime.outcome`)."""
    codes, windows = pd.factorize(df["window_id"], sort=True)
    pos = df.groupby(codes).cumcount().to_numpy()
    solo = np.full((len(windows), int(pos.max()) + 1 if len(pos) else 1), np.nan)
    slow = solo.copy()
    solo[codes, pos] = df["solo_ms"].to_numpy(float)
    slow[codes, pos] = pred
    first = df[["n_jobs", "delta", "throughput"]].groupby(codes).first()
    return pd.DataFrame({
        "n_jobs": first["n_jobs"].to_numpy(),
        "delta": first["delta"].to_numpy(),
        "throughput": first["throughput"].to_numpy(),
        "delta_pred": outcome.delta(solo, solo * slow),
        "throughput_pred": outcome.normalised_throughput(slow),
    }, index=pd.Index(windows, name="window_id"))


def partner_rank_corr(df: pd.DataFrame, pred: np.ndarray) -> float:
    """Mean over jobs of Spearman correlation between measured and predicted slowdown across its partners (pairs)."""
    d = df.assign(pred=pred)
    d = d[d["n_jobs"] == 2]
    d = d.groupby(["job", "set"], as_index=False)[["slowdown", "pred"]].mean()
    cors = []
    for _, g in d.groupby("job"):
        if len(g) >= 3 and g["slowdown"].nunique() > 1 and g["pred"].nunique() > 1:
            cors.append(g["slowdown"].rank().corr(g["pred"].rank()))
    return float(np.mean(cors)) if cors else float("nan")


def covered(slowdown, lo, hi):
    """Whether each measured slowdown lies in its interval, lo ≤ slowdown ≤ hi (arrays or Series alike): the one
    definition every coverage figure counts."""
    return (slowdown >= lo) & (slowdown <= hi)


def metrics(df: pd.DataFrame, pred: np.ndarray, interval: np.ndarray | None = None) -> dict[str, float]:
    s = df["slowdown"].to_numpy()
    sl = set_level(df, pred)
    m = {
        "n_rows": len(df),
        "n_sets": len(sl),
        "slowdown_mape_pct": mape_pct(s, pred),
        "delta_mae": float(np.mean(np.abs(sl["delta_pred"] - sl["delta"]))),
        "pays_off_agreement_pct": float(np.mean((sl["throughput_pred"] > 1) == (sl["throughput"] > 1)) * 100),
        "partner_rank_corr": partner_rank_corr(df, pred),
    }
    if interval is not None:
        m["interval_coverage_pct"] = float(np.mean(covered(s, interval[:, 0], interval[:, 1])) * 100)
    return m


JOB_CLASSES = {"all jobs": None, "saturating": False, "host-bound": True}
"""The rows :func:`coverage_by_class` reports: every row, then each class of target job (host-bound: busy fraction
below ``constants.HOST_BOUND_BUSY``, the interval's own classes)."""


def coverage_by_class(pred: pd.DataFrame) -> pd.DataFrame:
    """Coverage % of the interval ``lo``–``hi`` of :func:`evaluate_mode`'s predictions, per ``mode`` (where the table
    has one), split and :data:`JOB_CLASSES` class, with the number of rows."""
    inside = covered(pred["slowdown"], pred["lo"], pred["hi"])
    host_bound = pred["t_busy"] < HOST_BOUND_BUSY
    keys = [k for k in ("mode", "split") if k in pred.columns]
    rows = []
    for key, idx in pred.groupby(keys, sort=False).groups.items():
        key = key if isinstance(key, tuple) else (key,)
        for label, hb in JOB_CLASSES.items():
            sel = inside.loc[idx] if hb is None else inside.loc[idx][host_bound.loc[idx] == hb]
            rows.append({**dict(zip(keys, key)), "jobs": label, "rows": len(sel),
                         "coverage_pct": 100 * float(sel.mean()) if len(sel) else float("nan")})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------- splits
def splits(df: pd.DataFrame, kind: str, seed: int = 0):
    """Yield (name, train index, test index)."""
    if kind == "random":
        sets = np.array(sorted(df["set"].unique()))
        rng = np.random.default_rng(seed)
        rng.shuffle(sets)
        for i, fold in enumerate(np.array_split(sets, 5)):
            test = df["set"].isin(fold).to_numpy()
            yield f"fold{i}", np.flatnonzero(~test), np.flatnonzero(test)
    else:
        for name, tr, te in paired_splits(df, df, kind):
            yield name, np.flatnonzero(tr), np.flatnonzero(te)


SPLITS = ("random", "leave-arch", "pairs->triples", "pairs+triples->quads")
SPLIT_NEEDS = {"random": "sets to train on beside each test fold", "leave-arch": "two architectures or more",
               "pairs->triples": "both pairs and triples", "pairs+triples->quads": "four-job sets and smaller sets"}
"""What a split needs to test any row (``evaluate_mode`` skips one without, saying so; the report lists it)."""


def new_model(mode: str | None, source: str = "ncu", timeline: bool = True, **kw) -> SlowdownModel:
    """An unfitted SlowdownModel of ``mode`` for ``source`` profiles (``ncu``, or ``nvml``: GPM profiles, whose
    trees see only the features a GPM profile gives, with or without its ``timeline`` fields:
    ``runtime.sources.gpm_model_features``), its interval widening beyond the trained sets that of ``source``
    (``constants.INTERVAL_SCALE_OF_SOURCE``, ``constants.INTERVAL_SIZE_EXPONENTS``) and its per-row slowdown scale
    (``constants.INTERVAL_SLOWDOWN_EXPONENTS``) and the weight of its training jobs' offsets
    (``constants.JOB_OFFSET_WEIGHT``) and the width of an unseen job in a larger set (``constants.INTERVAL_UNSEEN_WIDTHS``),
    unless ``kw`` sets ``interval_scale``, ``size_exponents``, ``job_offset_weight``, ``slowdown_exponents`` or
    ``unseen_widths``."""
    if "interval_scale" not in kw and source in INTERVAL_SCALE_OF_SOURCE:
        kw["interval_scale"] = INTERVAL_SCALE_OF_SOURCE[source]
    if "size_exponents" not in kw and mode in INTERVAL_SIZE_EXPONENTS.get(source, {}):
        kw["size_exponents"] = INTERVAL_SIZE_EXPONENTS[source][mode]
    if "slowdown_exponents" not in kw and mode in INTERVAL_SLOWDOWN_EXPONENTS.get(source, {}):
        kw["slowdown_exponents"] = INTERVAL_SLOWDOWN_EXPONENTS[source][mode]
    if "unseen_widths" not in kw and mode in INTERVAL_UNSEEN_WIDTHS.get(source, {}):
        kw["unseen_widths"] = INTERVAL_UNSEEN_WIDTHS[source][mode]
    if "job_offset_weight" not in kw and mode in JOB_OFFSET_WEIGHT.get(source, {}):
        kw["job_offset_weight"] = JOB_OFFSET_WEIGHT[source][mode]
    return SlowdownModel(mode=mode, features=model_features_for(mode, source, timeline), **kw)


def out_of_sample(df: pd.DataFrame, kind: str, params: dict | None = None, source: str = "ncu", timeline: bool = True,
                  model_kw: dict | None = None) -> np.ndarray:
    """colopred's out-of-sample point predictions of one mode's rows on one kind of split (NaN for
    rows no split tests). For experiments: no intervals, no baselines; ``model_kw``: more SlowdownModel parameters."""
    fit_predict = point_predictor(df["mode"].iloc[0] if len(df) else None, params, source, timeline, model_kw)
    pred = np.full(len(df), np.nan)
    for _, tr, te in splits(df, kind):
        if len(tr) == 0 or len(te) == 0:
            continue
        pred[te] = fit_predict(df.iloc[tr], df.iloc[te])
    return pred


def paired_splits(train: pd.DataFrame, test: pd.DataFrame, kind: str):
    """Yield (name, train mask, test mask) of one kind of split, other than ``random``, over two tables at once: a
    training table and a table of rows to test (the same table for :func:`splits`; or, e.g., the same sets with other
    labels). Folds with nothing to train on or test are not yielded."""
    if kind == "leave-arch":  # test rows: the held-out architecture's jobs, so that each row is tested once, unseen
        folds = ((arch, ~train["set_archs"].map(lambda a: arch in a).to_numpy(), (test["arch"] == arch).to_numpy())
                 for arch in sorted(test["arch"].unique()))
    elif kind == "pairs->triples":
        folds = iter([(kind, (train["n_jobs"] == 2).to_numpy(), (test["n_jobs"] == 3).to_numpy())])
    elif kind == "pairs+triples->quads":
        folds = iter([(kind, (train["n_jobs"] <= 3).to_numpy(), (test["n_jobs"] == 4).to_numpy())])
    else:
        raise ValueError(kind)
    for name, tr, te in folds:
        if tr.any() and te.any():
            yield name, tr, te


def point_predictor(mode: str | None, params: dict | None = None, source: str = "ncu", timeline: bool = True,
                    model_kw: dict | None = None) -> Callable[[pd.DataFrame, pd.DataFrame], np.ndarray]:
    """A ``fit_predict(training rows, test rows)`` for :func:`machine_guarded`: colopred's point model of ``mode``
    (:func:`new_model`, no interval; ``model_kw`` more SlowdownModel parameters) fitted on the training rows' FEATURES
    and slowdowns, predicting the test rows."""
    def fit_predict(train: pd.DataFrame, test: pd.DataFrame) -> np.ndarray:
        m = new_model(mode, source, timeline, params=params, interval=False, calibrate=False, **(model_kw or {}))
        m.fit(train[list(FEATURES)].to_numpy(), train["slowdown"].to_numpy(), **job_fit_args(train))
        return m.predict(test[list(FEATURES)].to_numpy(), jobs=test["job"].to_numpy())

    return fit_predict


def machine_guarded(train: pd.DataFrame, test: pd.DataFrame, kind: str,
                    fit_predict: Callable[[pd.DataFrame, pd.DataFrame], np.ndarray]) -> np.ndarray:
    """Out-of-sample predictions of ``test`` on ``kind`` of split (:func:`paired_splits`) by ``fit_predict(training
    rows, test rows)``, where the rows of each test machine are predicted by a model fitted without any row of that
    machine (``reader.machine_key``: GPU UUID, else campaign and segment): the figure of a GPU the model never saw, as
    on a user's own machine. NaN for rows no split tests."""
    pred = np.full(len(test), np.nan)
    train_gpu, test_gpu = machine_key(train).to_numpy(), machine_key(test).to_numpy()
    for _, tr, te in paired_splits(train, test, kind):
        for gpu in np.unique(test_gpu[te]):
            on = te & (test_gpu == gpu)
            keep = tr & (train_gpu != gpu)
            if keep.any():
                pred[on] = fit_predict(train[keep], test[on])
    return pred


def mape_pct(measured: np.ndarray, pred: np.ndarray) -> float:
    """Mean absolute percentage error over the rows with a prediction."""
    ok = ~np.isnan(pred)
    return float(np.mean(np.abs(pred[ok] - measured[ok]) / measured[ok]) * 100)


def job_fit_args(train: pd.DataFrame) -> dict[str, np.ndarray]:
    """``SlowdownModel.fit``'s job arguments for training rows: each row's target job, and its architecture as the
    group of the job offsets' folds (an offset is what models that never saw the job's architecture miss)."""
    return {"jobs": train["job"].to_numpy(), "job_groups": train["arch"].to_numpy()}


def calibration_groups(df: pd.DataFrame, kind: str) -> np.ndarray:
    """The groups of the conformal calibration's inner folds (``SlowdownModel.fit``'s ``groups``) on a ``kind`` of
    split, so that calibration residuals come from predictions of the kind the split tests: sets (``random``: its test
    sets are unseen sets of seen architectures), else architectures (unseen architectures, and the shipped models)."""
    return df["set"].to_numpy() if kind == "random" else df["arch"].to_numpy()


def evaluate_mode(df: pd.DataFrame, params: dict | None = None, log: Callable[[str], None] = lambda s: None,
                  source: str = "ncu", kinds: Sequence[str] = SPLITS, model_kw: dict | None = None, timeline: bool = True,
                  baselines: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Out-of-sample predictions of every method on each of ``kinds`` of split (rows of one mode, built from
    ``source`` profiles, GPM ones with or without their ``timeline`` fields; ``model_kw``: more SlowdownModel
    parameters; without ``baselines`` colopred alone). Returns (metrics table, predictions). ``log`` gets one line per split."""
    mode = df["mode"].iloc[0] if len(df) else None
    X = df[list(FEATURES)].to_numpy()
    s = df["slowdown"].to_numpy()
    jobs = df["job"].to_numpy()
    rows, preds = [], []
    for kind in kinds:
        t0 = time.monotonic()
        folds = 0
        pred_all: dict[str, np.ndarray] = {}
        iv_all = np.full((len(df), 2), np.nan)
        tested = np.zeros(len(df), bool)
        for _, tr, te in splits(df, kind):
            if len(tr) == 0 or len(te) == 0:  # a split that leaves nothing to train on or test (a tiny dataset)
                continue
            m = new_model(mode, source, timeline, params=params, **(model_kw or {})).fit(
                X[tr], s[tr], groups=calibration_groups(df, kind)[tr], **job_fit_args(df.iloc[tr]))
            pred_all.setdefault("colopred (XGBoost)", np.full(len(df), np.nan))[te], iv_all[te] = m.predict_with_interval(
                X[te], jobs=jobs[te])
            tested[te] = True
            folds += 1
            if not baselines:
                continue
            for name, p in (("linear (ridge)", LinearBaseline().fit(X[tr], s[tr]).predict(X[te])),
                            ("contention baseline (fitted)", ContentionBaseline(load_kind(mode)).fit(X[tr], s[tr]).predict(X[te]))):
                pred_all.setdefault(name, np.full(len(df), np.nan))[te] = p
            for name, f in FIXED_BASELINES.items():
                pred_all.setdefault(name, np.full(len(df), np.nan))[te] = f(df.iloc[te])
        if not tested.any():  # e.g. pairs->triples of a dataset of pairs: no row to test
            log(f"  {mode} {kind}: skipped, no rows to test (it needs {SPLIT_NEEDS[kind]})")
            continue
        log(f"  {mode} {kind}: {folds} fold(s), {time.monotonic() - t0:.0f} s")
        sub = df[tested]
        for name, p in pred_all.items():
            met = metrics(sub, p[tested], iv_all[tested] if name.startswith("colopred") else None)
            rows.append({"split": kind, "method": name, **met})
        preds.append(sub.assign(split=kind, pred=pred_all["colopred (XGBoost)"][tested],
                                lo=iv_all[tested, 0], hi=iv_all[tested, 1]))
    return pd.DataFrame(rows), pd.concat(preds, ignore_index=True) if preds else pd.DataFrame()


def solo_time_sensitivity(ds: Dataset, modes=("timeslice", "mps"), table: pd.DataFrame | None = None) -> pd.DataFrame:
    """colopred's leave-architecture-out and pairs->triples MAPE with the jobs described by their
    profiles re-timed to each window's solo baseline (``ds``, as trained) and by the profiles' own
    iteration times (``Dataset.with_profile_times``): how much a profile timed on another machine
    costs. ``table``: :func:`.report.evaluate`'s metrics of ``ds`` (with a ``mode`` column), whose colopred
    figures are the re-timed ones (the same point models), so they are not fitted again."""
    def mape(d: Dataset, mode: str, kind: str) -> float:
        """The MAPE of ``kind`` (NaN where the split tests no row: a dataset of pairs has no pairs->triples)."""
        if d is ds and table is not None:
            t = table[(table["mode"] == mode) & (table["split"] == kind) & table["method"].str.startswith("colopred")]
            return float(t["slowdown_mape_pct"].iloc[0]) if len(t) else float("nan")
        df = d.for_mode(mode)
        pred = out_of_sample(df, kind, source=d.profile_source, timeline=d.timeline)
        return mape_pct(df["slowdown"].to_numpy(), pred) if np.isfinite(pred).any() else float("nan")

    rows = []
    for label, d in (("re-timed to the window's solo baseline", ds), ("profile's own iteration time", ds.with_profile_times())):
        for mode in modes:
            if d.for_mode(mode).empty:
                continue
            rows.append({"mode": mode, "solo time of each job": label,
                         **{f"{kind} MAPE %": mape(d, mode, kind) for kind in ("leave-arch", "pairs->triples")}})
    out = pd.DataFrame(rows)
    return out.sort_values("mode", kind="stable").reset_index(drop=True) if len(out) else out

