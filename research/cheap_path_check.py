#!/usr/bin/env python3
"""Cheap-path check on one machine: GPM profiles (counters and solo timeline) taken there, then sets measured there.

For a folder holding ``JOB.json`` GPM profiles (``colopred profile nvml --zoo JOB``) and a campaign's
``windows.jsonl``/``campaign.json`` (``colopred measure``) from the same machine, the per-job slowdown MAPE of the
shipped models by mode and set size, then by job: from the GPM profiles as taken, from them re-timed to each window's solo times
(as the evaluation report does), and from the shipped ncu profiles (another machine) re-timed the same way.

  PYTHONPATH=. python research/cheap_path_check.py datasets/h100/gpm_timeline_check/c2
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colopred.measurement.harness.reader import read_windows, slowdown_table  # noqa: E402
from colopred.profile import JobProfile  # noqa: E402
from colopred.runtime.predictor import Predictor  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder")
    ap.add_argument("--ncu", default=str(ROOT / "datasets" / "h100" / "profiles" / "ncu"))
    a = ap.parse_args()
    root = Path(a.folder)
    slow = slowdown_table(read_windows(root))
    gpm = {p.stem: JobProfile.from_json(p) for p in root.glob("*.json") if p.name != "campaign.json"}
    ncu = {j: JobProfile.from_json(Path(a.ncu) / f"{j}.json") for j in gpm}
    rows = []
    warnings.simplefilter("ignore")  # the GPM model's MPS note: the figures below are the point
    for (mode, _), g in slow.groupby(["mode", "set"]):
        for how, profiles, retime in (("GPM, as taken", gpm, False), ("GPM, re-timed", gpm, True),
                                      ("ncu (shipped), re-timed", ncu, True)):
            jobs = [profiles[j] for j in g["job"]]
            if retime:
                jobs = [p.retimed(t) for p, t in zip(jobs, g["solo_ms"])]
            pred = Predictor.for_profiles(mode, jobs).predict(jobs).slowdown
            rows += [{"mode": mode, "profiles": how, "set size": len(g), "job": j, "ape_pct": 100 * abs(p / s - 1)}
                     for j, p, s in zip(g["job"], pred, g["slowdown"])]
    d = pd.DataFrame(rows)
    t = d.pivot_table(index=["mode", "profiles"], columns="set size", values="ape_pct", aggfunc="mean")
    t["all"] = d.groupby(["mode", "profiles"])["ape_pct"].mean()
    t["rows"] = d.groupby(["mode", "profiles"])["ape_pct"].size()
    print(t.round(2).to_string())
    print("\nBy job (MAPE %, all set sizes):")
    print(d.pivot_table(index=["mode", "profiles"], columns="job", values="ape_pct", aggfunc="mean").round(2).to_string())


if __name__ == "__main__":
    main()
