#!/usr/bin/env python3
"""Load-dependent MPS wait terms (a study): does a queueing-shaped wait fix MPS pairs -> triples on the development rows?

The shipped MPS baseline (``colopred.runtime.baseline``) has the wait load

  W = K_j / t_j · g_j · Σ_{k≠j} u_k,   u_k = busy_k · w_k,   g_j = min(1, busy_j)^WAIT_BUSY_GATE_EXPONENT

linear in the co-runners' Σ busy_k · w_k. Host-bound jobs are super-additive under MPS (``reports/h100/additivity``):
their slowdown in a triple exceeds the sum of their pair excesses, the more so the busier the co-runners. Each variant
here multiplies co-runner k's wait u_k by a factor q_k ≥ 1 that a physical argument fixes, then everything else is the
shipped design (terms W·φ_j and W·(1 − φ_j) beside L, coefficients by NNLS, the shipped trees on log(s / s_base)):

- ``shipped``: q_k = 1 + λ · G_j · Σ_{l≠j,k} busy_l (λ = ``MPS_WAIT_CROSS_SCALE``: ``stretch`` without the fill;
  G_j the gate ``baseline.CROSS_GATES[MPS_WAIT_CROSS_GATE]``, 1 − busy_j·φ_j with φ_j the target's per-launch SM fill,
  since 2026-11-26; it was 1 − busy_j, weighted as ``mg1_idle``, from 2026-11-25). It was q_k = 1 when the figures
  of ``reports/h100/mps_queueing`` were measured, and every variant below was compared with that.
- ``mg1_fill``: q_k = 1 + ρ, ρ = Σ_{k'≠j} busy_k' · fill_k' (the co-runners' GPU demand, whole GPUs; fill = SM fill).
  The M/G/1 (Pollaczek-Khinchine) wait is ρ · residual / (1 − ρ); W is its numerator, and 1 + ρ is the factor's
  first order, the only one that stays finite past saturation (ρ ≥ 1 in most triples). No constant.
- ``mg1_busy``: the same with ρ = Σ_{k'≠j} busy_k' (no fill).
- ``mg1_idle``: q_k = 1 + (1 − busy_j) · ρ (ρ of ``mg1_fill``). A launch of j that follows its own previous kernel
  (a share busy_j of them, back to back in its stream) shares the GPU with the co-runners as a processor-sharing
  participant (the pair-additive L and W); one the host issues into an idle stream (a share 1 − busy_j) arrives as
  an M/G/1 customer and waits behind the co-runners' backlog, the factor 1 + ρ of ``mg1_fill``. Saturating targets
  keep q ≈ 1. No constant.
- ``stretch``: q_k = 1 + Σ_{l≠j,k} busy_l · fill_l. Co-runner k's kernels share the SMs with the other co-runners
  l (processor sharing), so the kernel a launch of j finds in flight lasts longer by their demand. 1 on every pair
  (there is no other co-runner): the pair fit is the shipped one, and only larger sets see it. No constant.
- ``stretch_all``: q_k = 1 + Σ_{l≠k} busy_l · fill_l over every other member of the set, j included.
- ``mva``: an exact mean-value analysis of the set as a closed queueing network (one customer per job; a
  processor-sharing GPU of demand D_c = busy_c · fill_c · t_c per iteration; a delay of t_c − D_c, the job's host time
  and the part of its kernels that leaves SMs free). It gives each co-runner's kernel stretch σ_k = R_k / D_k and
  slowdown s_k in the set; the kernel k has in flight is σ_k times longer and is in flight busy_k · σ_k / s_k of the
  time, so q_k = σ_k · min(1, busy_k σ_k / s_k) / busy_k. Saturates by itself (a closed network holds at most one
  iteration of each job). No constant.
- ``idle_gate``: q_k = 1; the target's gate reads its utilisation in the set instead of its solo busy:
  g_j = min(1, ρ'_j)^WAIT_BUSY_GATE_EXPONENT, ρ'_j = busy_j · (1 + ρ) + K_j / t_j · Σ_k u_k (its kernels stretched by the
  co-runners' demand, plus its waits). A host-bound job hides waits in its idle time; the idle time left in the set
  shrinks as the co-runners' load grows, and with it what it can hide. Saturating targets (gate ≈ 1) are unchanged.
  No constant.
- ``idle_gate_L``: the same, and L's factor min(1, busy_j) becomes min(1, ρ'_j) too.
- ``power``: q_k = (1 + ρ)^a (ρ of ``mg1_fill``), one constant a, chosen from ``POWER_GRID`` by leave-architecture-out
  CV on the development **pairs only** (``--power``: skip the choice and use that a).

Protocol (docs/model.md, "Locked split"): every variant is compared on the development rows (sets without an
architecture of ``datasets/h100/locked_split.json``) by leave-arch, pairs -> triples and pairs and triples -> four-job
sets, MPS, the mean of ``--seeds`` tree seeds, per job class (host-bound: ncu busy < ``HOST_BOUND_BUSY``). The rule,
fixed before the runs: a variant is chosen if it lowers the development pairs -> triples MAPE by more than the
shipped design's seed spread on that split and worsens neither leave-arch nor the four-job sets by more than the
shipped spread on those; of several, the least pairs -> triples MAPE. The locked figure (a fit on the development
rows tested once on the locked rows, ``research.protocol.LOCKED_KINDS``, tree seed 0 as the report) is then computed
for the shipped design and the chosen variant only. Time-slicing is not touched (q_k enters the MPS wait alone, whose
coefficients fit to 0 under time-slicing).

  PYTHONPATH=. python research/mps_queueing_study.py --out reports/h100/mps_queueing      # ~3 min on 2 cores
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colopred.constants import MPS_WAIT_CROSS_GATE, MPS_WAIT_CROSS_SCALE, TREE_PARAMS, WAIT_BUSY_GATE_EXPONENT  # noqa: E402
from colopred.research.dataset import load_dataset  # noqa: E402
from colopred.research.evaluation import splits  # noqa: E402
from research.noise import HOST_BOUND_BUSY  # noqa: E402
from colopred.research.protocol import LOCKED_KINDS, is_locked, locked_architectures  # noqa: E402
from colopred.research.report import md_table  # noqa: E402
from colopred.runtime.baseline import BASELINE_TERMS, CROSS_GATES, baseline_slowdown, baseline_terms, fit_coefs  # noqa: E402
from colopred.runtime.features import FEATURES, MONOTONE_INCREASING, model_features  # noqa: E402

MODE = "mps"
KINDS = tuple(LOCKED_KINDS)  # leave-arch, pairs->triples, pairs+triples->quads
VARIANTS = ("shipped", "mg1_fill", "mg1_busy", "mg1_idle", "stretch", "stretch_all", "mva", "power", "idle_gate", "idle_gate_L")
GATED = ("idle_gate", "idle_gate_L")
"""Variants that keep q_k = 1 and change the target's gate instead (module doc)."""
POWER_GRID = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0)
CO_COLS = ("t_busy", "t_sm_fill", "t_busy_mps_wait_us", "t_log_iter_ms")
"""Per-member columns the variants read of each co-runner (its own feature row in the window: re-timed profile)."""


