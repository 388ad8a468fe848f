#!/usr/bin/env python3
"""Which solo time should describe a job? Leave-architecture-out and pairs->triples MAPE of colopred's
slowdown model when each window's jobs are described by their profiles timed three ways:

  profile        the profile's own iteration time (the profiling session, on one machine)
  other windows  re-timed to the mean of the job's *other* solo windows on the same machine
                 (same campaign, mode and segment, leaving out the two nearest ones that form the
                 slowdown's baseline): the job timed alone on the target machine at another moment
  baseline       re-timed to the slowdown's own baseline (the solo windows just before and after
                 the collocated window): what ``load_dataset`` does

The slowdown each variant predicts is the collocated time over *its* solo time, s = t'/t, so its
MAPE is also the error of the collocated time predicted as s·t: all three predict the same
measured t' and differ only in the solo time they are given. All three run on the same windows:
those whose every member has another solo window on the same machine.

  python research/retime_check.py [--data datasets/h100] [--csv out.csv]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colopred.measurement.harness.reader import (  # noqa: E402
    nearest_solo_windows,
    read_windows,
    slowdown_table,
    solo_table,
)
from colopred.research.dataset import feature_rows, load_profiles_dir  # noqa: E402
from colopred.research.evaluation import mape_pct, out_of_sample  # noqa: E402
from colopred.research.report import md_table  # noqa: E402


def other_solo_ms(slow: pd.DataFrame, solos: pd.DataFrame) -> np.ndarray:
    """Per slowdown row: mean of the job's solo windows in the same campaign, mode and segment,
    without the nearest one before and the nearest one after the collocated window (NaN if none)."""
    groups = {k: g.sort_values("seq") for k, g in solos.groupby(["campaign", "mode", "segment", "job"])}
    out = np.full(len(slow), np.nan)
    for i, r in enumerate(slow.itertuples()):
        g = groups.get((r.campaign, r.mode, r.segment, r.job))
        if g is None:
            continue
        rest = g.drop(index=nearest_solo_windows(g, r.seq).index)["iteration_ms"]
        if len(rest):
            out[i] = rest.mean()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT / "datasets" / "h100"))
    ap.add_argument("--csv", help="also write the table here")
    a = ap.parse_args()
    data = Path(a.data)
    profiles = load_profiles_dir(data / "profiles" / "ncu")
    windows = read_windows(data / "campaigns")
    slow = slowdown_table(windows)
    slow = slow[slow.groupby("window_id")["job"].transform(lambda s: set(s) <= set(profiles)).astype(bool)]
    slow = slow.assign(other_ms=other_solo_ms(slow, solo_table(windows)))
    keep = slow.groupby("window_id")["other_ms"].transform(lambda v: v.notna().all()).astype(bool)
    print(f"{keep.sum()} of {len(slow)} (window, job) rows have another solo window on their machine", file=sys.stderr)
    slow = slow[keep].reset_index(drop=True)

    variants = {
        "profile": (slow, False),
        "other windows": (slow.assign(solo_ms=slow["other_ms"], slowdown=slow["colo_ms"] / slow["other_ms"]), True),
        "baseline": (slow, True),
    }
    rows = []
    for name, (table, retime) in variants.items():
        df = feature_rows(table, profiles, retime=retime)
        for mode, d in df.groupby("mode"):
            d = d.reset_index(drop=True)
            row = {"mode": mode, "solo time": name, "rows": len(d)}
            for kind in ("leave-arch", "pairs->triples"):
                row[f"{kind} MAPE %"] = round(mape_pct(d["slowdown"].to_numpy(), out_of_sample(d, kind)), 2)
            rows.append(row)
            print(f"  {mode:9s} {name:13s} done", file=sys.stderr, flush=True)
    table = pd.DataFrame(rows).sort_values(["mode", "solo time"], key=lambda c: c.map(
        {"profile": 0, "other windows": 1, "baseline": 2}) if c.name == "solo time" else c)
    if a.csv:
        table.to_csv(a.csv, index=False)
    print(md_table(table))


if __name__ == "__main__":
    main()
