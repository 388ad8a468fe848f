#!/usr/bin/env python3
"""GPM profiles completed by a torch.profiler timeline (issue 23, item 4: the cheap-profile model).

A GPM profile has no kernel count, no MPS wait and no per-launch SM fill: the GPM model cannot tell a job of a few
long kernels from one of many short ones, which is what MPS contention turns on. A solo torch.profiler timeline with
the kernels' launch configurations (``datasets/h100/timelines/launch``; no counters, no elevated rights, ~15 s a job)
gives them (``colopred.measurement.profiling.timeline.timeline_fields``). This study

1. compares each field from the timeline with the same field of the job's ncu profile (``agreement.csv``);
2. trains the GPM model with the GPM profiles completed by those fields, on three protocols (cross-validation on the
   development architectures, on every architecture, and the locked split: fitted on development rows, tested on
   locked ones), both modes, every split of ``protocol.LOCKED_KINDS`` (``variants.csv``).

  PYTHONPATH=. python research/gpm_timeline_study.py [--data datasets/h100] [--out reports/h100/gpm_timeline]   # ~2 min
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colopred.constants import MODES  # noqa: E402
from colopred.io import write_text_atomic  # noqa: E402
from colopred.measurement.profiling.timeline import read_timeline, timeline_fields  # noqa: E402
from colopred.research.dataset import dataset_from, load_profiles_dir  # noqa: E402
from colopred.research.evaluation import mape_pct, splits  # noqa: E402
from colopred.research.protocol import LOCKED_KINDS, is_locked, locked_architectures  # noqa: E402
from colopred.research.report import md_table  # noqa: E402
from colopred.runtime.estimator import SlowdownModel  # noqa: E402
from colopred.runtime.features import FEATURES, model_features  # noqa: E402
from colopred.runtime.sources import GPM_TIMELINE_FIELDS, gpm_model_features  # noqa: E402

COMPARED = ("kernels_per_iteration", "stream_overlap", "sm_fill_pct", "launch_fill_pct", "mps_wait_us")


def _without(*lacks: str):
    return lambda mode: tuple(f for f in model_features(mode) if not f.endswith(lacks))


# name -> (timeline fields written into the GPM profile, the trees' features). No variant reads dram_util_p25: it
# needs each kernel's DRAM share, which only ncu measures.
VARIANTS = {
    "GPM counters alone": ((), lambda mode: gpm_model_features(mode, timeline=False)),
    "+ kernels, overlap": (("kernels_per_iteration", "stream_overlap"), _without("busy_mps_wait_us", "dram_util_p25", "launch_fill")),
    "+ kernels, overlap, MPS wait (shipped)": (GPM_TIMELINE_FIELDS, gpm_model_features),
    "+ kernels, overlap, MPS wait, launch fill": (("kernels_per_iteration", "stream_overlap", "mps_wait_us", "launch_fill_pct"),
                                                  _without("dram_util_p25")),
}


def load_fields(tdir: Path) -> pd.DataFrame:
    rows = {}
    for meta_path in sorted(tdir.glob("*.timeline.json")):
        meta = json.loads(meta_path.read_text())
        tl = read_timeline(meta_path.with_name(meta_path.name.replace(".json", ".csv.gz")))
        rows[meta["job"]] = timeline_fields(tl, meta["iterations"], meta.get("device_properties"))
    return pd.DataFrame.from_dict(rows, orient="index")


def agreement(fields: pd.DataFrame, ncu: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    per_job = pd.DataFrame({f"{f} {src}": [getattr(ncu[j], f) if src == "ncu" else fields.at[j, f] for j in fields.index]
                            for f in COMPARED for src in ("timeline", "ncu")}, index=fields.index)
    summary = []
    for f in COMPARED:
        a, b = per_job[f"{f} timeline"].astype(float), per_job[f"{f} ncu"].astype(float)
        rel = 100 * np.abs(a / b - 1)
        summary.append({"field": f, "jobs": len(a), "correlation": float(np.corrcoef(a, b)[0, 1]),
                        "median_rel_diff_pct": float(rel.median()), "max_rel_diff_pct": float(rel.max()),
                        "worst_job": str(rel.idxmax())})
    return per_job, pd.DataFrame(summary)


def _fit_predict(mode, feats, X, s, tr, te, seeds: int = 1) -> np.ndarray:
    """The mean over ``seeds`` tree seeds (0, 1, ...) of the predictions of ``te``."""
    return np.mean([SlowdownModel(mode=mode, features=feats, params={"random_state": k}, interval=False, calibrate=False)
                    .fit(X[tr], s[tr]).predict(X[te]) for k in range(seeds)], axis=0)


def figures(df: pd.DataFrame, mode: str, feats: tuple[str, ...], locked: list[str], seeds: int = 1,
            protocols: tuple[str, ...] = ("development CV", "all architectures CV", "locked")) -> list[dict]:
    X, s = df[list(FEATURES)].to_numpy(), df["slowdown"].to_numpy()
    lk = is_locked(df, locked)
    n_jobs = df["n_jobs"].to_numpy()
    out = []
    for protocol, rows in (("development CV", np.flatnonzero(~lk)), ("all architectures CV", np.arange(len(df)))):
        if protocol not in protocols:
            continue
        sub = df.iloc[rows].reset_index(drop=True)
        for kind in LOCKED_KINDS:
            p = np.full(len(sub), np.nan)
            for _, tr, te in splits(sub, kind):
                p[te] = _fit_predict(mode, feats, X[rows], s[rows], tr, te, seeds)
            ok = ~np.isnan(p)
            out.append({"protocol": protocol, "split": kind, "rows": int(ok.sum()), "mape_pct": mape_pct(s[rows][ok], p[ok])})
    for kind, (train_size, test_size) in LOCKED_KINDS.items() if "locked" in protocols else ():
        tr, te = np.flatnonzero(~lk & train_size(n_jobs)), np.flatnonzero(lk & test_size(n_jobs))
        out.append({"protocol": "locked", "split": kind, "rows": len(te), "mape_pct": mape_pct(s[te], _fit_predict(mode, feats, X, s, tr, te, seeds))})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT / "datasets" / "h100"))
    ap.add_argument("--out", default=str(ROOT / "reports" / "h100" / "gpm_timeline"))
    ap.add_argument("--seeds", type=int, default=1, help="predictions averaged over this many tree seeds")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--variants", default=None, help="comma-separated indices into VARIANTS (default: all)")
    ap.add_argument("--protocols", default="development CV,all architectures CV,locked")
    a = ap.parse_args()
    root, out = Path(a.data), Path(a.out)
    variants = dict(list(VARIANTS.items())[int(i)] for i in a.variants.split(",")) if a.variants else VARIANTS
    protocols = tuple(a.protocols.split(","))
    out.mkdir(parents=True, exist_ok=True)
    tdir = root / "timelines" / "launch"
    fields = load_fields(tdir)
    gpm, ncu = load_profiles_dir(root / "profiles" / "nvml"), load_profiles_dir(root / "profiles" / "ncu")
    per_job, summary = agreement(fields.loc[[j for j in fields.index if j in ncu]], ncu)
    per_job.to_csv(out / "agreement_by_job.csv", float_format="%.4g")
    locked = locked_architectures(root)
    files = sorted((root / "profiles" / "nvml").glob("*.json")) + sorted(tdir.glob("*.timeline.*"))
    rows = []
    for name, (written, feats) in variants.items():
        # from counters alone (the shipped profiles carry the timeline fields), then the variant's fields
        prof = {j: p.with_(**dict.fromkeys(GPM_TIMELINE_FIELDS)).with_(**{f: float(fields.at[j, f]) for f in written})
                for j, p in gpm.items() if j in fields.index}
        ds = dataset_from(root, prof, files, profile_source="nvml")
        for mode in a.modes.split(","):
            for r in figures(ds.for_mode(mode), mode, feats(mode), locked, a.seeds, protocols):
                rows.append({"mode": mode, "variant": name, **r})
                print(rows[-1], flush=True)
    table = pd.DataFrame(rows)
    table.to_csv(out / "variants.csv", index=False, float_format="%.4g")
    wide = table.pivot_table(index=["mode", "protocol", "split"], columns="variant", values="mape_pct", sort=False)[list(variants)]
    write_text_atomic(out / "README.md", "\n".join([
        "# GPM profiles completed by a solo timeline (issue 23, item 4)",
        "",
        f"Dataset `{root.name}` (hash `{ds.data_hash}`), timelines `{tdir.relative_to(root)}`. "
        "`PYTHONPATH=. python research/gpm_timeline_study.py` rewrites this folder (~2 min on 2 cores).",
        "",
        "## Fields from the timeline against the job's ncu profile",
        "",
        "Relative differences in %; `agreement_by_job.csv` has every job.",
        "",
        md_table(summary),
        "",
        "## GPM model, per-job slowdown MAPE (%)",
        "",
        "One tree seed. Development CV: cross-validation on the sets without a locked architecture (what a choice may "
        "be made on); locked: fitted on development rows, tested on the locked sets once.",
        "",
        md_table(wide.reset_index()),
        "",
    ]))


if __name__ == "__main__":
    main()