# ------------------------------------------------------------------------------------------ pure functions
def co_runner_values(df: pd.DataFrame, cols=CO_COLS) -> np.ndarray:
    """rows x (max set size − 1) x len(cols): for each row (window, job j), the ``cols`` of its co-runners' own rows in
    the same window, in row order; NaN where a set has fewer co-runners."""
    n_co = int(df["n_jobs"].max()) - 1
    out = np.full((len(df), max(n_co, 1), len(cols)), np.nan)
    vals = df[list(cols)].to_numpy(float)
    for _, idx in df.groupby("window_id", sort=False).indices.items():
        for a in idx:
            others = [b for b in idx if b != a]
            out[a, : len(others)] = vals[others]
    return out


def demand(busy: np.ndarray, fill_pct: np.ndarray) -> np.ndarray:
    """busy · fill: the share of the whole GPU a job's kernels ask for over its solo iteration (a missing fill counts 1)."""
    return busy * np.nan_to_num(np.asarray(fill_pct, float) / 100.0, nan=1.0)


def mva_closed(demand_share: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact mean-value analysis of a closed network with one customer per job c: a processor-sharing station of
    demand D_c = demand_share[c] (in units of c's solo iteration) and a delay of 1 − D_c. Returns (σ, s): each job's
    kernel stretch R_c / D_c (1 where D_c = 0) and its slowdown (1 − D_c + R_c). Recursion over the subsets of jobs
    (arrival theorem: R_c(S) = D_c · (1 + Σ_{k∈S, k≠c} Q_k(S − c)), Q_k(S) = R_k(S) / (1 − D_k + R_k(S)))."""
    d = np.asarray(demand_share, float)
    n = len(d)
    Q: dict[frozenset, dict[int, float]] = {frozenset(): {}}
    for size in range(1, n + 1):
        for S in itertools.combinations(range(n), size):
            fs = frozenset(S)
            q = {}
            for c in S:
                prev = Q[fs - {c}]
                r = d[c] * (1.0 + sum(prev.values()))
                q[c] = r / (1.0 - d[c] + r) if r > 0 else 0.0
            Q[fs] = q
    full = frozenset(range(n))
    R = np.array([d[c] * (1.0 + sum(v for k, v in Q[full - {c}].items())) for c in range(n)])
    sigma = np.where(d > 0, R / np.where(d > 0, d, 1.0), 1.0)
    return sigma, 1.0 - d + R


def wait_factors(variant: str, co: np.ndarray, own_busy: np.ndarray, own_fill_pct: np.ndarray, power: float = 1.0,
                 mva: np.ndarray | None = None, own_launch_fill: np.ndarray | None = None) -> np.ndarray:
    """q_k of each row's co-runners (rows x co-runner slots; NaN in empty slots) of ``variant`` (module doc). ``co``:
    :func:`co_runner_values` (columns ``CO_COLS``); ``mva``: per slot, the MVA factor (``variant == "mva"``);
    ``own_launch_fill``: the target's per-launch SM fill (feature ``t_launch_fill``, a fraction; 1 where missing)."""
    busy, fill = co[..., 0], co[..., 1]
    f = demand(busy, fill)
    present = ~np.isnan(busy)
    f0 = np.where(present, f, 0.0)
    rho = f0.sum(axis=1, keepdims=True)
    one = np.where(present, 1.0, np.nan)
    if variant == "shipped":  # baseline.wait_load: each co-runner's wait stretched by the others, gated
        b0 = np.where(present, np.clip(busy, 0.0, 1.0), 0.0)
        phi = np.ones_like(own_busy) if own_launch_fill is None else np.nan_to_num(own_launch_fill, nan=1.0)
        gate = CROSS_GATES[MPS_WAIT_CROSS_GATE](np.clip(own_busy, 0.0, 1.0), phi)[:, None]
        return one * (1.0 + MPS_WAIT_CROSS_SCALE * gate * (b0.sum(axis=1, keepdims=True) - b0))
    if variant in GATED:
        return one
    if variant == "mg1_fill":
        return one * (1.0 + rho)
    if variant == "mg1_busy":
        return one * (1.0 + np.where(present, busy, 0.0).sum(axis=1, keepdims=True))
    if variant == "mg1_idle":
        return one * (1.0 + (1.0 - np.clip(own_busy, 0.0, 1.0))[:, None] * rho)
    if variant == "stretch":
        return one * (1.0 + rho - f0)
    if variant == "stretch_all":
        return one * (1.0 + rho - f0 + demand(own_busy, own_fill_pct)[:, None])
    if variant == "power":
        return one * (1.0 + rho) ** power
    if variant == "mva":
        if mva is None:
            raise ValueError("the mva variant needs its per-slot factors (mva_factors)")
        return np.where(present, mva, np.nan)
    raise ValueError(f"unknown variant {variant!r} (one of {', '.join(VARIANTS)})")


def mva_factors(df: pd.DataFrame) -> np.ndarray:
    """Per row and co-runner slot (:func:`co_runner_values`' order), the ``mva`` variant's q_k: σ_k · min(1, busy_k σ_k
    / s_k) / busy_k from :func:`mva_closed` of the row's window (each member's demand busy · fill)."""
    n_co = int(df["n_jobs"].max()) - 1
    out = np.full((len(df), max(n_co, 1)), np.nan)
    busy = df["t_busy"].to_numpy(float)
    d = demand(busy, df["t_sm_fill"].to_numpy(float))
    for _, idx in df.groupby("window_id", sort=False).indices.items():
        sigma, s = mva_closed(d[idx])
        q = sigma * np.minimum(1.0, busy[idx] * sigma / s) / busy[idx]
        for i, a in enumerate(idx):
            others = [m for m in range(len(idx)) if m != i]
            out[a, : len(others)] = q[others]
    return out


def in_set_utilisation(df: pd.DataFrame, co: np.ndarray) -> np.ndarray:
    """ρ'_j of each row: the share of the target's solo iteration its launch stream is occupied in the set, its kernels
    stretched by the co-runners' demand (processor sharing: busy_j · (1 + Σ_k busy_k · fill_k)) plus its waits behind
    their kernels (the ungated wait load K_j / t_j · Σ_k u_k)."""
    busy = np.clip(df["t_busy"].to_numpy(float), 0.0, 1.0)
    present = ~np.isnan(co[..., 0])
    rho = np.where(present, demand(co[..., 0], co[..., 1]), 0.0).sum(axis=1)
    kernels = np.expm1(df["t_log_kernels"].to_numpy(float))
    iter_us = 1e3 * np.exp(df["t_log_iter_ms"].to_numpy(float))
    waits = np.nan_to_num(kernels / iter_us * np.nansum(co[..., CO_COLS.index("t_busy_mps_wait_us")], axis=1))
    return busy * (1.0 + rho) + waits


def variant_terms(df: pd.DataFrame, q: np.ndarray, co: np.ndarray, variant: str = "shipped") -> np.ndarray:
    """The baseline's terms (L, W·φ_j, W·(1 − φ_j)) of each row with the wait W = K_j / t_j · g_j · Σ_k u_k · q_k
    (shipped W when every q_k = 1). ``idle_gate``: g_j = min(1, ρ'_j)^WAIT_BUSY_GATE_EXPONENT (:func:`in_set_utilisation`)
    in place of min(1, busy_j)^...: the idle time that absorbs waits is the one left in the set. ``idle_gate_L``: the
    same, and L's factor min(1, busy_j) becomes min(1, ρ'_j)."""
    X = df[list(FEATURES)].to_numpy(float)
    shipped = baseline_terms(X, "mps_share")
    u = co[..., CO_COLS.index("t_busy_mps_wait_us")]
    kernels = np.expm1(df["t_log_kernels"].to_numpy(float))
    iter_us = 1e3 * np.exp(df["t_log_iter_ms"].to_numpy(float))
    busy = np.clip(df["t_busy"].to_numpy(float), 0.0, 1.0)
    load = shipped[:, 0]
    if variant in GATED:
        util = np.minimum(1.0, in_set_utilisation(df, co))
        if variant == "idle_gate_L":
            load = load / np.where(busy > 0, busy, 1.0) * util
    else:
        util = busy
    gate = util ** WAIT_BUSY_GATE_EXPONENT
    wait = np.nan_to_num(kernels / iter_us * np.nansum(u * q, axis=1) * gate)
    phi = np.nan_to_num(df["t_launch_fill"].to_numpy(float), nan=1.0)
    return np.column_stack([load, wait * phi, wait * (1.0 - phi)])


# ------------------------------------------------------------------------------------------ model
_COLS = [FEATURES.index(f) for f in model_features(MODE)]
_MONO = "(" + ",".join("1" if f in MONOTONE_INCREASING else "0" for f in model_features(MODE)) + ")"


def fit_predict(X: np.ndarray, T: np.ndarray, s: np.ndarray, tr: np.ndarray, te: np.ndarray, seed: int) -> np.ndarray:
    """The shipped point model (``SlowdownModel``, MPS: NNLS baseline, monotone XGBoost on log(s / s_base)) fitted on
    rows ``tr`` with baseline terms ``T``, predicting rows ``te``."""
    import xgboost as xgb

    coefs = fit_coefs(T[tr], s[tr])
    r = np.log(s[tr]) - np.log(baseline_slowdown(coefs, T[tr]))
    m = xgb.XGBRegressor(objective="reg:squarederror", monotone_constraints=_MONO, **{**TREE_PARAMS, "random_state": seed})
    m.fit(X[tr][:, _COLS], r)
    return baseline_slowdown(coefs, T[te]) * np.exp(m.get_booster().inplace_predict(X[te][:, _COLS].astype(np.float32)))


def oos(df: pd.DataFrame, T: np.ndarray, kind: str, seed: int) -> np.ndarray:
    """Out-of-sample predictions of ``df``'s rows on ``kind`` (``evaluation.splits``; NaN where untested)."""
    X, s = df[list(FEATURES)].to_numpy(float), df["slowdown"].to_numpy(float)
    pred = np.full(len(df), np.nan)
    for _, tr, te in splits(df, kind):
        if len(tr) and len(te):
            pred[te] = fit_predict(X, T, s, tr, te, seed)
    return pred


def errors(s: np.ndarray, pred: np.ndarray, host: np.ndarray) -> dict[str, float]:
    """MAPE and mean signed relative error (pred / s − 1), all rows and per job class, over rows with a prediction."""
    ok = ~np.isnan(pred)
    e = pred / s - 1
    out = {"rows": int(ok.sum()), "MAPE %": 100 * float(np.mean(np.abs(e[ok])))}
    for name, m in (("host-bound", host), ("saturating", ~host)):
        sel = ok & m
        out[f"{name} MAPE %"] = 100 * float(np.mean(np.abs(e[sel]))) if sel.any() else np.nan
        out[f"{name} signed %"] = 100 * float(np.mean(e[sel])) if sel.any() else np.nan
    return out


# ------------------------------------------------------------------------------------------ study
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT / "datasets/h100"))
    ap.add_argument("--seeds", type=int, default=3, help="tree seeds averaged per development figure")
    ap.add_argument("--power", type=float, default=None, help="the power variant's a (default: chosen on development pairs)")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="variants to run, comma-separated (shipped always runs)")
    ap.add_argument("--choose", default=None, help="report the locked figure of this variant whatever the rule says")
    ap.add_argument("--no-locked", action="store_true", help="development figures only (while choosing)")
    ap.add_argument("--out", default=None, help="folder for README.md and the CSV tables (default: print only)")
    a = ap.parse_args()
    t_start = time.monotonic()
    variants = ["shipped"] + [v for v in a.variants.split(",") if v and v != "shipped"]
    unknown = set(variants) - set(VARIANTS)
    if a.choose is not None and a.choose not in variants[1:]:
        ap.error("--choose: a variant run by --variants, not shipped")
    if unknown:
        ap.error(f"--variants: unknown {', '.join(sorted(unknown))} (known: {', '.join(VARIANTS)})")

    ds = load_dataset(a.data)
    locked = locked_architectures(a.data)
    df = ds.for_mode(MODE).reset_index(drop=True)
    lk = is_locked(df, locked)
    host = df["job"].map({n: p.busy_fraction < HOST_BOUND_BUSY for n, p in ds.profiles.items()}).to_numpy(bool)
    co = co_runner_values(df)
    mva = mva_factors(df)
    own_busy, own_fill = df["t_busy"].to_numpy(float), df["t_sm_fill"].to_numpy(float)

    def terms(variant: str, power: float = 1.0) -> np.ndarray:
        return variant_terms(df, wait_factors(variant, co, own_busy, own_fill, power, mva,
                                              own_launch_fill=df["t_launch_fill"].to_numpy(float)), co, variant)

    dev_idx = np.flatnonzero(~lk)
    dev = df.iloc[dev_idx].reset_index(drop=True)
    s_dev, host_dev = dev["slowdown"].to_numpy(float), host[dev_idx]
    seeds = range(a.seeds)
    print(f"{MODE}: {len(df)} rows, development {len(dev)} ({dev['window_id'].nunique()} sets), "
          f"locked {int(lk.sum())}; {a.seeds} seeds", flush=True)

    # the power variant's constant: leave-arch on the development pairs alone
    grid_rows = []
    pairs = (dev["n_jobs"] == 2).to_numpy()
    dev_pairs = dev[pairs].reset_index(drop=True)
    for p in (0.0, *POWER_GRID) if "power" in variants and a.power is None else ():
        T = terms("power", p)[dev_idx][pairs]
        m = [errors(dev_pairs["slowdown"].to_numpy(float), oos(dev_pairs, T, "leave-arch", k), host_dev[pairs])["MAPE %"] for k in seeds]
        grid_rows.append({"a": p, "dev pairs leave-arch MAPE %": float(np.mean(m)), "seed spread": float(np.ptp(m))})
        print(f"  power a={p:g}: development pairs leave-arch {np.mean(m):.3f}%", flush=True)
    grid = pd.DataFrame(grid_rows, columns=["a", "dev pairs leave-arch MAPE %", "seed spread"])
    if a.power is not None or grid.empty:
        power = a.power if a.power is not None else 1.0
    else:
        power = float(grid.loc[grid["a"] > 0].sort_values("dev pairs leave-arch MAPE %")["a"].iloc[0])
    print(f"  power: a = {power:g}")

    # development figures of every variant (per seed, then the mean)
    dev_rows, per_seed = [], {}
    for v in variants:
        T = terms(v, power)[dev_idx]
        label = v if v != "power" else f"power (a={power:g})"
        for kind in KINDS:
            per = [errors(s_dev, oos(dev, T, kind, k), host_dev) for k in seeds]
            per_seed[(v, kind)] = np.array([p["MAPE %"] for p in per])
            row = {"variant": label, "split": kind}
            for key in per[0]:
                row[key] = float(np.mean([p[key] for p in per])) if key != "rows" else per[0][key]
            row["seed spread"] = float(np.ptp(per_seed[(v, kind)]))
            row["seeds better than shipped"] = int(np.sum(per_seed[(v, kind)] < per_seed[("shipped", kind)]))
            dev_rows.append(row)
            print(f"  {label:<14} {kind:<22} {row['MAPE %']:6.3f}%  host-bound {row['host-bound MAPE %']:6.2f}% "
                  f"({row['host-bound signed %']:+.2f})  saturating {row['saturating MAPE %']:5.2f}% ({row['saturating signed %']:+.2f})"
                  f"  spread {row['seed spread']:.2f}  better on {row['seeds better than shipped']}/{a.seeds} seeds", flush=True)
    table = pd.DataFrame(dev_rows)
    key = dict(zip(table["variant"], [v for v in variants for _ in KINDS]))

    # the baseline's NNLS coefficients of each variant on every development row
    coefs = pd.DataFrame([{"variant": label, **dict(zip(BASELINE_TERMS, fit_coefs(terms(key[label], power)[dev_idx], s_dev)))}
                          for label in dict.fromkeys(table["variant"])])

    # the rule (module doc)
    chosen, verdict = choose(table)
    if a.choose:
        verdict = f"{a.choose}, named by --choose (the rule alone: {chosen or 'none'})"
        chosen = next(lbl for lbl, v in key.items() if v == a.choose)
    print(f"chosen: {verdict}")

    # locked figures: shipped and the chosen variant, tree seed 0 (as research.protocol)
    locked_rows = []
    n_jobs = df["n_jobs"].to_numpy()
    X, s = df[list(FEATURES)].to_numpy(float), df["slowdown"].to_numpy(float)
    for label in ([] if a.no_locked else ["shipped"] + ([chosen] if chosen else [])):
        T = terms(key[label], power)
        for kind, (train_size, test_size) in LOCKED_KINDS.items():
            tr = np.flatnonzero(~lk & train_size(n_jobs))
            te = np.flatnonzero(lk & test_size(n_jobs))
            pred = fit_predict(X, T, s, tr, te, TREE_PARAMS["random_state"])
            locked_rows.append({"variant": label, "split": kind, **errors(s[te], pred, host[te])})
            print(f"  locked {label:<14} {kind:<22} {locked_rows[-1]['MAPE %']:6.3f}%", flush=True)
    locked_table = pd.DataFrame(locked_rows, columns=["variant", "split", *errors(s[:1], s[:1], host[:1])])

    # the shipped design, tree seed 0, against the evaluation's own figures (reports/h100/protocol.csv)
    check = protocol_check(per_seed, locked_table, Path(a.data))
    runtime = time.monotonic() - t_start
    print(check)
    print(f"runtime {runtime:.0f} s")
    if a.out:
        write(Path(a.out), a, ds, table, grid, power, coefs, locked_table, verdict, check, runtime)
    return 0


