#!/usr/bin/env python3
"""Pair-composed contention (a study): a set's interference on job j built from what each co-runner k does to j alone.

Inside each outer training fold a **pair model** (the shipped ``SlowdownModel`` design, fitted on the fold's measured
pairs only) predicts ŝ_jk for every (target j, co-runner k) of every row: the pair {j, k} described as in the row's
window (both profiles re-timed to their solo times there), j the target. The set model then uses them:

- ``shipped``: the shipped design, for reference (no pair model).
- ``feat_sum_max``: the shipped baseline; the trees also see Σ_k log ŝ_jk and max_k log ŝ_jk.
- ``feat_mean_max``: the same with the mean over co-runners instead of the sum (bounded: it does not grow with the set).
- ``base_prod``: baseline exp(Σ_k log ŝ_jk) (no coefficient); the shipped trees correct it.
- ``base_add``: baseline 1 + Σ_k (ŝ_jk − 1) (floored at 0.5); the shipped trees correct it.
- ``blend_feat``: baseline 1 + α·L + β_full·W·φ + β_small·W·(1 − φ) + c·Σ_k (ŝ_jk − 1), all ≥ 0 by NNLS; the trees also
  see mean_k and max_k log ŝ_jk (bounded in the set size, unlike the sum).

The composed features are monotone increasing in the trees. No label's own fit reaches the trees: a training row of a
measured pair gets ŝ from a **cross-fitted** pair model (``--crossfit-folds`` folds of the training pairs; grouped by
architecture on leave-architecture-out, where the test rows' ŝ come from a pair model that never saw the held-out
architecture: a fold leaves out every pair touching its architectures and predicts the rows whose target is of one of
them; grouped by set on the set-size splits, whose test sets are made of seen jobs); training rows of larger sets and
all test rows get ŝ from the pair model of the whole training fold (it never saw their labels). Leave-architecture-out:
the held-out architecture's rows train neither the pair model nor the set model.

Development figures: cross-validation on the development rows of ``datasets/h100/locked_split.json`` (locked rows
not read), leave-arch, pairs -> triples, pairs and triples -> four-job sets, both modes, mean over ``--seeds`` tree
seeds (pair and set models alike). Locked figures (``--locked``): fitted on the development rows, tested once on
the locked rows (``research.protocol.LOCKED_KINDS``), for the shipped design and the variants named by
``--locked-variants`` (chosen on the development figures).

  PYTHONPATH=. python research/pair_compose_study.py --seeds 2 --locked --locked-variants NAME \\
      --out reports/h100/pair_compose        # ~4 min on 2 cores
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

from colopred.constants import MODES, TREE_PARAMS  # noqa: E402
from colopred.research.dataset import _retimed, load_dataset  # noqa: E402
from colopred.research.evaluation import mape_pct, splits  # noqa: E402
from research.noise import HOST_BOUND_BUSY  # noqa: E402
from colopred.research.protocol import LOCKED_KINDS, is_locked, locked_architectures  # noqa: E402
from colopred.runtime.baseline import baseline_slowdown, baseline_terms, fit_coefs, load_kind  # noqa: E402
from colopred.runtime.estimator import SlowdownModel  # noqa: E402
from colopred.runtime.features import FEATURES, MONOTONE_INCREASING, feature_matrix, model_features, profile_matrix  # noqa: E402

KINDS = tuple(LOCKED_KINDS)  # leave-arch, pairs -> triples, pairs and triples -> four-job sets
VARIANTS = ("shipped", "feat_sum_max", "feat_mean_max", "base_prod", "base_add", "blend_feat")
BASE_FLOOR = 0.5
"""Floor of the additive composed baseline 1 + Σ(ŝ − 1) (pair predictions below 1 could drive it to 0)."""


# ------------------------------------------------------------------------------------------ pair rows
def pair_rows(df: pd.DataFrame, profiles) -> tuple[np.ndarray, np.ndarray]:
    """FEATURES rows of every (row, co-runner) pair {j, k} of ``df``'s rows, j the target, both profiles re-timed to
    their solo times in the row's window; and the index of the ``df`` row each belongs to."""
    cache: dict[tuple[str, float], int] = {}
    profs = []

    def pid(job: str, ms: float) -> int:
        key = (job, float(ms))
        if key not in cache:
            cache[key] = len(profs)
            profs.append(_retimed(profiles[job], ms))
        return cache[key]

    members = df.groupby("window_id", sort=False).apply(lambda g: list(zip(g.index, g["job"], g["solo_ms"])),
                                                       include_groups=False).to_dict()
    idx, owner = [], []
    for _w, mem in members.items():
        for r, j, tj in mem:
            for r2, k, tk in mem:
                if r2 != r:
                    idx.append((pid(j, tj), pid(k, tk)))
                    owner.append(r)
    idx = np.asarray(idx)
    X, set_of, pos_of = feature_matrix(profile_matrix(profs), idx)
    Xt = np.empty((len(idx), len(FEATURES)))
    first = pos_of == 0
    Xt[set_of[first]] = X[first]
    return Xt, np.asarray(owner)


