"""Carrying a slowdown model to another GPU type: what the H100 models and profiles are worth on an H200.

Four questions, each a function returning a table (``run_study`` writes them as a report):

(a) ``zero_shot``: the shipped H100 models applied to windows measured on the new GPU, every member described
    by its H100 ncu profile *re-timed* to its solo iteration time measured beside the window on the new GPU
    (``JobProfile.retimed``: the kernels' GPU time per iteration is kept, the busy fraction follows the new
    solo time). Metrics of ``evaluation.metrics``: per-job slowdown MAPE, δ MAE, pays-off agreement.
(b) ``learning_curve``: how many measured sets of the new GPU a model needs. The new GPU's distinct sets are
    split into ``n_folds`` folds (a set's windows, repeats and other campaigns included, all in one fold); for
    each test fold, models are fitted on growing nested fractions of the other folds' sets, either on those
    alone ("new GPU only") or on them plus every H100 row whose set is not in the test fold ("H100 + new GPU").
    Test MAPE etc. on the test fold, over several seeds. Continuing the H100 model's boosting on new data is
    not offered: ``SlowdownModel`` refits its baseline coefficients and trees together, so there is no clean
    warm start.
(c) ``profile_swap``: one model, the same windows, the members described by profiles taken on one GPU or the
    other (both re-timed to the windows' solo times), on the windows whose every member has both profiles.
(d) ``same_set``: measured slowdowns of the same (mode, set, job) on both GPUs (mean over repeated windows).

Model settings are ``constants.TREE_PARAMS`` as shipped: nothing here is tuned on the new GPU's data.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from colopred.constants import MODES
from colopred.errors import InputError
from colopred.io import write_csv_atomic, write_text_atomic
from colopred.measurement.harness.reader import read_windows, slowdown_table, solo_table
from colopred.profile import JobProfile
from colopred.runtime.estimator import SlowdownModel
from colopred.runtime.features import FEATURES
from colopred.runtime.predictor import Predictor
from colopred.research.dataset import Dataset, dataset_from, load_profiles_dir
from colopred.research.evaluation import mape_pct, metrics, new_model, splits
from colopred.research.report import md_table

FRACTIONS = (0.05, 0.1, 0.2, 0.4, 0.8, 1.0)
FINDINGS = ("<!-- findings -->", "<!-- /findings -->")  # the report's hand-written part, kept when it is regenerated
METRIC_COLUMNS = ("slowdown_mape_pct", "delta_mae", "pays_off_agreement_pct")


# ------------------------------------------------------------------ loading
def fill_missing(profiles: Mapping[str, JobProfile], donors: Mapping[str, JobProfile],
                 fields: Sequence[str] = ("stream_overlap",)) -> dict[str, JobProfile]:
    """``profiles`` with each of ``fields`` that is None taken from the same job's ``donors`` profile (e.g. the
    stream overlap of a solo timeline taken on another GPU: how many streams a job's kernels run on is a
    property of its code, which is the same on both GPUs). The donor's value is recorded in ``meta``."""
    out = {}
    for name, p in profiles.items():
        d = donors.get(name)
        took = {f: getattr(d, f) for f in fields if d is not None and getattr(p, f) is None and getattr(d, f) is not None}
        out[name] = replace(p, **took, meta={**p.meta, "filled_from_other_profile": {**took, "gpu": d.gpu.name}}) if took else p
    return out


def load_windows(root: str | Path, profiles: Mapping[str, JobProfile] | str | Path, retime: bool = True) -> Dataset:
    """The collocated windows measured under ``root`` (a dataset folder with ``campaigns/``, or a campaign) as
    feature rows, each member described by its profile in ``profiles`` (a folder of profile JSON or a mapping),
    re-timed to its solo baseline in that window (``retime``). Windows with a member lacking a profile are left
    out. Unlike ``dataset.load_dataset`` the profiles may come from elsewhere, e.g. another GPU's folder."""
    root = Path(root)
    if not root.exists():
        raise InputError(root, "no such dataset or campaign folder")
    files: list[Path] = []
    if not isinstance(profiles, Mapping):
        files = sorted(Path(profiles).glob("*.json"))
        profiles = load_profiles_dir(Path(profiles))
    return dataset_from(root, profiles, files, retime=retime)