def choose(table: pd.DataFrame) -> tuple[str | None, str]:
    """The rule (module doc) on the development table: (the chosen variant or None, a sentence saying why)."""
    shipped = table[table["variant"] == "shipped"].set_index("split")
    ok, why = [], []
    for v, g in table[table["variant"] != "shipped"].groupby("variant", sort=False):
        g = g.set_index("split")
        gain = shipped.loc["pairs->triples", "MAPE %"] - g.loc["pairs->triples", "MAPE %"]
        worse = {k: g.loc[k, "MAPE %"] - shipped.loc[k, "MAPE %"] for k in ("leave-arch", "pairs+triples->quads")}
        passes = gain > shipped.loc["pairs->triples", "seed spread"] and all(worse[k] <= shipped.loc[k, "seed spread"] for k in worse)
        if passes:
            ok.append((g.loc["pairs->triples", "MAPE %"], v))
        why.append(f"{v}: pairs->triples gain {gain:+.2f} (needs > {shipped.loc['pairs->triples', 'seed spread']:.2f}), "
                   + ", ".join(f"{k} change {w:+.2f} (needs <= {shipped.loc[k, 'seed spread']:.2f})" for k, w in worse.items()))
    chosen = min(ok)[1] if ok else None
    return chosen, (chosen or "none: no variant meets the rule, the shipped baseline stays") + ".\n\n" + "\n".join(f"- {w}" for w in why)


