#!/usr/bin/env python3
"""How fast colopred learns a never-seen job from the co-runs a cluster observes of it.

**Question.** A scheduler places a job of an architecture colopred never saw; each co-run it then measures is an
observation. After the job's first k observed co-runs (k = 0, 1, 2, 4, 8), how far off are its predictions in its
other collocations, per sharing mode, when the observations only move its online offset (``Predictor.observe``), when
the model is retrained with them, and both?

**Design.** Leave-architecture-out as the report's ``leave-arch`` split: for each architecture A (each mode), a model
fitted on the sets without A predicts every row of the sets with A (:func:`fold_rows`: the held-out job's rows, and
its co-runners'). For each of ``DRAWS`` seeded draws, each job of A takes its measured sets in a random order (seed
``SEED``); its first k are the co-runs it is "observed" in, each by one of that set's windows drawn at random (one
co-run measured once, as a cluster sees it). The job's error is measured on its other sets, never on an observed one
(nor on a set observed for another job of A in that draw); a job is scored at k only if it has more than k sets. Three
ways to use the observations:

- ``online``: the job's offset from its k observed rows, applied to its other predictions (:mod:`colopred.runtime.observed`
  with the constants shipped in ``colopred.constants``; :func:`online_factors` also takes the variants this study
  compares);
- ``retrain``: the fold's model fitted again on its training rows plus every row of the observed windows (the job's and
  its co-runners': an observation reports every member), as ``colopred train --store`` does;
- ``retrain + online``: the retrained model, with the online offsets taken against its own predictions of the
  observed rows (what a server holds after it loads a retrained version).

Constants of the online update are chosen on the development architectures' folds (``datasets/h100/locked_split.json``)
by the rule in :func:`choose_online`; the locked architectures' figures are reported beside them, never used to choose.

**Command.**

  PYTHONPATH=. python research/learning_curve.py [--data datasets/h100] [--out reports/h100/learning]
      [--draws 20] [--retrain-draws 3] [--no-retrain]

Writes ``fold_rows.csv.gz`` (the k = 0 predictions, reused by a later run with ``--reuse``), ``table.csv``,
``learning.png`` and ``README.md`` in ``--out``.
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

from colopred.measurement.harness.reader import machine_key  # noqa: E402
from colopred.research.dataset import Dataset, load_dataset  # noqa: E402
from colopred.research.evaluation import job_fit_args, new_model  # noqa: E402
from colopred.research.protocol import locked_architectures  # noqa: E402
from colopred.io import atomic_file, write_csv_atomic, write_text_atomic  # noqa: E402
from colopred.research.report import md_table, shown_path  # noqa: E402
from colopred.constants import SLOWDOWN_FLOOR  # noqa: E402
from colopred.runtime.features import FEATURES  # noqa: E402
from colopred.runtime.observed import JobOffset, corrected, offset_weight, prior_weight_of  # noqa: E402

MODES = ("timeslice", "mps")
KS = (1, 2, 4, 8)
DRAWS = 20
RETRAIN_DRAWS = 3
SEED = 0


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --------------------------------------------------------------------------------------- the folds' predictions
def point_model(mode: str, source: str, timeline: bool):
    return new_model(mode, source, timeline, interval=False, calibrate=False)


def fit_predict(train: pd.DataFrame, test: pd.DataFrame, mode: str, source: str, timeline: bool) -> np.ndarray:
    """A point model of ``mode`` fitted on ``train`` (with its jobs' own offsets, as shipped models are), predicting
    ``test``."""
    m = point_model(mode, source, timeline).fit(train[list(FEATURES)].to_numpy(), train["slowdown"].to_numpy(),
                                                **job_fit_args(train))
    return m.predict(test[list(FEATURES)].to_numpy(), jobs=test["job"].to_numpy())


def held_out(df: pd.DataFrame, arch: str) -> np.ndarray:
    """Rows of the sets that hold ``arch``."""
    return df["set_archs"].map(lambda a: arch in a).to_numpy()


def fold_rows(ds: Dataset, mode: str) -> pd.DataFrame:
    """Every row of every set holding architecture A, predicted by a model fitted without those sets, for each A:
    ``role`` target (a job of A) or co-runner."""
    df = ds.for_mode(mode)
    df = df.assign(machine=machine_key(df).astype(str).to_numpy())
    out = []
    for arch in sorted(df["arch"].unique()):
        te = held_out(df, arch)
        if te.all() or not te.any():
            continue
        t0 = time.monotonic()
        test = df[te]
        pred = fit_predict(df[~te], test, mode, ds.profile_source, ds.timeline)
        out.append(pd.DataFrame({"mode": mode, "held_out": arch, "row": np.flatnonzero(te), "window_id": test["window_id"].to_numpy(),
                                 "set": test["set"].to_numpy(), "job": test["job"].to_numpy(),
                                 "role": np.where(test["arch"].to_numpy() == arch, "target", "co-runner"),
                                 "n_jobs": test["n_jobs"].to_numpy(), "machine": test["machine"].to_numpy(),
                                 "t_busy": test["t_busy"].to_numpy(), "slowdown": test["slowdown"].to_numpy(), "pred": pred}))
        log(f"{mode} {arch}: {te.sum()} rows, {time.monotonic() - t0:.0f} s")
    return pd.concat(out, ignore_index=True)



# --------------------------------------------------------------------------------------- the draws
def _rng(mode: str, arch: str, draw: int, seed: int) -> np.random.Generator:
    """One generator per (mode, architecture, draw): a draw is the same whichever folds or methods a run computes."""
    return np.random.default_rng([seed, MODES.index(mode), sum(map(ord, arch)) * 1_000 + len(arch), draw])


def draw_observations(rows: pd.DataFrame, draws: int, seed: int = SEED, ks=KS) -> pd.DataFrame:
    """One record per (mode, held-out architecture, draw, k, target job scored at k): ``observed`` (the rows of
    ``rows`` it is observed in: one window of each of its first k sets), ``windows`` (those windows; with every
    other job of the architecture's, what ``retrain`` adds) and ``test`` (its rows in the sets no job of the
    architecture was observed in)."""
    out = []
    for (mode, arch), f in rows.groupby(["mode", "held_out"], sort=True):
        tgt = f[f["role"] == "target"]
        jobs = sorted(tgt["job"].unique())
        sets_of = {j: sorted(tgt.loc[tgt["job"] == j, "set"].unique()) for j in jobs}
        windows_of = {key: sorted(g["window_id"].unique()) for key, g in tgt.groupby(["job", "set"])}
        row_of = {(w, j): i for i, w, j in zip(tgt.index, tgt["window_id"], tgt["job"])}
        for d in range(draws):
            rng = _rng(mode, arch, d, seed)
            order = {j: [sets_of[j][i] for i in rng.permutation(len(sets_of[j]))] for j in jobs}
            window = {j: [windows_of[(j, s)][rng.integers(len(windows_of[(j, s)]))] for s in order[j]] for j in jobs}
            for k in ks:
                seen = {s for j in jobs for s in order[j][:k]}
                all_windows = tuple(w for j in jobs for w in window[j][:k])
                for j in jobs:
                    if len(sets_of[j]) <= k:
                        continue
                    test = tgt.index[(tgt["job"] == j) & ~tgt["set"].isin(seen)].to_numpy()
                    if len(test) == 0:
                        continue
                    out.append({"mode": mode, "held_out": arch, "draw": d, "k": k, "job": j,
                                "observed": np.array([row_of[(w, j)] for w in window[j][:k]]), "windows": all_windows,
                                "test": test})
    return pd.DataFrame(out)


# --------------------------------------------------------------------------------------- online offsets
def online_factors(s_obs: np.ndarray, p_obs: np.ndarray, p_test: np.ndarray, prior_weight: float, scale: float = 1.0,
                   partner_log_ratio: float = 0.0, partner_weight: float = 0.0) -> np.ndarray:
    """The test rows' corrected predictions from a job's k observed rows (measured ``s_obs``, predicted ``p_obs``).

    ``scale`` = 1, ``partner_weight`` = 0 is :mod:`colopred.runtime.observed` (``Predictor.observe``): every prediction
    times exp(w·r), r the mean log(s / p) of the observed rows, w = k / (k + n₀). The variants this study compares:
    ``scale`` c < 1 scales the interference instead, 1 − c + (p − 1 + c)·exp(w·r_c) with r_c the mean
    log((s − 1 + c) / (p − 1 + c)) (a job whose contention the model under- or over-rates, rather than a fixed
    factor); ``partner_weight`` γ adds γ times the mean log ratio of its co-runners in the observed windows to r (a job's
    role as a co-runner: under time-slicing what one job gains its partner loses)."""
    k = len(s_obs)
    w = offset_weight(k, prior_weight)
    if scale == 1.0:
        r = JobOffset(k, float(np.mean(np.log(s_obs / p_obs)))).mean_log_ratio + partner_weight * partner_log_ratio
        return corrected(p_test, np.exp(w * r))
    c = scale
    floor = 0.05 * c  # a measured slowdown below 1 − c (solo-time drift) counts as nearly no interference
    r = float(np.mean(np.log(np.maximum(s_obs - 1 + c, floor) / np.maximum(p_obs - 1 + c, floor)))) + partner_weight * partner_log_ratio
    return np.maximum(1 - c + (p_test - 1 + c) * np.exp(w * r), SLOWDOWN_FLOOR)


VARIANT_PRIOR_WEIGHTS = (0.25, 0.5, 1.0, 2.0, 4.0)
VARIANT_SCALES = (1.0, 0.5, 0.25)
VARIANT_PARTNER_WEIGHTS = (0.0, -0.25, 0.25)


def partner_log_ratios(rows: pd.DataFrame, draws: pd.DataFrame) -> np.ndarray:
    """Per draw record, the mean log(s / p) of the co-runners in the job's observed windows (0 where none)."""
    e = np.log(rows["slowdown"].to_numpy() / rows["pred"].to_numpy())
    by_window = rows.groupby(["held_out", "window_id"]).indices
    out = np.zeros(len(draws))
    for i, r in enumerate(draws.itertuples()):
        idx = [x for w in rows.loc[r.observed, "window_id"] for x in by_window[(r.held_out, w)] if rows["job"].iat[x] != r.job]
        out[i] = float(np.mean(e[idx])) if idx else 0.0
    return out


def score(rows: pd.DataFrame, draws: pd.DataFrame, preds: list[np.ndarray], method: str) -> pd.DataFrame:
    """Per draw record: the summed absolute % error of its test rows (``preds``, one array per record) and their
    number, with the uncorrected predictions' on the same rows."""
    s, p0 = rows["slowdown"].to_numpy(), rows["pred"].to_numpy()
    ape = [100 * np.abs(p - s[t]) / s[t] for p, t in zip(preds, draws["test"])]
    ape0 = [100 * np.abs(p0[t] - s[t]) / s[t] for t in draws["test"]]
    return draws[["mode", "held_out", "draw", "k", "job"]].assign(
        method=method, ape_sum=[a.sum() for a in ape], none_sum=[a.sum() for a in ape0], rows=[len(t) for t in draws["test"]])


def online(rows: pd.DataFrame, draws: pd.DataFrame, prior_weight: dict[str, float] | None = None, scale: dict | None = None,
           partner_weight: dict | None = None, partner: np.ndarray | None = None) -> list[np.ndarray]:
    s, p = rows["slowdown"].to_numpy(), rows["pred"].to_numpy()
    out = []
    for i, r in enumerate(draws.itertuples()):
        n0 = prior_weight_of(r.mode) if prior_weight is None else prior_weight[r.mode]
        out.append(online_factors(s[r.observed], p[r.observed], p[r.test], n0, 1.0 if scale is None else scale[r.mode],
                                  0.0 if partner is None else partner[i], 0.0 if partner_weight is None else partner_weight[r.mode]))
    return out


def variant_table(rows: pd.DataFrame, draws: pd.DataFrame) -> pd.DataFrame:
    """The online update's variants (:func:`online_factors`) on every draw: per (mode, split, variant, k), MAPE."""
    partner = partner_log_ratios(rows, draws)
    out = []
    for n0 in VARIANT_PRIOR_WEIGHTS:
        for c in VARIANT_SCALES:
            for g in VARIANT_PARTNER_WEIGHTS:
                both = lambda v: dict.fromkeys(MODES, v)  # noqa: E731
                sc = score(rows, draws, online(rows, draws, both(n0), both(c), both(g), partner), "online")
                out.append(summarise(sc, rows).assign(prior_weight=n0, scale=c, partner_weight=g))
    return pd.concat(out, ignore_index=True)


# --------------------------------------------------------------------------------------- retraining
def retrain(ds: Dataset, rows: pd.DataFrame, draws: pd.DataFrame, mode: str, repeat: int = 1) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per draw record of ``mode``: the test rows' predictions of the fold's model fitted again with every row of the
    observed windows (``retrain``; each ``repeat`` times: a weight), and the same with the online offsets taken against
    that model's predictions of the job's observed rows (``retrain + online``)."""
    df = ds.for_mode(mode)
    sub = draws[draws["mode"] == mode]
    plain: dict[int, np.ndarray] = {}
    both: dict[int, np.ndarray] = {}
    fold_row = rows["row"].to_numpy()
    n0 = prior_weight_of(mode)
    for (arch, d, k), g in sub.groupby(["held_out", "draw", "k"], sort=True):
        t0 = time.monotonic()
        te = held_out(df, arch)
        windows = set(g["windows"].iloc[0])
        added = df["window_id"].isin(windows).to_numpy() & te
        train = pd.concat([df[~te]] + [df[added]] * repeat, ignore_index=True)
        need = np.unique(np.concatenate([np.concatenate(g["test"].to_numpy()), np.concatenate(g["observed"].to_numpy())]))
        m = point_model(mode, ds.profile_source, ds.timeline).fit(train[list(FEATURES)].to_numpy(), train["slowdown"].to_numpy(),
                                                                   **job_fit_args(train))
        target = df.iloc[fold_row[need]]
        pred = dict(zip(need, m.predict(target[list(FEATURES)].to_numpy(), jobs=target["job"].to_numpy())))
        s = rows["slowdown"].to_numpy()
        for i, r in zip(g.index, g.itertuples()):
            p_test = np.array([pred[x] for x in r.test])
            p_obs = np.array([pred[x] for x in r.observed])
            plain[i] = p_test
            both[i] = online_factors(s[r.observed], p_obs, p_test, n0)
        log(f"retrain {mode} {arch} draw {d} k {k}: {added.sum()} rows added x {repeat}, {time.monotonic() - t0:.0f} s")
    return [plain[i] for i in sub.index], [both[i] for i in sub.index]


# --------------------------------------------------------------------------------------- tables
def summarise(scored: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """Per (mode, split, method, k): MAPE over the scored rows of each draw, averaged over the draws, beside the
    uncorrected predictions' on the same rows; ``split`` development, locked, and all."""
    locked = rows.groupby("held_out")["split"].first()
    sc = scored.assign(split=scored["held_out"].map(locked))
    sc = pd.concat([sc, sc.assign(split="all")], ignore_index=True)
    per_draw = sc.groupby(["mode", "split", "method", "k", "draw"]).agg(ape_sum=("ape_sum", "sum"), none_sum=("none_sum", "sum"),
                                                                        rows=("rows", "sum"), jobs=("job", "nunique"))
    per_draw["mape_pct"] = per_draw["ape_sum"] / per_draw["rows"]
    per_draw["none_mape_pct"] = per_draw["none_sum"] / per_draw["rows"]
    return (per_draw.groupby(["mode", "split", "method", "k"])
            .agg(draws=("rows", "size"), jobs=("jobs", "mean"), rows=("rows", "mean"), mape_pct=("mape_pct", "mean"),
                 mape_sd_over_draws=("mape_pct", "std"), none_mape_pct=("none_mape_pct", "mean"))
            .reset_index())


def k0_table(rows: pd.DataFrame) -> pd.DataFrame:
    """k = 0: every target row, as the report's leave-arch split scores it."""
    t = rows[rows["role"] == "target"]
    t = pd.concat([t, t.assign(split="all")], ignore_index=True)
    ape = 100 * (t["pred"] - t["slowdown"]).abs() / t["slowdown"]
    g = t.assign(ape=ape).groupby(["mode", "split"]).agg(jobs=("job", "nunique"), rows=("ape", "size"), mape_pct=("ape", "mean"))
    return g.reset_index().assign(k=0)


def oracle_floor(rows: pd.DataFrame) -> pd.DataFrame:
    """The MAPE left if each unseen job's own offset were known from all its rows (in-sample): what no per-job
    correction learnt from its observations can beat."""
    t = rows[rows["role"] == "target"]
    t = pd.concat([t, t.assign(split="all")], ignore_index=True)
    e = np.log(t["slowdown"] / t["pred"])
    b = e.groupby([t["mode"], t["split"], t["job"]]).transform("mean")
    ape = 100 * (t["pred"] * np.exp(b) - t["slowdown"]).abs() / t["slowdown"]
    return t.assign(ape=ape).groupby(["mode", "split"])["ape"].mean().rename("oracle_mape_pct").reset_index()


def choose_online(variants: pd.DataFrame, shipped: pd.DataFrame) -> dict[str, dict]:
    """**Rule, fixed before the final run**: per mode, the variant (n₀, scale, partner weight) of least development
    MAPE averaged over k = 1, 2, 4, 8 replaces the shipped update only if it gains more than the spread (max − min over
    the draws) of the shipped update's development figure, the analogue of the tree seeds' spread of
    ``colopred.constants``' other rules; else the shipped update stays."""
    out = {}
    for mode in MODES:
        v = variants[(variants["mode"] == mode) & (variants["split"] == "development")]
        if v.empty:
            continue
        obj = v.groupby(["prior_weight", "scale", "partner_weight"])["mape_pct"].mean()
        best = obj.idxmin()
        sh = shipped[(shipped["mode"] == mode) & (shipped["split"] == "development")]
        per_draw = sh.groupby("draw")["mape_pct"].mean()
        spread = float(per_draw.max() - per_draw.min())
        base = float(per_draw.mean())
        gain = base - float(obj.min())
        out[mode] = {"best": dict(zip(("prior_weight", "scale", "partner_weight"), best)), "best_mape_pct": float(obj.min()),
                     "shipped_mape_pct": base, "gain_points": gain, "needed_points": spread, "replaces": gain > spread}
    return out


def shipped_per_draw(scored: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """The shipped update's development and locked MAPE per (mode, split, draw), averaged over k."""
    locked = rows.groupby("held_out")["split"].first()
    sc = scored.assign(split=scored["held_out"].map(locked))
    g = sc.groupby(["mode", "split", "k", "draw"]).agg(a=("ape_sum", "sum"), n=("rows", "sum"))
    return (g["a"] / g["n"]).rename("mape_pct").reset_index().groupby(["mode", "split", "draw"])["mape_pct"].mean().reset_index()


def plot(table: pd.DataFrame, k0: pd.DataFrame, floor: pd.DataFrame, path: Path) -> None:
    """MAPE against the observed co-runs of the job, each method, every architecture's fold; the issue's targets and
    the oracle floor dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9.6, 3.8), sharey=False)
    for ax, mode in zip(axes, MODES):
        base = float(k0[(k0["mode"] == mode) & (k0["split"] == "all")]["mape_pct"].iloc[0])
        for method, style in (("online", "o-"), ("retrain", "s--"), ("retrain + online", "^-")):
            t = table[(table["mode"] == mode) & (table["split"] == "all") & (table["method"] == method)].sort_values("k")
            if len(t):
                ax.plot([0, *t["k"]], [base, *t["mape_pct"]], style, label=method)
        ax.axhline(TARGETS[mode], color="tab:red", lw=0.8, ls=":", label=f"target at k = 2 ({TARGETS[mode]:g}%)")
        ax.axhline(float(floor[(floor["mode"] == mode) & (floor["split"] == "all")]["oracle_mape_pct"].iloc[0]), color="grey",
                   lw=0.8, ls="--", label="each job's offset known (floor)")
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xticks([0, *KS])
        ax.set_xticklabels(["0", *map(str, KS)])
        ax.set_title(mode)
        ax.set_xlabel("observed co-runs of the never-seen job (k)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("slowdown MAPE of its other sets, %")
    fig.tight_layout()
    with atomic_file(path, "wb", encoding=None) as f:
        fig.savefig(f, format="png", dpi=110)
    plt.close(fig)


TARGETS = {"timeslice": 3.0, "mps": 5.0}


def curve_table(table: pd.DataFrame, k0: pd.DataFrame, split: str) -> pd.DataFrame:
    """One row per (mode, k): MAPE with none, online, retrain, retrain + online (the README's table)."""
    out = []
    for mode in MODES:
        z = k0[(k0["mode"] == mode) & (k0["split"] == split)]
        if z.empty:
            continue
        out.append({"mode": mode, "k": 0, "jobs": int(z["jobs"].iloc[0]), "rows": int(z["rows"].iloc[0]),
                    "none": float(z["mape_pct"].iloc[0])})
        for k in KS:
            t = table[(table["mode"] == mode) & (table["split"] == split) & (table["k"] == k)].set_index("method")
            if t.empty:
                continue
            row = {"mode": mode, "k": k, "jobs": round(float(t["jobs"].iloc[0])), "rows": round(float(t["rows"].iloc[0])),
                   "none": float(t.loc["online", "none_mape_pct"])}
            for m in ("online", "retrain", "retrain + online", "online (retrain's draws)"):
                if m in t.index:
                    row[m] = float(t.loc[m, "mape_pct"])
            out.append(row)
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT / "datasets/h100"))
    ap.add_argument("--out", default=str(ROOT / "reports/h100/learning"))
    ap.add_argument("--draws", type=int, default=DRAWS, help="draws of each job's observed co-runs (online offsets)")
    ap.add_argument("--retrain-draws", type=int, default=RETRAIN_DRAWS, help="of those, how many also retrain (a fit each)")
    ap.add_argument("--no-retrain", action="store_true")
    ap.add_argument("--reuse", action="store_true", help="reuse OUT/fold_rows.csv.gz and OUT/retrain.csv.gz where present")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--repeats", default="", help="also retrain with the observed rows repeated R times (a weight), "
                                                 "comma separated Rs, on the development folds at k = 2 and 4")
    ap.add_argument("--repeat-modes", default="mps", help="the modes of --repeats")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    modes = a.modes.split(",")
    cache = out / "fold_rows.csv.gz"
    ds = None
    if a.reuse and cache.is_file():
        rows = pd.read_csv(cache)
        data_hash = str(rows["data_hash"].iloc[0]) if "data_hash" in rows else "(reused fold_rows.csv.gz)"
    else:
        ds = load_dataset(a.data)
        data_hash = ds.data_hash
        log(f"read {a.data} (hash {ds.data_hash})")
        rows = pd.concat([fold_rows(ds, m) for m in modes], ignore_index=True).assign(data_hash=ds.data_hash)
        write_csv_atomic(rows, cache, index=False, float_format="%.6g")
    rows = rows[rows["mode"].isin(modes)].reset_index(drop=True)
    rows["split"] = np.where(rows["held_out"].isin(set(locked_architectures(a.data))), "locked", "development")
    draws = draw_observations(rows, a.draws)
    log(f"{len(draws)} draw records")
    scored = [score(rows, draws, online(rows, draws), "online")]
    shipped = shipped_per_draw(scored[0], rows)
    variants = variant_table(rows, draws)
    choice = choose_online(variants, shipped)
    log(f"online update: {choice}")
    if not a.no_retrain:
        rcache = out / "retrain.csv.gz"
        few = draws[draws["draw"] < a.retrain_draws]
        if a.reuse and rcache.is_file():
            scored_r = pd.read_csv(rcache)
        else:
            if ds is None:
                ds = load_dataset(a.data)
                data_hash = ds.data_hash
            parts = []
            for mode in modes:
                sub = few[few["mode"] == mode]
                plain, both = retrain(ds, rows, few, mode)
                parts += [score(rows, sub, plain, "retrain"), score(rows, sub, both, "retrain + online")]
            scored_r = pd.concat(parts, ignore_index=True)
            write_csv_atomic(scored_r, rcache, index=False, float_format="%.6g")
        scored += [scored_r, score(rows, few, online(rows, few), "online (retrain's draws)")]
    repeat_table = None
    if a.repeats:
        rcache = out / "repeat.csv.gz"
        if a.reuse and rcache.is_file():
            scored_x = pd.read_csv(rcache)
        else:
            if ds is None:
                ds = load_dataset(a.data)
                data_hash = ds.data_hash
            dev = draw_observations(rows, a.retrain_draws, ks=(2, 4))
            dev = dev[dev["held_out"].map(rows.groupby("held_out")["split"].first()) == "development"]
            parts = []
            for mode in a.repeat_modes.split(","):
                sub = dev[dev["mode"] == mode]
                for r in map(int, a.repeats.split(",")):
                    plain, both = retrain(ds, rows, dev, mode, repeat=r)
                    parts += [score(rows, sub, plain, f"retrain, rows x{r}"), score(rows, sub, both, f"retrain, rows x{r}, + online")]
            scored_x = pd.concat(parts, ignore_index=True)
            write_csv_atomic(scored_x, rcache, index=False, float_format="%.6g")
        repeat_table = summarise(scored_x, rows)
        repeat_table = repeat_table[repeat_table["split"] == "development"]
    table = summarise(pd.concat(scored, ignore_index=True), rows)
    k0 = k0_table(rows)
    floor = oracle_floor(rows)
    write_csv_atomic(pd.concat([k0.assign(method="none"), table], ignore_index=True), out / "table.csv", index=False, float_format="%.4g")
    write_csv_atomic(variants, out / "variants.csv", index=False, float_format="%.4g")
    plot(table, k0, floor, out / "learning.png")
    write_text_atomic(out / "README.md", readme(a, out, data_hash, table, k0, floor, variants, choice, repeat_table))
    print(curve_table(table, k0, "all").round(2).to_string(index=False))
    log(f"wrote {out}")
    return 0