# ------------------------------------------------------------------------------------------ models
class SetModel:
    """s = B · exp(f(x)): B the shipped baseline, a composed one (``prod``, ``add``) or both (``blend``); f XGBoost
    with the shipped settings on the tree features plus ``extra`` composed columns (monotone increasing)."""

    def __init__(self, mode: str, baseline: str, extra: tuple[str, ...], seed: int):
        self.mode, self.baseline, self.extra, self.seed = mode, baseline, extra, seed
        self.cols = [FEATURES.index(f) for f in model_features(mode)]
        self.mono = "(" + ",".join(["1" if f in MONOTONE_INCREASING else "0" for f in model_features(mode)] + ["1"] * len(extra)) + ")"

    def _terms(self, X, C):
        t = baseline_terms(X, load_kind(self.mode))
        return np.column_stack([t, C["sum_excess"]]) if self.baseline == "blend" else t

    def _base(self, X, C):
        if self.baseline == "prod":
            return np.exp(C["sum_log"])
        if self.baseline == "add":
            return np.maximum(1.0 + C["sum_excess"], BASE_FLOOR)
        return baseline_slowdown(self.coefs_, self._terms(X, C))

    def _tree_x(self, X, C):
        return np.column_stack([X[:, self.cols]] + [C[e] for e in self.extra]).astype(np.float32)

    def fit(self, X, C, s):
        import xgboost as xgb

        if self.baseline in ("shipped", "blend"):
            self.coefs_ = fit_coefs(self._terms(X, C), s)
        r = np.log(s) - np.log(self._base(X, C))
        self.trees_ = xgb.XGBRegressor(objective="reg:squarederror", monotone_constraints=self.mono,
                                       **{**TREE_PARAMS, "random_state": self.seed}).fit(self._tree_x(X, C), r)
        return self

    def predict(self, X, C):
        return self._base(X, C) * np.exp(self.trees_.predict(self._tree_x(X, C)))


SPEC = {  # variant -> (baseline, extra tree columns)
    "feat_sum_max": ("shipped", ("sum_log", "max_log")),
    "feat_mean_max": ("shipped", ("mean_log", "max_log")),
    "base_prod": ("prod", ()),
    "base_add": ("add", ()),
    "blend_feat": ("blend", ("mean_log", "max_log")),
}


def pair_model(mode: str, seed: int) -> SlowdownModel:
    return SlowdownModel(mode=mode, params={"random_state": seed}, interval=False, calibrate=False)


