#!/usr/bin/env python3
"""Pinned or free workers (``gpu_session.py --steps pincheck``): window-to-window spread of each job's solo time
and of each set's repeated slowdowns, by whether each worker ran on its own block of CPUs (``measure --pin-cpus``).

Each campaign folder under DIR is one run on one machine; a slowdown's baseline is its job's nearest solo windows of
the same run (``reader.slowdown_table``). Solo: coefficient of variation of a job's solo windows in one campaign.
Collocated: (max - min) / mean of a set's two windows in one campaign, per job.

  PYTHONPATH=. python research/pincheck_table.py [DIR]   # default datasets/h100/window_noise/pincheck
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colopred.measurement.harness import reader as R  # noqa: E402
from research.noise import HOST_BOUND_BUSY  # noqa: E402
from colopred.research.dataset import load_profiles_dir  # noqa: E402


def tables(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    dirs = sorted(d for d in folder.iterdir() if (d / "campaign.json").exists())
    w = R.read_windows(dirs)
    pinned = w.groupby("campaign")["pin_cpus"].first()
    solo = R.solo_noise(w)
    solo["pinned"] = solo["campaign"].map(pinned)
    sl = R.slowdown_table(w)
    rep = sl.groupby(["campaign", "set", "job"])["slowdown"].agg(n="count", lo="min", hi="max", mean="mean").reset_index()
    rep = rep[rep["n"] >= 2]
    rep["spread_pct"] = 100 * (rep["hi"] - rep["lo"]) / rep["mean"]
    rep["pinned"] = rep["campaign"].map(pinned)
    return solo, rep


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "datasets/h100/window_noise/pincheck"
    solo, rep = tables(folder)
    busy = {n: p.busy_fraction for n, p in load_profiles_dir(ROOT / "datasets/h100/profiles/ncu").items()}
    kind = lambda j: "host-bound" if busy.get(j, 1.0) < HOST_BOUND_BUSY else "other"  # noqa: E731
    solo["target"] = solo["job"].map(kind)
    rep["target"] = rep["job"].map(kind)
    print("Solo CV % per (campaign, job):")
    print((100 * solo.pivot_table(index="job", columns=["pinned", "campaign"], values="cv")).round(1).to_string())
    print("\nMedian solo CV %:")
    print((100 * solo.groupby(["target", "pinned"])["cv"].median()).round(2).unstack("pinned").to_string())
    print("\nRepeated slowdowns, (max - min) / mean % per (campaign, set, job):")
    print(rep.pivot_table(index=["set", "job"], columns=["pinned", "campaign"], values="spread_pct").round(1).to_string())
    print("\nMedian spread %:")
    print(rep.groupby(["target", "pinned"])["spread_pct"].agg(["median", "count"]).round(2).unstack("pinned").to_string())


if __name__ == "__main__":
    main()