def readme(a, out: Path, data_hash: str, table, k0, floor, variants, choice, repeat_table=None) -> str:
    cmd = (f"PYTHONPATH=. python research/learning_curve.py --data {shown_path(a.data, ROOT)} --out {shown_path(out, ROOT)} "
           f"--draws {a.draws} --retrain-draws {a.retrain_draws}" + (" --no-retrain" if a.no_retrain else "")
           + (f" --repeats {a.repeats} --repeat-modes {a.repeat_modes}" if a.repeats else ""))
    repeat_text = ""
    if repeat_table is not None and len(repeat_table):
        base = table[(table["split"] == "development") & table["method"].isin(["retrain", "retrain + online"])
                     & table["k"].isin([2, 4]) & table["mode"].isin(repeat_table["mode"].unique())]
        both = pd.concat([base.assign(method=base["method"].str.replace("retrain", "retrain, rows x1", regex=False)
                                      .str.replace("x1 + online", "x1, + online", regex=False)), repeat_table])
        wide = both.pivot_table(index=["mode", "method"], columns="k", values="mape_pct").reset_index()
        wide.columns = [c if isinstance(c, str) else f"k = {c}" for c in wide.columns]
        on = wide[wide["method"].str.endswith("+ online")].set_index("method")["k = 2"]
        gain = float(on.get("retrain, rows x1, + online", np.nan) - on.min())
        sd = base[(base["method"] == "retrain + online") & (base["k"] == 2)]["mape_sd_over_draws"]
        sd = float(sd.iloc[0]) if len(sd) else float("nan")
        repeat_text = ("\n\n## Weighting the observed rows in a retraining\n\nThe observed windows' rows repeated R times in "
                       "the training set (a weight), development folds, the retrained columns' draws; MAPE %:\n\n"
                       + md_table(wide, digits=2) + f"\n\nNot adopted: the best weight gains {gain:.2f} points at k = 2 with "
                       f"the online offsets on top, against a standard deviation of {sd:.2f} between draws of the unweighted "
                       "figure, and it would make every observation, "
                       "a plausible but wrong one included, weigh as many times more against the measured data.\n")
    k2 = {m: table[(table["mode"] == m) & (table["split"] == "all") & (table["k"] == 2) & (table["method"] == "online")]["mape_pct"]
          for m in MODES}
    k2 = {m: float(v.iloc[0]) for m, v in k2.items() if len(v)}
    met = ", ".join(f"{m} {v:.2f}% (target {TARGETS[m]:g}%: {'met' if v <= TARGETS[m] else 'not met'})" for m, v in k2.items())
    fl = ", ".join(f"{r['mode']} {r['oracle_mape_pct']:.2f}%" for _, r in floor[floor["split"] == "all"].iterrows())
    vt = variants.groupby(["mode", "split", "prior_weight", "scale", "partner_weight"])["mape_pct"].mean().reset_index()
    vt = vt[vt["split"] == "development"].drop(columns="split")
    best = vt.sort_values("mape_pct").groupby("mode").head(5).sort_values(["mode", "mape_pct"])
    rule = "; ".join(f"{m}: best variant n₀ {c['best']['prior_weight']:g}, scale {c['best']['scale']:g}, co-runner weight "
                     f"{c['best']['partner_weight']:g} gains {c['gain_points']:.2f} points over the shipped update "
                     f"(needs > {c['needed_points']:.2f}): {'replaces it' if c['replaces'] else 'the shipped update stays'}"
                     for m, c in choice.items())
    return (
        "# How fast colopred learns a never-seen job\n\n"
        f"`{cmd}` (data hash `{data_hash}`; `research/learning_curve.py`'s docstring has the design). For each "
        "architecture held out in turn (the report's leave-arch split), each of its jobs is \"observed\" in its first k "
        "co-runs (its measured sets in a seeded random order, one window each) and scored on its other sets. `online`: "
        "the observations move the job's offset as `Predictor.observe` and the service do (shipped constants); "
        "`retrain`: the fold's model fitted again with every row of the observed windows, as `colopred train --store` "
        "does; `retrain + online`: that model with the online offsets on top (what a server holds once it loads the "
        f"retrained version). MAPE of per-job slowdown over every fold, {a.draws} draws for `online`, "
        f"{a.retrain_draws} for the retrained columns (`online (retrain's draws)`: the online figure on those same draws); "
        "`none`: the same rows without any observation.\n\n"
        f"**After two observed co-runs** (every fold): {met}.\n\n"
        + md_table(curve_table(table, k0, "all"), digits=2)
        + "\n\n![learning curve](learning.png)\n\n"
        "## Development and locked architectures\n\n"
        "The online update's constants were chosen on the development architectures (`constants.OBSERVED_PRIOR_WEIGHT`); "
        "the locked ones (`datasets/h100/locked_split.json`) were never used to choose.\n\n"
        + "\n\n".join(f"**{s}**\n\n" + md_table(curve_table(table, k0, s), digits=2) for s in ("development", "locked"))
        + "\n\n## Why two co-runs do not reach the targets, and what was tried\n\n"
        f"The floor: with each unseen job's own offset known exactly, from all of its rows (in-sample), the MAPE left is "
        f"{fl}: what remains is each row's own scatter (another partner, another machine, another window), which no "
        "per-job correction removes. The online update was compared with variants on the development folds "
        "(`variants.csv`, every draw): n₀ of 0.25–4; an interference scale (a job's predictions moved as 1 − c + "
        "(p − 1 + c)·exp(w·r_c), c = 0.5, 0.25, instead of a factor on the whole slowdown); and the job's role as a "
        "co-runner (its partners' mean log error in the observed windows added to its own with weight ±0.25: under "
        "time-slicing a job's bias and its partners' are anti-correlated, but the partners' also carry the window's "
        "noise). "
        + rule + ". The best five on the development folds, MAPE averaged over k = 1, 2, 4, 8:\n\n"
        + md_table(best.round(3)) + "\n" + repeat_text)


if __name__ == "__main__":
    raise SystemExit(main())
