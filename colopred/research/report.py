"""The evaluation of every mode and its Markdown + PNG report (``colopred evaluate [--out DIR]``): :func:`evaluate`
runs :mod:`.evaluation`'s splits per mode, the placement study and the locked protocol, and writes the report."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..constants import (
    HOST_BOUND_BUSY,
    INTERVAL_CLASSES,
    INTERVAL_SCALE_OF_SOURCE,
    INTERVAL_SIZE_EXPONENTS,
    INTERVAL_SLOWDOWN_EXPONENTS,
    INTERVAL_UNSEEN_WIDTHS,
    SHARE_EPS_US,
    TREE_TARGET_OFFSET,
    WAIT_BUSY_GATE_EXPONENT,
)
from ..errors import InputError
from ..io import atomic_file, write_csv_atomic, write_text_atomic
from ..runtime.features import FEATURES
from .dataset import Dataset
from .evaluation import coverage_by_class, evaluate_mode, job_fit_args, new_model, solo_time_sensitivity
from .placement_study import placement_table
from .protocol import locked_architectures, protocol_table

COLS = ["slowdown_mape_pct", "delta_mae", "pays_off_agreement_pct", "partner_rank_corr", "interval_coverage_pct", "n_sets"]


def save_figure(fig, path: Path) -> None:
    """``fig`` as a PNG at ``path``, atomically."""
    with atomic_file(path, "wb") as f:
        fig.savefig(f, format="png", dpi=110)


def shown_path(path: str | Path, root: Path) -> str:
    """``path`` as a report's command line gives it: relative to the checkout ``root`` where it lies inside it."""
    p = Path(path).resolve()
    return p.relative_to(root.resolve()).as_posix() if p.is_relative_to(root.resolve()) else str(path)


def md_table(df: pd.DataFrame, digits: int | None = None) -> str:
    """A table as markdown (no optional dependency): floats to 3 significant digits, or to ``digits`` decimals; NaN
    as an empty cell."""
    fmt = ".3g" if digits is None else f".{digits}f"
    cols = list(df.columns)
    out = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for r in df.itertuples(index=False):
        out.append("| " + " | ".join(f"{v:{fmt}}" if isinstance(v, float) and not np.isnan(v) else ("" if isinstance(v, float) else str(v)) for v in r) + " |")
    return "\n".join(out)


def placement_summary(placement: pd.DataFrame) -> pd.DataFrame:
    """One row per (mode, group) of ``placement_table``: each policy's measured throughput and colopred's rank."""
    rows = []
    for (mode, sid), t in placement.groupby(["mode", "scenario_id"], sort=False):
        by = t.set_index("policy")
        rand = by.filter(like="random", axis=0)
        packed = by.loc["colopred pack (pairs unseen in training)"]
        rows.append({"mode": mode, "scenario_id": sid, "n_gpus": int(by.loc["one job per GPU", "jobs_running"]),
                     "one_per_gpu": by.loc["one job per GPU", "throughput"], "random_mean": rand["throughput"].iloc[0],
                     "colopred": packed["throughput"], "best": by.loc["best (oracle)", "throughput"],
                     "rank": f"{int(packed['rank_among_placements'])} of {int(packed['n_placements'])}",
                     "jobs": t["scenario"].iloc[0], "colopred_placement": t["colopred_placement"].iloc[0]})
    return pd.DataFrame(rows)


MODE_NAMES = {"timeslice": "time-slicing", "mps": "MPS"}
"""How the report names each sharing mode in its prose."""


def relabel_note(ds: Dataset) -> str:
    """The report's sentence on relabelled rows (``dataset.relabelled_rows``); empty where the labels are the windows'."""
    if not ds.relabelled:
        return ""
    r = ds.rows[ds.rows["relabelled"]]
    sets = r.groupby("mode")["set"].nunique()
    counts = " and ".join(f"{sets[m]} {MODE_NAMES.get(m, m)}" for m in sets.index)
    return (f" The labels of the {counts} sets re-measured under `relabel/` are the mean of their "
            f"windows in one run ({len(r)} rows, {r['windows'].mean():.1f} windows each on average), replacing their campaigns' "
            "windows in that mode; a relabelled row counts as one measurement of its set wherever repeats are compared "
            "(noise floors).")


_GROWTH_FORMULA = {"beyond_size": "((n − 1)/(m − 1))^a", "beyond_load": "max(1, B/(m − 1))^a (B the co-runners' summed busy fraction)"}