def protocol_check(per_seed: dict, locked_table: pd.DataFrame, data: Path) -> str:
    """Whether the shipped design at tree seed 0 reproduces ``reports/h100/protocol.csv``'s MPS MAPEs (development and
    locked), i.e. whether this study's model and rows are the evaluation's."""
    path = ROOT / "reports" / "h100" / "protocol.csv"
    if not path.is_file() or data.resolve() != (ROOT / "datasets" / "h100").resolve():
        return "no protocol.csv check (another dataset)"
    ref = pd.read_csv(path)
    ref = ref[ref["mode"] == MODE]
    lines = []
    for kind in KINDS:
        for fig, got in (("development", per_seed[("shipped", kind)][0]),
                         ("locked", locked_table.loc[(locked_table["variant"] == "shipped") & (locked_table["split"] == kind), "MAPE %"])):
            r = ref[(ref["split"] == kind) & ref["figure"].str.startswith(fig)]["slowdown_mape_pct"]
            if isinstance(got, pd.Series):
                if got.empty:
                    continue
                got = got.iloc[0]
            lines.append(f"{fig} {kind}: {got:.3f}% here, {r.iloc[0]:.3f}% in protocol.csv" + ("" if abs(got - r.iloc[0]) < 1e-6 else " (DIFFERS)"))
    return "shipped, tree seed 0, against reports/h100/protocol.csv: " + "; ".join(lines)


