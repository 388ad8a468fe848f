"""Train and save the per-mode models from a dataset directory."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from ..constants import MODES
from ..runtime.estimator import SlowdownModel
from ..runtime.features import FEATURES
from ..runtime.predictor import Predictor
from .dataset import load_dataset
from .evaluation import evaluate_mode


def train(data_dir: str | Path, out: str | Path, modes: Sequence[str] = MODES, with_metrics: bool = True,
          log: Callable[[str], None] = lambda s: None) -> list[Path]:
    """Fit one model per mode on all of ``data_dir``; write ``OUT-MODE.json`` manifests and their model files.
    With ``with_metrics`` the manifest also records the model's cross-validated figures (``evaluation.evaluate_mode``)."""
    log(f"reading {data_dir}")
    ds = load_dataset(data_dir)
    out = Path(out)
    stem = out.name[:-5] if out.name.endswith(".json") else out.name
    written = []
    for mode in modes:
        df = ds.for_mode(mode)
        if df.empty:
            log(f"{mode}: no measurements, skipped")
            continue
        log(f"{mode}: fitting on {df['window_id'].nunique()} sets ({len(df)} job rows)")
        model = SlowdownModel(mode=mode).fit(df[list(FEATURES)].to_numpy(), df["slowdown"].to_numpy(), groups=df["arch"].to_numpy())
        metrics = {}
        if with_metrics:
            log(f"{mode}: cross-validating for the manifest's metrics")
            t, _ = evaluate_mode(df, log=log)
            t = t[t["method"].str.startswith("colopred")]
            metrics = {r["split"]: {k: r[k] for k in ("slowdown_mape_pct", "delta_mae", "pays_off_agreement_pct",
                                                        "partner_rank_corr", "interval_coverage_pct", "n_sets")}
                       for r in t.to_dict("records")}
        p = Predictor(model=model, mode=mode)
        path = p.save(out.parent / f"{stem}-{mode}.json", gpu=ds.gpu, data_hash=ds.data_hash, data_dir=str(data_dir),
                      n_sets=int(df["window_id"].nunique()), n_rows=len(df), jobs=sorted(df["job"].unique()),
                      inputs=("profiles re-timed to each window's solo baseline (JobProfile.retimed): re-time a profile to the "
                              "job's solo iteration time on the target machine" if ds.retimed else "profiles as they are"),
                      metrics=metrics)
        log(f"{mode}: wrote {path}")
        written.append(path)
    return written