def _per_class(values: dict[str, dict[str, float]], symbol: str, neutral: float = 0.0) -> str:
    """``symbol`` = value of each mode and class that is not ``neutral``, e.g. "a = 0.5 (timeslice host-bound)"."""
    return ", ".join(f"{symbol} = {v:g} ({mode} {cls.replace('_', '-')})"
                     for mode, by_class in values.items() for cls, v in by_class.items() if v != neutral)


def interval_scaling_text(source: str) -> str:
    """How the interval's half-width varies from row to row for a profile source's models, from the constants
    ``evaluation.new_model`` gives them (``INTERVAL_SCALE_OF_SOURCE``, ``INTERVAL_SIZE_EXPONENTS``,
    ``INTERVAL_UNSEEN_WIDTHS``, ``INTERVAL_SLOWDOWN_EXPONENTS``)."""
    grow = _per_class(INTERVAL_SIZE_EXPONENTS.get(source, {}), "a")
    scale = _per_class(INTERVAL_SLOWDOWN_EXPONENTS.get(source, {}), "c")
    text = (f", widened for a set of n jobs larger than any (m) in training by {_GROWTH_FORMULA[INTERVAL_SCALE_OF_SOURCE[source]]}: {grow}"
            if grow and source in INTERVAL_SCALE_OF_SOURCE else ", not widened for sets larger than any in training")
    unseen = _per_class(INTERVAL_UNSEEN_WIDTHS.get(source, {}), "κ", neutral=1.0)
    text += f"; a job the model was not trained on, in such a set, κ times wider in log: {unseen}" if unseen else ""
    return text + (f"; each row's width scaled by p̂^c, p̂ its predicted slowdown: {scale}" if scale else "")