HISTORY = """## The order the variants were tried in

Every choice below was made on development figures only. The rule was written before the first run. First run:
`mg1_fill`, `mg1_busy`, `stretch`, `stretch_all`, `mva`, `power` (its a chosen on the development pairs). Then,
seeing that no queueing factor on the co-runners' waits matched the host-bound class alone, `idle_gate` and
`idle_gate_L` (the absorbing idle time shrinks with load). Last, seeing that `mg1_fill` cut the host-bound error but
raised the saturating one (saturating jobs compose additively, `reports/h100/additivity`), `mg1_idle` (the queueing
factor for launches issued into an idle stream only). `mg1_idle` is therefore the third look at the same development
rows: its development figures are less of an out-of-sample test than the first run's.

"""


READING = """## Reading (the run at data hash a70199c1eeb69cc8, 3 seeds)

- Every form that lengthens the waits of **every** target in a larger set loses on pairs -> triples: `stretch`
  (13.3%), `mva` (11.5%), `mg1_busy` (9.9%), `stretch_all` (9.0%), against 8.5% shipped. They fix the host-bound bias
  (signed −12.9% -> +0.7 to +7.4%) but push the saturating targets, which compose additively from their pairs
  (`reports/h100/additivity`), to over-prediction (signed +6.5 to +12.2%).
- Moving the idle-time gate with the load (`idle_gate`, `idle_gate_L`) gains nothing (pairs -> triples 8.57%, 9.10%):
  the gate busy_j^(1/3) is already 0.79-0.93 for busy 0.5-0.8, so lifting it toward 1 moves the wait little.
- `mg1_idle` (the M/G/1 factor 1 + ρ, to first order, on the share 1 − busy_j of launches the host issues into an idle
  stream) is the best on every development split, and on each of the 3 seeds on each split: leave-arch 7.44 -> 7.29%,
  pairs -> triples 8.53 -> 7.71% (host-bound 14.9 -> 11.9%, signed −12.9 -> −5.8%; saturating 5.85 -> 5.98%),
  four-job sets 7.60 -> 5.67%. It adds no constant. Its pairs -> triples gain (0.81 points) is below the shipped
  design's seed spread on that split (0.96 over 3 seeds; 1.10 over 6, where the gain is 0.86), so the rule, fixed
  before the runs, does not choose it, and it was the third look at these rows (above).
- `mg1_fill` (the same factor on every launch) gains most on leave-arch (7.12%) and cuts the host-bound
  pairs -> triples error most (10.2%, signed −3.0%) but raises the saturating one (7.15%, signed +4.55%).
- `power` (a = 0.25 from the development pairs) gains a little everywhere (7.32 / 7.73 / 6.84%) and leaves most of
  the host-bound bias (−10.3%).
- Leave-arch MPS got worse for none of `mg1_idle`, `mg1_fill`, `power`; time-slicing is untouched by every variant.

`mg1_idle.patch` (not applied) is `mg1_idle` in `colopred/runtime/baseline.py` and `features.py`: a set-level column
`co_demand_load` = Σ_k busy_k · fill_k (the feature rows hold no per-co-runner product; not a tree feature) and
W · (1 + (1 − min(1, busy_j)) · co_demand_load) under MPS only. On a copy of the committed tree with it applied,
`evaluation.out_of_sample` gives this study's `mg1_idle` development figures to the last digit (seeds 0-2) and the
time-slicing development figures of `reports/h100/protocol.csv` unchanged. FEATURES gains a column, so the shipped
models' manifests (which check FEATURES) must be retrained.

Process note. One earlier run (`--variants mg1_fill,mg1_idle`, 3 seeds) ran while `colopred/research/dataset.py` was
being edited in the shared tree: its shipped development figures differed from the committed ones (four-job sets
8.31% against 7.60%), its rule chose `mg1_idle`, and it printed locked figures on those rows: shipped 8.40 / 10.03 /
8.93%, `mg1_idle` 8.41 / 10.93 / 8.67% (leave-arch / pairs -> triples / four-job sets). Those rows were not the
committed MPS rows, so the figures are not the locked figure of either design, but they were seen, and they hint that
the pairs -> triples gain may not carry to the locked triples. Every figure above comes from runs whose shipped
design reproduces `reports/h100/protocol.csv` (last line of this file).

"""