def _X(df: pd.DataFrame) -> np.ndarray:
    return df[list(FEATURES)].to_numpy()


def _fit(df: pd.DataFrame, mode: str, source: str = "ncu") -> SlowdownModel:
    """A point model of ``mode`` fitted on ``df``, its trees reading the features of ``source`` profiles (``ncu`` or
    ``nvml``: ``evaluation.new_model``)."""
    return new_model(mode, source, interval=False, calibrate=False).fit(_X(df), df["slowdown"].to_numpy())


def _metrics(df: pd.DataFrame, pred: np.ndarray) -> dict[str, float]:
    m = metrics(df, pred)
    return {k: m[k] for k in ("n_rows", "n_sets", *METRIC_COLUMNS)}


# ------------------------------------------------------------------ (a) zero-shot
def zero_shot(models: Mapping[str, Predictor | SlowdownModel], ds: Dataset,
              subsets: Mapping[str, Callable[[pd.DataFrame], np.ndarray]] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each mode's model applied to ``ds``'s rows of that mode. Returns (metrics per mode and subset, the rows
    with their prediction ``pred``). ``subsets``: name -> boolean row mask (e.g. sets never measured on the
    GPU the model was trained on); "all" is always reported."""
    tables, preds = [], []
    for mode, model in models.items():
        df = ds.for_mode(mode)
        if df.empty:
            continue
        m = model.model if isinstance(model, Predictor) else model
        pred = m.predict(_X(df))
        preds.append(df.assign(pred=pred))
        for name, mask in {"all": lambda d: np.ones(len(d), bool), **(subsets or {})}.items():
            keep = np.asarray(mask(df), bool)
            if keep.any():
                tables.append({"mode": mode, "rows": name, **_metrics(df[keep].reset_index(drop=True), pred[keep])})
    return pd.DataFrame(tables), pd.concat(preds, ignore_index=True) if preds else pd.DataFrame()


def per_job_mape(pred_rows: pd.DataFrame) -> pd.DataFrame:
    """Slowdown MAPE (%) and median signed error of each (mode, job) from rows with ``slowdown`` and ``pred``."""
    d = pred_rows.assign(ape=(pred_rows["pred"] - pred_rows["slowdown"]).abs() / pred_rows["slowdown"] * 100,
                         err=(pred_rows["pred"] / pred_rows["slowdown"] - 1) * 100)
    return (d.groupby(["mode", "job"]).agg(rows=("ape", "size"), mape_pct=("ape", "mean"), median_error_pct=("err", "median"))
            .reset_index())


# ------------------------------------------------------------------ (b) learning curve
def set_folds(sets: Iterable[str], n_folds: int, seed: int) -> list[np.ndarray]:
    """Distinct sets shuffled by ``seed`` and cut into ``n_folds`` folds."""
    s = np.array(sorted(set(sets)))
    np.random.default_rng(seed).shuffle(s)
    return np.array_split(s, n_folds)


def learning_curve(new: Dataset, old: Dataset | None = None, modes: Sequence[str] = MODES,
                   fractions: Sequence[float] = FRACTIONS, seeds: Sequence[int] = (0, 1, 2), n_folds: int = 5,
                   log: Callable[[str], None] = lambda s: None) -> pd.DataFrame:
    """Test metrics of models fitted on growing fractions of the new GPU's sets (see the module doc). One row
    per (mode, seed, fold, fraction, variant) with ``n_train_sets`` (the new GPU's sets trained on) and the
    test fold's metrics. The fractions of one (seed, fold) are nested: a larger one holds the smaller ones' sets."""
    out = []
    for mode in modes:
        df = new.for_mode(mode)
        old_df = old.for_mode(mode) if old is not None else None
        if df.empty:
            continue
        for seed in seeds:
            for k, test_sets in enumerate(set_folds(df["set"], n_folds, seed)):
                test = df["set"].isin(test_sets).to_numpy()
                te = df[test].reset_index(drop=True)
                pool = np.array(sorted(set(df.loc[~test, "set"])))
                np.random.default_rng([seed, k]).shuffle(pool)
                for frac in fractions:
                    n = max(1, round(frac * len(pool)))
                    tr = df[df["set"].isin(pool[:n])]
                    variants = {"new GPU only": tr}
                    if old_df is not None:
                        variants["H100 + new GPU"] = pd.concat([old_df[~old_df["set"].isin(test_sets)], tr], ignore_index=True)
                    for name, train_rows in variants.items():
                        pred = _fit(train_rows, mode).predict(_X(te))
                        out.append({"mode": mode, "seed": seed, "fold": k, "fraction": frac, "n_train_sets": n,
                                    "variant": name, **_metrics(te, pred)})
            log(f"  learning curve {mode} seed {seed}: done")
    return pd.DataFrame(out)


def leave_arch_out(new: Dataset, old: Dataset | None = None, models: Mapping[str, Predictor | SlowdownModel] | None = None,
                   modes: Sequence[str] = MODES) -> pd.DataFrame:
    """Jobs never measured on the new GPU: each architecture held out in turn (test = its jobs' rows in the new GPU's
    sets containing it; as ``evaluation.splits("leave-arch")``), models fitted on the new GPU's other sets alone, or on them plus
    the H100 rows whose set does not contain it, and ``models`` (zero-shot) as they are. Metrics over all held-out
    rows together, per (mode, variant)."""
    out = []
    for mode in modes:
        df = new.for_mode(mode)
        if df.empty:
            continue
        old_df = old.for_mode(mode) if old is not None else None
        preds: dict[str, np.ndarray] = {}
        for arch, tr, te in splits(df, "leave-arch"):
            variants = {"new GPU only": df.iloc[tr]}
            if old_df is not None:
                keep = ~old_df["set_archs"].map(lambda a: arch in a)
                variants["H100 + new GPU"] = pd.concat([old_df[keep], df.iloc[tr]], ignore_index=True)
            for name, train_rows in variants.items():
                preds.setdefault(name, np.full(len(df), np.nan))[te] = _fit(train_rows, mode).predict(_X(df.iloc[te]))
        if models is not None and mode in models:
            m = models[mode].model if isinstance(models[mode], Predictor) else models[mode]
            preds["H100 model, zero-shot"] = m.predict(_X(df))
        for name, p in preds.items():
            ok = ~np.isnan(p)
            out.append({"mode": mode, "variant": name, **_metrics(df[ok].reset_index(drop=True), p[ok])})
    return pd.DataFrame(out)


def curve_summary(curve: pd.DataFrame) -> pd.DataFrame:
    """Mean (and standard deviation over seeds of the fold-mean) of each metric per (mode, variant, fraction)."""
    per_seed = curve.groupby(["mode", "variant", "fraction", "seed"])[["n_train_sets", *METRIC_COLUMNS]].mean()
    g = per_seed.groupby(level=["mode", "variant", "fraction"])
    out = g.mean()
    out["mape_sd_over_seeds"] = g["slowdown_mape_pct"].std()
    return out.reset_index()


# ------------------------------------------------------------------ (c) profiles from one GPU or the other
def profile_swap(models: Mapping[str, Predictor | SlowdownModel], root: str | Path,
                 profile_sets: Mapping[str, Mapping[str, JobProfile]]) -> pd.DataFrame:
    """Each mode's model on the windows under ``root`` whose every member has a profile in each of
    ``profile_sets`` (name -> profiles), described by each set of profiles in turn (re-timed)."""
    common = set.intersection(*(set(p) for p in profile_sets.values()))
    rows = []
    for name, profiles in profile_sets.items():
        ds = load_windows(root, {j: profiles[j] for j in common})
        t, _ = zero_shot(models, ds)
        rows.append(t.assign(profiles=name))
    return pd.concat(rows, ignore_index=True)[["mode", "profiles", "n_rows", "n_sets", *METRIC_COLUMNS]]


def profile_differences(a: Mapping[str, JobProfile], b: Mapping[str, JobProfile],
                        fields: Sequence[str] = ("iteration_ms", "busy_fraction", "dram_util_pct", "achieved_occupancy_pct",
                                                 "kernels_per_iteration", "mps_wait_us", "sm_fill_pct")) -> pd.DataFrame:
    """Per job in both ``a`` and ``b``: each field's value in each and their ratio b/a."""
    rows = []
    for j in sorted(set(a) & set(b)):
        r = {"job": j}
        for f in fields:
            x, y = getattr(a[j], f), getattr(b[j], f)
            r[f"{f}_a"], r[f"{f}_b"] = x, y
            r[f"{f}_ratio"] = y / x if x and y is not None else np.nan
        rows.append(r)
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ (d) the same sets on both GPUs
def same_set(old_slow: pd.DataFrame, new_slow: pd.DataFrame) -> pd.DataFrame:
    """Measured slowdowns (``reader.slowdown_table`` rows) of the (mode, set, job)s measured on both GPUs, the mean
    over each GPU's windows: columns mode, set, n_jobs, job, slowdown_old, slowdown_new, windows_old, windows_new."""
    def agg(s: pd.DataFrame) -> pd.DataFrame:
        return s.groupby(["mode", "set", "n_jobs", "job"]).agg(slowdown=("slowdown", "mean"), windows=("slowdown", "size"))
    return agg(old_slow).reset_index().merge(agg(new_slow).reset_index(), on=["mode", "set", "n_jobs", "job"], suffixes=("_old", "_new"))


def same_set_summary(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per mode: job rows, median ratio new/old, median |relative difference| (%), Spearman and Pearson correlation."""
    rows = []
    for mode, g in pairs.groupby("mode"):
        ratio = g["slowdown_new"] / g["slowdown_old"]
        rel = (g["slowdown_new"] - g["slowdown_old"]).abs() / ((g["slowdown_new"] + g["slowdown_old"]) / 2) * 100
        rows.append({"mode": mode, "job_rows": len(g), "sets": g["set"].nunique(), "median_ratio_new_old": ratio.median(),
                     "median_abs_rel_diff_pct": rel.median(),
                     "mape_old_as_prediction_pct": mape_pct(g["slowdown_new"].to_numpy(), g["slowdown_old"].to_numpy()),
                     "spearman": g["slowdown_old"].corr(g["slowdown_new"], method="spearman"),
                     "pearson": g["slowdown_old"].corr(g["slowdown_new"])})
    return pd.DataFrame(rows)


def solo_comparison(old_windows: pd.DataFrame, new_windows: pd.DataFrame, jobs: Sequence[str]) -> pd.DataFrame:
    """Median solo iteration time (ms) of each job per mode on each GPU (``reader.solo_table``) and their ratio."""
    def med(w: pd.DataFrame) -> pd.Series:
        t = solo_table(w)
        t = t[t["job"].isin(jobs)]
        return t.groupby(["mode", "job"])["median_ms"].median()
    j = pd.concat([med(old_windows), med(new_windows)], axis=1, keys=["solo_ms_old", "solo_ms_new"]).dropna()
    return j.assign(ratio_new_old=j["solo_ms_new"] / j["solo_ms_old"]).reset_index()


# ------------------------------------------------------------------ the study and its report
def _held_out_models(ds: Dataset, exclude_sets: set[str], modes: Sequence[str], source: str = "ncu") -> dict[str, SlowdownModel]:
    """One model per mode fitted on ``ds``'s rows whose set is not in ``exclude_sets``, for ``source`` profiles."""
    return {m: _fit(ds.for_mode(m)[lambda d: ~d["set"].isin(exclude_sets)], m, source) for m in modes}


def _md(df: pd.DataFrame) -> str:
    return md_table(df, digits=2)


def run_study(h100_root: str | Path, h200_root: str | Path, out_dir: str | Path, seeds: Sequence[int] = (0, 1, 2),
              fractions: Sequence[float] = FRACTIONS, n_folds: int = 5, modes: Sequence[str] = MODES,
              models: Mapping[str, Predictor] | None = None, log: Callable[[str], None] = lambda s: None) -> dict[str, pd.DataFrame]:
    """(a)–(d) of the module doc for the H100 dataset ``h100_root`` and the new GPU's ``h200_root``; writes
    ``transfer.md``, CSV tables and PNG plots (when matplotlib is installed) into ``out_dir``. Returns the tables."""
    h100_root, h200_root, out_dir = Path(h100_root), Path(h200_root), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    models = dict(models) if models is not None else {m: Predictor.default(m) for m in modes}
    ncu100 = load_profiles_dir(h100_root / "profiles" / "ncu")
    h200 = load_windows(h200_root, ncu100)
    h100 = load_windows(h100_root, ncu100)
    jobs200 = sorted(h200.rows["job"].unique())
    h100_sets = {(m, s) for m, s in zip(h100.rows["mode"], h100.rows["set"])}
    in_h100 = {"set measured on the H100": lambda d: np.array([(m, s) in h100_sets for m, s in zip(d["mode"], d["set"])]),
               "set not measured on the H100": lambda d: np.array([(m, s) not in h100_sets for m, s in zip(d["mode"], d["set"])])}
    for n in sorted(h200.rows["n_jobs"].unique()):
        in_h100[f"{n}-job sets"] = lambda d, n=n: (d["n_jobs"] == n).to_numpy()
    t = {}
    log("(a) zero-shot")
    t["zero_shot"], pred_a = zero_shot(models, h200, in_h100)
    t["zero_shot_not_retimed"], _ = zero_shot(models, h200.with_profile_times())
    t["zero_shot_per_job"] = per_job_mape(pred_a)
    ncu200 = fill_missing(load_profiles_dir(h200_root / "profiles" / "ncu"), ncu100)
    t["zero_shot_profile_gpu"] = profile_swap(models, h200_root, {"H100 profiles": ncu100, "H200 profiles": ncu200})
    t["h100_reference"] = pd.DataFrame([{"mode": m, "split": k, **{c: v.get(c) for c in ("n_sets", *METRIC_COLUMNS)}}
                                        for m, p in models.items() for k, v in p.manifest.get("metrics", {}).items()])
    log("(b) learning curve")
    t["curve"] = learning_curve(h200, h100, modes, fractions, seeds, n_folds, log)
    t["curve_summary"] = curve_summary(t["curve"])
    t["leave_arch"] = leave_arch_out(h200, h100, models, modes)
    log("(c) profiles from one GPU or the other")
    swaps = []
    gpm100 = load_profiles_dir(h100_root / "profiles" / "nvml")
    gpm200 = load_profiles_dir(h200_root / "profiles" / "nvml")
    for source, p100, p200 in (("ncu", ncu100, ncu200), ("nvml", gpm100, gpm200)):
        train = h100 if p100 is ncu100 else load_windows(h100_root, p100)  # the ncu windows are loaded already
        common = set(p100) & set(p200)
        eval_sets = {s for s in train.rows["set"] if set(s.split("+")) <= common}
        held = _held_out_models(train, eval_sets, modes, source)  # a GPM model's trees see only what GPM profiles give
        for gpu, root in (("H100", h100_root), ("H200", h200_root)):
            sw = profile_swap(held, root, {"H100 profiles": p100, "H200 profiles": p200})
            swaps.append(sw.assign(source="gpm" if source == "nvml" else source, windows=gpu))
    t["profile_swap"] = pd.concat(swaps, ignore_index=True)[["source", "windows", "mode", "profiles", "n_rows", "n_sets", *METRIC_COLUMNS]]
    t["profile_diff_ncu"] = profile_differences(ncu100, ncu200)
    t["profile_diff_gpm"] = profile_differences(gpm100, gpm200, ("iteration_ms", "busy_fraction", "dram_util_pct", "achieved_occupancy_pct"))
    log("(d) same sets on both GPUs")
    w100, w200 = read_windows(h100_root / "campaigns"), read_windows(h200_root / "campaigns")
    t["same_set"] = same_set(slowdown_table(w100), slowdown_table(w200))
    t["same_set_summary"] = same_set_summary(t["same_set"])
    t["solo"] = solo_comparison(w100[w100["campaign"].str.startswith("h100-c13")], w200, jobs200)
    for name, df in t.items():
        write_csv_atomic(df, out_dir / f"{name}.csv", index=False)
    plots = _plots(out_dir, pred_a, t)
    report = out_dir / "transfer.md"
    text = _report(t, plots, h200, h100_root, h200_root, seeds, fractions, n_folds)
    old = report.read_text() if report.exists() else ""
    if FINDINGS[0] in old and FINDINGS[1] in old:  # keep the hand-written findings of an earlier run
        kept = old[old.index(FINDINGS[0]): old.index(FINDINGS[1]) + len(FINDINGS[1])]
        text = text.replace(FINDINGS[0], kept, 1)
    write_text_atomic(report, text)
    return t


def _plots(out_dir: Path, pred_a: pd.DataFrame, t: dict[str, pd.DataFrame]) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    made = []
    modes = sorted(pred_a["mode"].unique())
    fig, axes = plt.subplots(1, len(modes), figsize=(5 * len(modes), 4.5), squeeze=False)
    for ax, mode in zip(axes[0], modes):
        d = pred_a[pred_a["mode"] == mode]
        ax.scatter(d["slowdown"], d["pred"], s=8, alpha=0.5)
        hi = float(max(d["slowdown"].max(), d["pred"].max())) * 1.05
        ax.plot([1, hi], [1, hi], "k--", lw=1)
        ax.set(xscale="log", yscale="log", xlabel="measured slowdown on the H200", ylabel="H100 model's prediction",
               title=f"{mode}: zero-shot, H100 profiles re-timed")
    fig.tight_layout()
    fig.savefig(out_dir / "zero_shot.png", dpi=110)
    plt.close(fig)
    made.append("zero_shot.png")
    c = t["curve_summary"]
    zs = t["zero_shot"].query("rows == 'all'").set_index("mode")["slowdown_mape_pct"]
    fig, axes = plt.subplots(1, len(modes), figsize=(5 * len(modes), 4.5), squeeze=False)
    for ax, mode in zip(axes[0], modes):
        for variant, g in c[c["mode"] == mode].groupby("variant"):
            ax.errorbar(g["n_train_sets"], g["slowdown_mape_pct"], yerr=g["mape_sd_over_seeds"], marker="o", capsize=3, label=variant)
        if mode in zs:
            ax.axhline(zs[mode], color="k", ls="--", lw=1, label="H100 model, zero-shot")
        ax.set(xlabel="measured H200 sets trained on", ylabel="test slowdown MAPE (%)", title=f"{mode}: learning curve")
        ax.legend()
    fig.tight_layout()
    fig.savefig(out_dir / "learning_curve.png", dpi=110)
    plt.close(fig)
    made.append("learning_curve.png")
    s = t["same_set"]
    fig, axes = plt.subplots(1, len(modes), figsize=(5 * len(modes), 4.5), squeeze=False)
    for ax, mode in zip(axes[0], modes):
        d = s[s["mode"] == mode]
        for n, g in d.groupby("n_jobs"):
            ax.scatter(g["slowdown_old"], g["slowdown_new"], s=10, alpha=0.6, label=f"{n}-job sets")
        hi = float(max(d["slowdown_old"].max(), d["slowdown_new"].max())) * 1.05 if len(d) else 2
        ax.plot([1, hi], [1, hi], "k--", lw=1)
        ax.set(xscale="log", yscale="log", xlabel="slowdown on the H100", ylabel="slowdown on the H200", title=f"{mode}: same set, same job")
        ax.legend()
    fig.tight_layout()
    fig.savefig(out_dir / "same_set.png", dpi=110)
    plt.close(fig)
    made.append("same_set.png")
    return made


def _report(t: dict[str, pd.DataFrame], plots: list[str], h200: Dataset, h100_root: Path, h200_root: Path,
            seeds: Sequence[int], fractions: Sequence[float], n_folds: int) -> str:
    """The report's skeleton with every table; the prose findings are added by hand below the marker."""
    zs = t["zero_shot"]
    lines = [
        "# H100 → H200: what the H100 models and profiles are worth on another GPU",
        "",
        f"Generated by `research/transfer_study.py` (`research.transfer.run_study`) from `{h100_root}` and `{h200_root}`"
        f" ({h200.rows['window_id'].nunique()} H200 collocated windows, {h200.rows['set'].nunique()} distinct sets, "
        f"{len(h200.rows)} job rows). Model settings are the shipped ones (`constants.TREE_PARAMS`); no constant was tuned on "
        "any H200 data. Plots: " + (", ".join(f"`{p}`" for p in plots) if plots else "none (matplotlib not installed)") + ".",
        "",
        "<!-- findings -->",
        "",
        "## (a) The shipped H100 models on the H200, zero-shot",
        "",
        "Split: every H200 window is test data (the models never saw an H200 measurement). Each member is described by its "
        "H100 ncu profile re-timed to its solo time measured beside the window on the H200.",
        "",
        _md(zs),
        "",
        "Same, with the H100 profiles' own (H100 profiling-session) iteration times instead of re-timing:",
        "",
        _md(t["zero_shot_not_retimed"]),
        "",
        "The same shipped models on the H200 windows whose every member has an H200 ncu profile, the members described by "
        "their H100 or their H200 ncu profile (both re-timed; the H200 ones' `stream_overlap` from the H100 profile):",
        "",
        _md(t["zero_shot_profile_gpu"]),
        "",
        "The shipped models' own cross-validated figures on the H100 (their manifests), for reference:",
        "",
        _md(t["h100_reference"]),
        "",
        "Per job (all H200 windows of the mode; median error: + means over-predicted):",
        "",
        _md(t["zero_shot_per_job"].pivot(index="job", columns="mode", values=["mape_pct", "median_error_pct"]).round(1)
            .pipe(lambda d: d.set_axis([f"{a} {b}" for a, b in d.columns], axis=1)).reset_index()),
        "",
        "![zero-shot](zero_shot.png)" if "zero_shot.png" in plots else "",
        "",
        "## (b) Learning curve: how many measured H200 sets a model needs",
        "",
        f"Split: the H200's distinct sets in {n_folds} folds (a set's windows of every campaign and repeat in one fold), "
        f"seeds {list(seeds)}; for each test fold, fitted on nested fractions {list(fractions)} of the other folds' sets, "
        "either on those alone or on them plus every H100 row whose set is not in the test fold. Test metrics on the "
        "held-out fold, mean over folds, then mean over seeds (sd: over seeds). Continuing the H100 model's boosting is "
        "not offered (no clean warm start of `SlowdownModel`).",
        "",
        _md(t["curve_summary"]),
        "",
        "![learning curve](learning_curve.png)" if "learning_curve.png" in plots else "",
        "",
        "Jobs never measured on the H200 (split: leave-architecture-out over the H200 sets, as the H100 report's; all "
        "other H200 sets trained on; \"H100 + new GPU\" also trains on the H100 rows whose set lacks the held-out "
        "architecture):",
        "",
        _md(t["leave_arch"]),
        "",
        "## (c) A profile taken on one GPU, used on the other",
        "",
        "Split: for each profile source, one model per mode fitted on the H100 windows (profiles of that source, re-timed) "
        "whose set is not among the evaluated ones (sets of jobs that have both GPUs' profiles), then applied to the H100 "
        "and to the H200 windows of those jobs, the members described by their H100 or their H200 profile (both re-timed "
        "to the window's solo time). ncu: the jobs with an H200 ncu profile (their `stream_overlap` taken from the H100 "
        "profile: no H200 timeline was taken); GPM: the jobs with an H200 GPM profile.",
        "",
        _md(t["profile_swap"]),
        "",
        "ncu profiles, H200 (b) against H100 (a):",
        "",
        _md(t["profile_diff_ncu"][[c for c in t["profile_diff_ncu"].columns if c == "job" or c.endswith("_ratio")]]),
        "",
        "GPM profiles, H200 (b) against H100 (a):",
        "",
        _md(t["profile_diff_gpm"]),
        "",
        "## (d) The same sets measured on both GPUs",
        "",
        "Mean measured slowdown of each (mode, set, job) measured on both (H100: every campaign; H200: h200-c1, c1t, c1r). "
        "`mape_old_as_prediction_pct`: the H100 measurement taken as the prediction of the H200 one.",
        "",
        _md(t["same_set_summary"]),
        "",
        "Solo iteration times (median of the solo windows; H100: h100-c13, c13t, c13r, the same 16 jobs resident):",
        "",
        _md(t["solo"]),
        "",
        "![same set](same_set.png)" if "same_set.png" in plots else "",
        "",
    ]
    return "\n".join(lines)