def write_report(out: Path, ds: Dataset, table: pd.DataFrame, preds: pd.DataFrame, models: dict,
                 placement: pd.DataFrame | None = None, sensitivity: pd.DataFrame | None = None,
                 protocol: pd.DataFrame | None = None) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    figs = []
    # Predicted vs measured, leave-architecture-out.
    modes = list(preds["mode"].unique())
    fig, axes = plt.subplots(1, len(modes), figsize=(5 * len(modes), 4.5), squeeze=False)
    for ax, mode in zip(axes[0], modes):
        d = preds[(preds["mode"] == mode) & (preds["split"] == "leave-arch")]
        for n, mk in ((2, "o"), (3, "^"), (4, "s")):
            e = d[d["n_jobs"] == n]
            ax.scatter(e["slowdown"], e["pred"], s=14, marker=mk, alpha=0.6, label=f"{n} jobs")
        lim = [0.8, max(d["slowdown"].max(), d["pred"].max()) * 1.05]
        ax.plot(lim, lim, "k--", lw=1)
        ax.set(xlabel="measured slowdown", ylabel="predicted slowdown", title=f"{mode}: leave-architecture-out", xlim=lim, ylim=lim)
        ax.legend()
    fig.tight_layout()
    save_figure(fig, out / "pred_vs_measured.png")
    figs.append("pred_vs_measured.png")
    plt.close(fig)
    # Error by set size and mode, per split.
    preds = preds.assign(ape=np.abs(preds["pred"] - preds["slowdown"]) / preds["slowdown"] * 100)
    g = preds.groupby(["split", "mode", "n_jobs"])["ape"].mean().unstack(["mode", "n_jobs"])
    fig, ax = plt.subplots(figsize=(8, 4))
    g.plot.bar(ax=ax, rot=0)
    ax.set(ylabel="MAPE of slowdown (%)", title="colopred error by split, mode and set size")
    fig.tight_layout()
    save_figure(fig, out / "error_by_size.png")
    figs.append("error_by_size.png")
    plt.close(fig)
    # Feature importance.
    fig, axes = plt.subplots(1, len(models), figsize=(5 * len(models), 5), squeeze=False)
    for ax, (mode, m) in zip(axes[0], models.items()):
        imp = m.feature_importance().head(12)[::-1]
        ax.barh(imp.index, imp.values)
        ax.set(title=f"{mode}: feature importance (gain)")
    fig.tight_layout()
    save_figure(fig, out / "feature_importance.png")
    figs.append("feature_importance.png")
    plt.close(fig)

    lines = [
        "# colopred evaluation report",
        "",
        f"Dataset hash `{ds.data_hash}`, GPU {ds.gpu}, {ds.rows['window_id'].nunique()} measured sets, "
        f"{ds.rows['job'].nunique()} jobs, {ds.rows['arch'].nunique()} architectures." + relabel_note(ds),
        "All figures are out-of-sample. Lower is better for MAPE and δ MAE; higher for agreement and rank correlation. "
        "Leave-arch: for each architecture, trained without every set holding it, tested on its jobs in those sets "
        "(each job row once, its job never seen).",
        "",
        "Model (`docs/model.md`): s = 1 − c + (s_base − 1 + c)·exp(f(x)), s_base = 1 + α·L + β_full·W·φ_j + β_small·W·(1 − φ_j): "
        "a contention baseline "
        "(L the co-runners' contention load, under MPS weighted by who holds the SMs longer (ε = "
        f"{SHARE_EPS_US:g} µs) and by their SM fill; W the MPS wait per serial launch, gated by busy_j^{WAIT_BUSY_GATE_EXPONENT:.2g}; φ_j the target's "
        "per-launch SM fill; α, β ≥ 0 by least squares) and XGBoost trees f on the target's profile and the mean/max/min "
        "of its co-runners', c = " + ", ".join(f"{v:g} ({m})" for m, v in TREE_TARGET_OFFSET.items()) +
        " for saturating targets and 1 for host-bound ones (c = 1: the trees scale the whole slowdown; c → 0: the "
        "interference alone). The row \"contention baseline (fitted)\" is that baseline alone. Intervals (stated level 90%): "
        "split-conformal, from out-of-fold log residuals of inner folds grouped by architecture (by set on the random split, "
        "whose test sets are of seen architectures)" + (
            f", one width for host-bound target jobs (busy < {HOST_BOUND_BUSY:g}) and one for the rest"
            if INTERVAL_CLASSES == "host_bound" else "") +
        interval_scaling_text(ds.profile_source) + " (`docs/model.md`, \"Intervals\").",
        "",
        *([] if ds.profile_source == "ncu" else [
            "**Profiles: NVML GPM** (`profiles/nvml`, `colopred profile nvml`): the same measured sets and slowdowns, each "
            "job described by its GPM profile instead of its ncu profile. A GPM profile has busy fraction, DRAM "
            "utilisation, occupancy, SM fill (SM activity over graphics activity), iteration time and peak memory from "
            "the counters, and the kernel count, stream overlap and MPS wait from a solo torch.profiler timeline of the "
            "job (`colopred profile add-timeline`; `timelines/launch`); no per-launch fill or per-kernel DRAM "
            "distribution, so the trees see `runtime.sources.gpm_model_features` (`docs/model.md`, \"GPM profiles\").",
            ""]),
        "Inputs: " + ("each window's jobs are described by their profiles re-timed (`JobProfile.retimed`) to the solo "
                      "iteration time its slowdowns are measured against (the job's solo windows just before and after it "
                      "on the same machine); a slowdown s = t'/t is predicted from that t, which makes its error the error "
                      "of the collocated time s·t. The section \"Solo time of the profiles\" below gives the figures with "
                      "the profiles' own times." if ds.retimed else "the profiles as they are (their own iteration times)."),
        "",
    ]
    from .evaluation import SPLIT_NEEDS, SPLITS

    skipped = [(mode, split) for mode in table["mode"].unique() for split in SPLITS
               if not ((table["mode"] == mode) & (table["split"] == split)).any()]
    if skipped:
        lines += ["Splits not evaluated, having no rows to test: " + "; ".join(
            f"{mode} {split} (it needs {SPLIT_NEEDS[split]})" for mode, split in skipped) + ".", ""]
    for mode in table["mode"].unique():
        for split in table["split"].unique():
            t = table[(table["mode"] == mode) & (table["split"] == split)]
            if t.empty:
                continue
            lines += [f"## {mode}, split: {split}", "", md_table(t[["method"] + COLS]), ""]
    if {"lo", "hi", "t_busy"} <= set(preds.columns):
        cov = coverage_by_class(preds)
        wide = cov.pivot_table(index=["mode", "split"], columns="jobs", values=["coverage_pct", "rows"], sort=False)
        wide.columns = [f"{job} {'coverage %' if what == 'coverage_pct' else 'rows'}" for what, job in wide.columns]
        order = [f"{job} {what}" for job in ("all jobs", "saturating", "host-bound") for what in ("coverage %", "rows")]
        wide = wide.astype({c: "Int64" for c in wide.columns if c.endswith(" rows")})
        lines += ["## Interval coverage by job class", "",
                  f"Share (%) of the measured slowdowns inside colopred's 90% interval on each split, over all test rows and "
                  f"per class of target job (host-bound: busy fraction of its re-timed profile below {HOST_BOUND_BUSY:g}).", "",
                  md_table(wide[[c for c in order if c in wide.columns]].reset_index(), digits=1), ""]
        write_csv_atomic(cov, out / "coverage.csv", index=False)
    if placement is not None and not placement.empty:
        lines += ["## Placement on measured data (`Predictor.pack` vs random and one job per GPU)", "",
                  "Groups of jobs whose every pair was measured, placed two per GPU; each placement is valued by the "
                  "*measured* normalised throughput of its pairs. For each group, colopred's model was trained without "
                  "any measured set made only of the group's jobs. Rank: among all placements of the group (1 = best).", ""]
        summary = placement_summary(placement)
        modes = list(summary["mode"].unique())
        fig, axes = plt.subplots(1, len(modes), figsize=(6 * len(modes), 3.8), squeeze=False)
        for ax, mode in zip(axes[0], modes):
            t = summary[summary["mode"] == mode]
            lines += [f"**{mode}**", "", md_table(t.drop(columns=["mode", "jobs", "colopred_placement"])), ""]
            lines += [f"- group {r.scenario_id}: {r.jobs}; colopred placed {r.colopred_placement}" for r in t.itertuples()] + [""]
            x = np.arange(len(t))
            for k, (col, color) in enumerate((("one_per_gpu", "#999"), ("random_mean", "#bbb"), ("colopred", "tab:blue"), ("best", "#555"))):
                ax.bar(x + (k - 1.5) * 0.2, t[col] / t["n_gpus"], 0.2, color=color, label=col.replace("_", " "))
            ax.set_xticks(x, [f"group {i}" for i in t["scenario_id"]])
            ax.set(ylabel="measured throughput per GPU", title=mode, ylim=(0.9, 1.1 * float((t["best"] / t["n_gpus"]).max())))
            ax.legend(fontsize=7, loc="upper center", ncol=4)
        fig.tight_layout()
        save_figure(fig, out / "placement.png")
        plt.close(fig)
        figs.append("placement.png")
        write_csv_atomic(placement.drop(columns=["colopred_placement"]), out / "placement.csv", index=False)
    if protocol is not None and not protocol.empty:
        lines += ["## Honest protocol: locked split, development figures, noise floors, pays-off ceiling", "",
                  "`datasets/h100/locked_split.json` (`research/lock_split.py`) locks architectures drawn by a seeded rule "
                  "stratified by family, before the interval calibration was chosen; the choices made after it were made on "
                  "the development rows (sets without a locked architecture) only (`colopred/constants.py` says which). "
                  "Development: cross-validation on the development rows. Locked: one model fitted on development rows "
                  "(pairs for pairs->triples; pairs and triples for ->quads) predicts the sets holding a locked "
                  "architecture (triples, four-job sets) once, with the two fitted baselines beside it; on leave-arch each "
                  "job by a model that never saw its architecture (a locked job's from all development rows, a development "
                  "job's beside a locked one from the development sets without its architecture). The constants chosen "
                  "before the lock (the MPS wait's γ and half-wave threshold, ε, the wait gate, the tree settings) were "
                  "chosen again on the development rows alone (`research/dev_constants.py`): every value kept but the wait gate, since 1/3; the "
                  "design (which terms and tree features the model has; for GPM profiles the SM fill from GPM counters) "
                  "was settled on every architecture before the lock, but for the fields GPM profiles take from a solo "
                  "timeline (kernel count, stream overlap, MPS wait), chosen on the development rows "
                  "(`reports/h100/gpm_timeline`). Noise "
                  "floor: the MAPE of predicting each measured slowdown by the mean of the other measurements of the same "
                  "job in the same set (same mode, any machine), over the test rows measured more than once "
                  "(`rows_repeated_pct` of them), beside colopred's MAPE on those same rows. The repeated sets are not a "
                  "random sample: host-bound jobs and cross-machine checks were repeated on purpose (data card, \"Noise\"). "
                  "Across machines a slowdown moves with the job's solo time, which the model sees, so this floor overstates "
                  "the noise of a label (`reports/h100/noise/README.md`: one GPU, one run, 1.1% for saturating jobs, 3–5% for "
                  "host-bound ones). Pays-off ceiling: how often the mean throughput of a set's other measurements agrees "
                  "with one measurement on whether the set pays off (throughput > 1), over the test sets measured more than "
                  "once, beside colopred's agreement on the same measurements: a set near break-even (two saturating jobs "
                  "time-sliced) pays off in one window and not in the next. Coverage spread "
                  "(`coverage_sd_at_locked_size_pct`): the standard deviation of a development figure's coverage over the "
                  "rows of as many target architectures as the locked split holds, drawn from the development ones "
                  "(`protocol.coverage_spread`): an unseen job's error is mostly its own, shared by all its rows, so a "
                  "coverage over a handful of architectures strays from the level by chance far more than its row count "
                  "suggests, and a locked coverage within about two of these of 90% is what calibration alone can promise.", "",
                  md_table(protocol), ""]
        write_csv_atomic(protocol, out / "protocol.csv", index=False)
    if sensitivity is not None and not sensitivity.empty:
        lines += ["## Solo time of the profiles", "",
                  "colopred (MAPE of per-job slowdown) with each job described by its profile re-timed to its solo baseline "
                  "in each window, as trained and reported above, against its profile's own iteration time (measured once, "
                  "when it was profiled, on one machine): small, CPU- or input-bound jobs run alone up to ~35% faster or "
                  "slower on one machine than on another. Re-time a profile on the machine where the job will run with "
                  "`colopred profile retime P.json --iter-ms MS`. `research/retime_check.py` also re-times to the job's "
                  "*other* solo windows on the same machine (timed at another moment).", "",
                  md_table(sensitivity), ""]
        write_csv_atomic(sensitivity, out / "solo_time.csv", index=False)
    if ds.profile_source == "nvml" and ds.root is not None and (ds.root / "profiling_cost").is_dir():
        from .profiling_cost import RUN_GAP_S, profiling_cost_table

        cost = profiling_cost_table(ds.root)
        lines += ["## Profiling cost per zoo job: ncu vs GPM", "",
                  "Seconds per job, as recorded when the profiles were taken (`colopred.research.profiling_cost`). ncu: the "
                  "solo timing run (iteration time, peak memory) and the ncu kernel-replay run with the minimal metric set, "
                  "from `profiling_cost/ncu_profiles*.log`. GPM: one run timing 50 iterations under NVML sampling; no log "
                  "times it, so its cost is the time between the write of the previous GPM profile of the same run (at most "
                  f"{RUN_GAP_S:g} s before) and its own (process start, warm-up, timed iterations); a run's first job has no "
                  "figure. `gpm_sampled_s`: the sampled window alone. `timeline_s`: the solo timeline's own process "
                  "(`timelines/launch/gpu_session*.log`), which gives the kernel count and MPS wait the GPM model reads; "
                  "`gpm_total_s` = `gpm_s` + `timeline_s` (`gpm_s` alone where the GPM run traced its own timeline, as its log says), against which `ncu_over_gpm` is taken (`colopred profile run` adds the "
                  "same traced run to an ncu profile for its stream overlap; the shipped ncu profiles took it separately, so "
                  "`ncu_total_s` leaves it out).", "",
                  md_table(cost.describe().loc[["count", "min", "50%", "mean", "max"]].rename_axis("statistic").reset_index()
                           .astype({"statistic": str})), "",
                  md_table(cost), ""]
        write_csv_atomic(cost, out / "profiling_cost.csv", index=False)
    lines += [f"![{f}]({f})" for f in figs]
    path = out / "report.md"
    write_text_atomic(path, "\n".join(lines) + "\n")
    write_csv_atomic(table, out / "metrics.csv", index=False)
    return path


