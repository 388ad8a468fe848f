#!/usr/bin/env python3
"""Set ``stream_overlap`` in shipped profiles from the jobs' solo timelines.

For every ``PROFILES/<job>.json`` with a ``TIMELINES/<job>.timeline.csv.gz`` (written on the GPU by
``python -m colopred.measurement.profiling.timeline JOB``; see the data card), compute
``colopred.measurement.profiling.timeline.stream_overlap`` and write it into the profile; no other field
changes. Profiles without a timeline are left as they are (overlap unknown, counted as 1).

  python scripts/add_timelines.py [--profiles datasets/h100/profiles/ncu] [--timelines datasets/h100/timelines] [--check]

``--check`` writes nothing and exits 1 if any profile's value differs from its timeline's.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colopred.measurement.profiling.timeline import overlap_of  # noqa: E402
from colopred.profile import JobProfile  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profiles", default=str(ROOT / "datasets/h100/profiles/ncu"))
    ap.add_argument("--timelines", default=str(ROOT / "datasets/h100/timelines"))
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if a profile is out of date")
    a = ap.parse_args()
    stale = 0
    for path in sorted(Path(a.profiles).glob("*.json")):
        p = JobProfile.from_json(path)
        tl = Path(a.timelines) / f"{p.name}.timeline.csv.gz"
        if not tl.exists():
            print(f"{p.name}: no timeline, left as is")
            continue
        overlap = overlap_of(tl)
        if p.stream_overlap == overlap:
            continue
        stale += 1
        print(f"{p.name}: stream_overlap {p.stream_overlap} -> {overlap}")
        if not a.check:
            replace(p, stream_overlap=overlap).to_json(path)
    if a.check and stale:
        sys.exit(f"{stale} profile(s) out of date: run scripts/add_timelines.py")
    print("up to date" if a.check else f"{stale} profile(s) updated")


if __name__ == "__main__":
    main()
