"""Train and save the per-mode models from a dataset directory."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from ..constants import MODES
from ..profile import JobProfile
from ..runtime.features import BASE, FEATURES, profile_matrix
from ..runtime.manifest import model_stem
from ..runtime.predictor import Predictor
from .arch_groups import regrouped
from .dataset import Dataset, load_dataset
from .evaluation import evaluate_mode, job_fit_args, new_model


def experience(rows, profiles: Sequence[JobProfile] = ()) -> dict:
    """What a model trained on feature ``rows`` has seen, for the manifest: ``max_set_size`` (the largest set)
    and ``feature_ranges`` ({feature: [min, max]} over the rows, missing values left out; a job's own features
    ``t_*`` also over the training jobs' ``profiles`` as they are, since the rows hold them re-timed). The
    predictor warns where a prediction leaves them (:mod:`colopred.runtime.checks`)."""
    ranges = {}
    own = profile_matrix(list(profiles))
    for f in FEATURES:
        v = rows[f].to_numpy(dtype=float)
        if f.startswith("t_") and len(own):
            v = np.concatenate([v, own[:, BASE.index(f[2:])]])
        v = v[np.isfinite(v)]
        if len(v):
            ranges[f] = [float(v.min()), float(v.max())]
    return {"max_set_size": int(rows["n_jobs"].max()), "feature_ranges": ranges}


def manifest_dataset(data_dir: str | Path, manifest: Mapping) -> Dataset:
    """The rows a model of ``manifest`` was trained on: ``data_dir`` read with its profile source and labels
    (``relabelled``; a manifest without the key predates relabelled rows: the windows' own labels)."""
    return load_dataset(data_dir, profile_source=manifest.get("profile_source", "ncu"), relabel=bool(manifest.get("relabelled", False)))


def train(data_dir: str | Path, out: str | Path, modes: Sequence[str] = MODES, with_metrics: bool = True,
          log: Callable[[str], None] = lambda s: None, profile_source: str = "ncu", relabel: bool = True,
          groups: Mapping[str, str] | None = None) -> list[Path]:
    """Fit one model per mode on all of ``data_dir``; write ``OUT-MODE.json`` manifests and their model files
    (``OUT-MODE-nvml.json`` for ``profile_source`` ``nvml``: the jobs described by their GPM profiles,
    ``profiles/nvml``). The sets re-measured under ``data_dir/relabel/`` are trained on their relabelled
    rows (``relabel``; ``dataset.load_dataset``); the manifest records whether (``relabelled``). With ``with_metrics``
    the manifest also records the model's cross-validated figures (``evaluation.evaluate_mode``). Each job's
    architecture (the folds of its offsets and intervals, and of leave-architecture-out) is ``groups``', its profile's
    ``meta.arch``, or the part of its name before ``-b`` (``arch_groups``)."""
    log(f"reading {data_dir} ({profile_source} profiles)")
    ds = regrouped(load_dataset(data_dir, profile_source=profile_source, relabel=relabel), groups, log=log)
    if ds.relabelled:
        log(f"relabelled rows: {int(ds.rows['relabelled'].sum())} (the sets re-measured under relabel/)")
    out = Path(out)
    stem = out.name[:-5] if out.name.endswith(".json") else out.name
    written = []
    for mode in modes:
        df = ds.for_mode(mode)
        if df.empty:
            log(f"{mode}: no measurements, skipped")
            continue
        log(f"{mode}: fitting on {df['window_id'].nunique()} sets ({len(df)} job rows)")
        model = new_model(mode, profile_source, ds.timeline).fit(df[list(FEATURES)].to_numpy(), df["slowdown"].to_numpy(),
                                                                  groups=df["arch"].to_numpy(), **job_fit_args(df))
        metrics = {}
        if with_metrics:
            log(f"{mode}: cross-validating for the manifest's metrics")
            t, _ = evaluate_mode(df, log=log, source=profile_source, timeline=ds.timeline)
            t = t[t["method"].str.startswith("colopred")]
            metrics = {r["split"]: {k: r[k] for k in ("slowdown_mape_pct", "delta_mae", "pays_off_agreement_pct",
                                                        "partner_rank_corr", "interval_coverage_pct", "n_sets")}
                       for r in t.to_dict("records")}
        p = Predictor(model=model, mode=mode)
        path = p.save(out.parent / f"{model_stem(stem, mode, profile_source)}.json", profile_source=profile_source, gpu=ds.gpu, data_hash=ds.data_hash, data_dir=str(data_dir),
                      n_sets=int(df["window_id"].nunique()), n_rows=len(df), jobs=sorted(df["job"].unique()),
                      inputs=("profiles re-timed to each window's solo baseline (JobProfile.retimed): re-time a profile to the "
                              "job's solo iteration time on the target machine" if ds.retimed else "profiles as they are"),
                      relabelled=ds.relabelled,
                      metrics=metrics, **experience(df, [ds.profiles[j] for j in sorted(df["job"].unique())]))
        log(f"{mode}: wrote {path}")
        written.append(path)
    return written