def evaluate(ds: Dataset, out_dir: str | Path | None = None, modes=("timeslice", "mps"), log=lambda s: None) -> pd.DataFrame:
    """Evaluate every mode; with ``out_dir`` write ``report.md`` and PNG figures there."""
    tables, preds, models = [], [], {}
    for mode in modes:
        df = ds.for_mode(mode)
        if df.empty:
            continue
        log(f"evaluating {mode}: {df['window_id'].nunique()} sets, {len(df)} job rows")
        t, p = evaluate_mode(df, log=log, source=ds.profile_source, timeline=ds.timeline)
        tables.append(t.assign(mode=mode))
        preds.append(p.assign(mode=mode))
        models[mode] = new_model(mode, ds.profile_source, ds.timeline, calibrate=False).fit(
            df[list(FEATURES)].to_numpy(), df["slowdown"].to_numpy(), **job_fit_args(df))
    table = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()
    if table.empty:
        raise InputError(None, f"too few measurements to cross-validate {', '.join(modes)}: every split leaves nothing to train on")
    if out_dir is not None:
        log("placement on measured data")
        placement = placement_table(ds, modes)
        log("profiles not re-timed")
        sensitivity = solo_time_sensitivity(ds, modes, table) if ds.retimed else None
        protocol = None
        if ds.root is not None and (ds.root / "locked_split.json").is_file():
            log("locked split and noise floors")
            protocol = protocol_table(ds, locked_architectures(ds.root), modes, log=log)
        write_report(Path(out_dir), ds, table, pd.concat(preds, ignore_index=True), models, placement, sensitivity, protocol)
    return table