def write(d: Path, a, ds, table: pd.DataFrame, grid: pd.DataFrame, power: float, coefs: pd.DataFrame,
          locked_table: pd.DataFrame, verdict: str, check: str, runtime: float) -> None:
    d.mkdir(parents=True, exist_ok=True)
    table.to_csv(d / "development.csv", index=False)
    grid.to_csv(d / "power_grid.csv", index=False)
    coefs.to_csv(d / "coefficients.csv", index=False)
    locked_table.to_csv(d / "locked.csv", index=False)
    cmd = f"PYTHONPATH=. python research/mps_queueing_study.py --out {a.out}" + (f" --seeds {a.seeds}" if a.seeds != 3 else "")
    short = table[["variant", "split", "MAPE %", "seed spread", "seeds better than shipped", "host-bound MAPE %",
                   "host-bound signed %", "saturating MAPE %", "saturating signed %"]]
    (d / "README.md").write_text(
        "# Load-dependent MPS wait terms (a study, development rows)\n\n"
        f"`{cmd}` (`datasets/h100`, data hash {ds.data_hash}; {runtime:.0f} s on 2 cores). The script's docstring "
        "defines the variants and the rule; MPS only (time-slicing is not touched). Development rows: sets without an "
        f"architecture of `datasets/h100/locked_split.json`; every development figure is the mean of {a.seeds} tree seeds "
        "(`seed spread`: max − min over them; `seeds better than shipped`: seeds on which the variant's MAPE is below the "
        f"shipped design's at the same seed); host-bound: ncu busy < {HOST_BOUND_BUSY:g}; signed: mean of "
        "predicted / measured − 1.\n\n"
        + ("## The power variant's constant (development pairs only, leave-arch)\n\n" + md_table(grid, digits=3) +
           f"\n\na = {power:g} (the least MAPE with a > 0; a = 0 is the shipped wait).\n\n" if not grid.empty else "")
        + HISTORY +
        "## Development figures (`development.csv`)\n\n" + md_table(short, digits=2) +
        "\n\n## Baseline coefficients on every development row (`coefficients.csv`)\n\n" + md_table(coefs, digits=3) +
        f"\n\n## Chosen by the rule\n\n{verdict}\n\n" + READING +
        "## Locked figures (`locked.csv`; fitted on development rows, tested once on the locked rows, tree seed 0)\n\n"
        + md_table(locked_table, digits=2) + f"\n\n{check}\n")
    print(f"wrote {d}")


if __name__ == "__main__":
    sys.exit(main())