def composed(df, X, s, PX, owner, tr, te, mode, seed, group: str, folds: int) -> dict[str, np.ndarray]:
    """Per-row composed columns (sum_log, max_log, mean_log, sum_excess) for the rows ``tr`` and ``te`` of ``df``
    (positions), from pair models fitted on the pairs among ``tr`` (module doc); NaN elsewhere."""
    n_jobs = df["n_jobs"].to_numpy()
    pairs_tr = tr[n_jobs[tr] == 2]
    full = pair_model(mode, seed).fit(X[pairs_tr], s[pairs_tr])
    want = np.isin(owner, np.concatenate([tr, te]))
    log_s = np.full(len(owner), np.nan)
    log_s[want] = np.log(full.predict(PX[want]))
    # cross-fitted predictions for the training pairs' own rows (one pair entry per pair row)
    oof = np.full(len(df), np.nan)
    rng = np.random.default_rng(seed)
    if group == "arch":
        archs = np.array(sorted(df["arch"].iloc[pairs_tr].unique()))
        fold_of = dict(zip(rng.permutation(archs), np.arange(len(archs)) % folds))
        fold_archs = [{a for a, f in fold_of.items() if f == k} for k in range(folds)]
        touches = [df["set_archs"].iloc[pairs_tr].map(lambda a, fa=fa: bool(fa.intersection(a))).to_numpy() for fa in fold_archs]
        target_in = [df["arch"].iloc[pairs_tr].isin(fa).to_numpy() for fa in fold_archs]
        parts = [(~touches[k], target_in[k]) for k in range(folds)]
    else:
        sets = np.array(sorted(df["set"].iloc[pairs_tr].unique()))
        fold_of = dict(zip(rng.permutation(sets), np.arange(len(sets)) % folds))
        f = df["set"].iloc[pairs_tr].map(fold_of).to_numpy()
        parts = [(f != k, f == k) for k in range(folds)]
    for train_mask, pred_mask in parts:
        if not pred_mask.any() or not train_mask.any():
            continue
        m = pair_model(mode, seed).fit(X[pairs_tr[train_mask]], s[pairs_tr[train_mask]])
        rows = pairs_tr[pred_mask]
        oof[rows] = np.log(m.predict(X[rows]))
    is_oof = np.isfinite(oof[owner]) & np.isin(owner, pairs_tr)
    log_s[is_oof] = oof[owner[is_oof]]
    g = pd.DataFrame({"r": owner[want], "l": log_s[want]}).groupby("r")["l"]
    out = {k: np.full(len(df), np.nan) for k in ("sum_log", "max_log", "mean_log", "sum_excess")}
    agg = pd.DataFrame({"sum_log": g.sum(), "max_log": g.max(), "mean_log": g.mean(),
                        "sum_excess": pd.DataFrame({"r": owner[want], "e": np.expm1(log_s[want])}).groupby("r")["e"].sum()})
    for k in out:
        out[k][agg.index.to_numpy()] = agg[k].to_numpy()
    return out


def predict_split(df, X, s, PX, owner, tr, te, mode, seed, group, folds, variants) -> dict[str, np.ndarray]:
    """Each variant's predictions of the rows ``te`` from a fit on the rows ``tr``."""
    out = {}
    if "shipped" in variants:
        out["shipped"] = SlowdownModel(mode=mode, params={"random_state": seed}, interval=False, calibrate=False).fit(X[tr], s[tr]).predict(X[te])
    others = [v for v in variants if v != "shipped"]
    if others:
        C = composed(df, X, s, PX, owner, tr, te, mode, seed, group, folds)
        Ctr = {k: v[tr] for k, v in C.items()}
        Cte = {k: v[te] for k, v in C.items()}
        for v in others:
            base, extra = SPEC[v]
            out[v] = SetModel(mode, base, extra, seed).fit(X[tr], Ctr, s[tr]).predict(X[te], Cte)
    return out


def crossfit_group(kind: str) -> str:
    return "arch" if kind == "leave-arch" else "set"


