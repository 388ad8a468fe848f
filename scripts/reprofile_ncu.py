#!/usr/bin/env python3
"""Rebuild shipped ncu profiles from their raw reports with the current profiler.

For every ``PROFILES/*.json`` of source ``ncu``, read ``REPORTS/<name>.csv.gz`` (the raw
``ncu --csv --page raw`` report the profile was made from), rebuild the profile with
``colopred.measurement.profiling.ncu_profile.profile_from_ncu`` using the profile's own measured iteration
time, iteration count, peak memory, GPU and meta, and check that every field the profile already
has comes out the same (to 1e-9 relative). Only then is the file rewritten, with any metric the
current profiler adds (e.g. ``sm_fill_pct``). No measurement is changed: new fields are computed
from the shipped raw reports.

  python scripts/reprofile_ncu.py [--profiles datasets/h100/profiles/ncu] [--reports datasets/h100/ncu_reports] [--check]
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colopred.errors import InputError  # noqa: E402
from colopred.measurement.profiling.ncu_profile import profile_from_ncu  # noqa: E402
from colopred.profile import JobProfile  # noqa: E402


def rebuild(old: JobProfile, report: Path) -> JobProfile:
    new = profile_from_ncu(report, name=old.name, iteration_ms=old.iteration_ms, iterations=old.iterations_profiled,
                           peak_memory_gib=old.peak_memory_gib, gpu=old.gpu, meta=old.meta)
    new = replace(new, stream_overlap=old.stream_overlap)  # from the solo timeline, not the ncu report (add_timelines.py)
    return unchanged(old, new, report)


def unchanged(old: JobProfile, new: JobProfile, path: Path) -> JobProfile:
    """``new``, if every field ``old`` has comes out the same in it (:func:`same`); else an error naming ``path``."""
    before, after = old.to_dict(), new.to_dict()
    changed = [k for k, v in before.items() if v is not None and not same(v, after.get(k))]
    if changed:
        raise InputError(path, f"rebuilding {old.name} changes measured fields: {', '.join(changed)}")
    return new


def same(a, b, rel: float = 1e-9) -> bool:
    """Equal JSON values, floats to ``rel`` (numpy/pandas versions differ in the last bit of a weighted sum)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], rel) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y, rel) for x, y in zip(a, b))
    if (isinstance(a, float) and isinstance(b, (int, float))) or (isinstance(b, float) and isinstance(a, (int, float))):
        return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b))
    return a == b


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profiles", default=str(ROOT / "datasets/h100/profiles/ncu"))
    ap.add_argument("--reports", default=str(ROOT / "datasets/h100/ncu_reports"))
    ap.add_argument("--check", action="store_true", help="only check that the shipped profiles are up to date")
    a = ap.parse_args()
    stale = 0
    try:
        for f in sorted(Path(a.profiles).glob("*.json")):
            old = JobProfile.from_json(f)
            new = rebuild(old, Path(a.reports) / f"{old.name}.csv.gz")
            if not same(new.to_dict(), old.to_dict()):
                stale += 1
                if not a.check:
                    new.to_json(f)
                print(f"{'stale' if a.check else 'updated'}: {f.name}")
    except InputError as e:
        print(f"reprofile_ncu: error: {e}", file=sys.stderr)
        return 1
    return 1 if (a.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
