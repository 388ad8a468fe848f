#!/usr/bin/env python3
"""Models fixed before a campaign, on that campaign's sets: a prospective test (issue 23, an honest protocol).

Cross-validation holds out rows of data the model's design already saw. Here the shipped models of an earlier commit
(``--models-from``, read with ``git show``: manifests and tree files, checked as ``colopred`` loads them) predict the
windows of campaigns measured after that commit, every job of them profiled before, each slowdown against its solo
baseline on the same machine and segment. Prints and writes per campaign and mode: MAPE, signed mean error, interval
coverage, δ MAE, pays-off agreement, the baseline's own error, and the per-job signed error.

  PYTHONPATH=. python research/prospective_check.py --models-from b39fe8c \\
      --campaigns h100-c24,h100-c24t,h100-c25,h100-c25t --out reports/h100/prospective
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colopred.io import write_text_atomic  # noqa: E402
from colopred.research.dataset import dataset_from, load_profiles_dir  # noqa: E402
from colopred.research.evaluation import mape_pct, metrics  # noqa: E402
from colopred.research.report import md_table  # noqa: E402
from colopred.runtime.manifest import load_model, model_stem, read_manifest  # noqa: E402

MODELS_DIR = "colopred/runtime/models"


def tree_names(rev: str, folder: str) -> list[str]:
    """The names of the files in ``folder`` (relative to the repository root) at commit ``rev``."""
    return subprocess.run(["git", "-C", str(ROOT), "ls-tree", "--name-only", f"{rev}:{folder}"],
                          check=True, capture_output=True, text=True).stdout.split()


def models_at(rev: str, folder: Path) -> None:
    """The shipped model files of commit ``rev`` into ``folder``."""
    for name in tree_names(rev, MODELS_DIR):
        blob = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{MODELS_DIR}/{name}"], check=True,
                              capture_output=True).stdout
        (folder / name).write_bytes(blob)


def jobs_at(rev: str, profiles: str) -> set[str]:
    """The jobs whose profiles the dataset of commit ``rev`` held: those its shipped models could have trained on."""
    return {Path(n).stem for n in tree_names(rev, f"datasets/h100/profiles/{profiles}")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models-from", required=True, help="git revision whose shipped models predict")
    ap.add_argument("--campaigns", required=True, help="campaign folders under --campaigns-dir, comma-separated")
    ap.add_argument("--data", default=str(ROOT / "datasets/h100"))
    ap.add_argument("--campaigns-dir", default=None,
                    help="folder holding the campaigns (default DATA/campaigns; DATA/prospective holds those never trained on)")
    ap.add_argument("--profiles", default="ncu", choices=("ncu", "nvml"))
    ap.add_argument("--extra-profiles", default=None,
                    help="another folder of profiles of the same source, read beside DATA/profiles/PROFILES (a job in both: refused)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    data = Path(a.data)
    camp_root = Path(a.campaigns_dir) if a.campaigns_dir else data / "campaigns"
    pdirs = [data / "profiles" / a.profiles] + ([Path(a.extra_profiles)] if a.extra_profiles else [])
    profiles = {}
    for pdir in pdirs:
        more = load_profiles_dir(pdir)
        if set(more) & set(profiles):
            raise SystemExit(f"{pdir}: profiles of {sorted(set(more) & set(profiles))} are also in {pdirs[0]}")
        profiles.update(more)
    profile_files = sorted(f for pdir in pdirs for f in pdir.glob("*.json"))
    summary, per_job = [], []
    with tempfile.TemporaryDirectory() as tmp:
        models_at(a.models_from, Path(tmp))
        for camp in a.campaigns.split(","):
            ds = dataset_from(camp_root / camp, profiles, profile_files, profile_source=a.profiles)
            for mode, df in ds.rows.groupby("mode"):
                path = Path(tmp) / f"{model_stem('h100', mode, a.profiles)}.json"
                model, manifest = load_model(path)
                # the jobs the model trained on (a manifest before version 10 does not say: its dataset's profiles)
                known = set(manifest.get("jobs") or jobs_at(a.models_from, a.profiles))
                pred, interval = model.predict_with_interval(df, jobs=df["job"].to_numpy())
                base = model.baseline(df)
                y = df["slowdown"].to_numpy()
                err = 100 * (pred / y - 1)
                scores = metrics(df, pred, interval)
                new = ~df["job"].isin(known).to_numpy()
                summary.append({
                    "campaign": camp, "mode": mode, "n_jobs": "/".join(map(str, sorted(df["n_jobs"].unique()))),
                    "sets": df["set"].nunique(), "rows": len(df), "model_data_hash": read_manifest(path)["data_hash"],
                    "slowdown_mape_pct": round(scores["slowdown_mape_pct"], 2), "signed_error_pct": round(float(err.mean()), 2),
                    "interval_coverage_pct": round(scores["interval_coverage_pct"], 1),
                    "delta_mae": round(scores["delta_mae"], 4),
                    "pays_off_agreement_pct": round(scores["pays_off_agreement_pct"], 1),
                    "baseline_mape_pct": round(mape_pct(y, base), 2),
                    "baseline_signed_error_pct": round(float(100 * (base / y - 1).mean()), 2),
                    "new_jobs": int(df.loc[new, "job"].nunique()),
                    "new_job_rows_mape_pct": round(mape_pct(y[new], pred[new]), 2) if new.any() else None,
                })
                jobs = pd.DataFrame({"job": df["job"].to_numpy(), "err": err}).groupby("job")["err"]
                per_job += [{"campaign": camp, "mode": mode, "job": j, "rows": len(e), "new_to_models": j not in known,
                             "signed_error_pct": round(float(e.mean()), 1)} for j, e in jobs]
    table = pd.DataFrame(summary)
    print(md_table(table))
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        table.to_csv(out / "prospective.csv", index=False)
        pd.DataFrame(per_job).to_csv(out / "per_job.csv", index=False)
        write_text_atomic(out / "README.md", (
            f"# Prospective check: the models of {a.models_from} on campaigns measured after them\n\n"
            f"`PYTHONPATH=. python research/prospective_check.py --models-from {a.models_from} --campaigns {a.campaigns}"
            + (f" --data {a.data}" if Path(a.data).resolve() != (ROOT / "datasets/h100").resolve() else "")
            + (f" --campaigns-dir {a.campaigns_dir}" if a.campaigns_dir else "")
            + (f" --extra-profiles {a.extra_profiles}" if a.extra_profiles else "")
            + f" --profiles {a.profiles} --out {a.out}`\n\n"
            + ("Every job of these campaigns was profiled and measured before; the sets were not. "
               if not table["new_jobs"].any() else
               "The sets were never measured before; `new_jobs` of their jobs (`new_to_models` in `per_job.csv`) were "
               "not in the dataset the models were trained on, and `new_job_rows_mape_pct` scores those jobs' own rows. ")
            + "MAPE of the per-job "
            "slowdown, signed mean error (prediction over measurement), coverage of the shipped 90% interval, δ MAE, "
            "pays-off agreement, and the contention baseline's own error. Per-job signed errors in `per_job.csv`.\n\n" + md_table(table) + "\n"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