# ------------------------------------------------------------------------------------------ main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT / "datasets" / "h100"))
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--crossfit-folds", type=int, default=5)
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated variants (development figures)")
    ap.add_argument("--locked", action="store_true", help="also the locked figures of the shipped design and --locked-variants")
    ap.add_argument("--locked-variants", default="", help="variants chosen on the development figures for the locked test")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--out", help="folder for results.csv")
    a = ap.parse_args()
    t_start = time.monotonic()
    variants = [v for v in a.variants.split(",") if v]
    ds = load_dataset(a.data)
    locked = locked_architectures(a.data)
    rows = []
    for mode in a.modes.split(","):
        df = ds.for_mode(mode)
        lk = is_locked(df, locked)
        dev = df[~lk].reset_index(drop=True)
        # development: the locked rows are not read
        X, s = dev[list(FEATURES)].to_numpy(), dev["slowdown"].to_numpy()
        PX, owner = pair_rows(dev, ds.profiles)
        pr = dev["n_jobs"].to_numpy()[owner] == 2
        assert np.allclose(PX[pr], X[owner[pr]], equal_nan=True), "pair rows must reproduce the measured pairs' rows"
        host = dev["t_busy"].lt(HOST_BOUND_BUSY).to_numpy()
        for kind in KINDS:
            t0 = time.monotonic()
            per_seed: dict[str, list[tuple[float, float]]] = {v: [] for v in variants}
            for seed in range(a.seeds):
                p = {v: np.full(len(dev), np.nan) for v in variants}
                for _, tr, te in splits(dev, kind):
                    for v, pv in predict_split(dev, X, s, PX, owner, tr, te, mode, seed, crossfit_group(kind),
                                               a.crossfit_folds, variants).items():
                        p[v][te] = pv
                for v in variants:
                    ok = ~np.isnan(p[v])
                    per_seed[v].append((mape_pct(s, p[v]), mape_pct(s[host & ok], p[v][host & ok])))
            for v in variants:
                m = np.array(per_seed[v])
                rows.append({"mode": mode, "figure": "development CV", "split": kind, "variant": v,
                             "mape_pct": m[:, 0].mean(), "mape_seed_min": m[:, 0].min(), "mape_seed_max": m[:, 0].max(),
                             "host_bound_mape_pct": m[:, 1].mean(), "n_rows": int(np.isfinite(p[v]).sum()), "seeds": a.seeds})
                print({k: (round(x, 3) if isinstance(x, float) else x) for k, x in rows[-1].items()}, flush=True)
            print(f"  {mode} {kind}: {time.monotonic() - t0:.0f} s", flush=True)
        if not a.locked:
            continue
        # locked: fitted on the development rows, tested once on the locked rows
        lvars = ["shipped"] + [v for v in a.locked_variants.split(",") if v and v != "shipped"]
        X, s = df[list(FEATURES)].to_numpy(), df["slowdown"].to_numpy()
        PX, owner = pair_rows(df, ds.profiles)
        host = df["t_busy"].lt(HOST_BOUND_BUSY).to_numpy()
        n_jobs = df["n_jobs"].to_numpy()
        for kind, (train_size, test_size) in LOCKED_KINDS.items():
            tr = np.flatnonzero(~lk & train_size(n_jobs))
            te = np.flatnonzero(lk & test_size(n_jobs))
            res = {v: [] for v in lvars}
            for seed in range(a.seeds):
                for v, pv in predict_split(df, X, s, PX, owner, tr, te, mode, seed, crossfit_group(kind),
                                           a.crossfit_folds, lvars).items():
                    res[v].append((mape_pct(s[te], pv), mape_pct(s[te][host[te]], pv[host[te]])))
            for v in lvars:
                m = np.array(res[v])
                rows.append({"mode": mode, "figure": "locked", "split": kind, "variant": v,
                             "mape_pct": m[:, 0].mean(), "mape_seed_min": m[:, 0].min(), "mape_seed_max": m[:, 0].max(),
                             "host_bound_mape_pct": m[:, 1].mean(), "n_rows": len(te), "seeds": a.seeds})
                print({k: (round(x, 3) if isinstance(x, float) else x) for k, x in rows[-1].items()}, flush=True)
    out = pd.DataFrame(rows)
    print(out.pivot_table(index=["mode", "figure", "variant"], columns="split", values="mape_pct", sort=False).round(2).to_string())
    print(f"total {time.monotonic() - t_start:.0f} s")
    if a.out:
        Path(a.out).mkdir(parents=True, exist_ok=True)
        out.round(4).to_csv(Path(a.out) / "results.csv", index=False)


if __name__ == "__main__":
    main()
