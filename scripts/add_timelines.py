#!/usr/bin/env python3
"""Set the timeline fields of shipped profiles from the jobs' solo timelines.

For every ``PROFILES/<job>.json`` with a ``TIMELINES/<job>.timeline.csv.gz`` (written on the GPU by
``colopred profile timeline``; see the data card), set what ``colopred profile add-timeline`` sets
(``colopred.measurement.profiling.timeline.with_timeline``): the stream overlap of an ncu profile; for a GPM profile
also its kernel count and MPS wait. No other field changes. Profiles without a timeline are left as they are.

  python scripts/add_timelines.py [--profiles datasets/h100/profiles/ncu] [--timelines datasets/h100/timelines] [--check]
  python scripts/add_timelines.py --profiles datasets/h100/profiles/nvml --timelines datasets/h100/timelines/launch

``--check`` writes nothing and exits 1 if any profile's values differ from its timeline's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colopred.measurement.profiling.timeline import with_timeline  # noqa: E402
from colopred.profile import JobProfile  # noqa: E402
from colopred.runtime.sources import timeline_fields_of  # noqa: E402


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
        new = with_timeline(p, tl)
        changed = {f: (getattr(p, f), getattr(new, f)) for f in timeline_fields_of(p.source) if getattr(p, f) != getattr(new, f)}
        if not changed:
            continue
        stale += 1
        print(f"{p.name}: " + ", ".join(f"{k} {old} -> {v}" for k, (old, v) in changed.items()))
        if not a.check:
            new.to_json(path)
    if a.check and stale:
        sys.exit(f"{stale} profile(s) out of date: run scripts/add_timelines.py")
    print("up to date" if a.check else f"{stale} profile(s) updated")


if __name__ == "__main__":
    main()
