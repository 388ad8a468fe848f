#!/usr/bin/env python3
"""Rebuild shipped GPM (NVML) profiles from the GPM averages each one records, with the current profiler.

For every ``PROFILES/*.json`` of source ``nvml``, rebuild the profile with
``colopred.measurement.profiling.nvml_profile.profile_from_gpm_averages`` from its own ``meta["gpm"]`` (the
time-weighted GPM counters of its timed run), measured iteration time, iteration count, peak memory, GPU and
meta, and check that every field the profile already has comes out the same (to 1e-9 relative). Only then is
the file rewritten, with any field the current profiler adds (``sm_fill_pct``: SM activity over graphics
activity). No measurement is changed: new fields are computed from the recorded counters. The fields a solo
timeline set (``runtime.sources.GPM_TIMELINE_FIELDS``, ``scripts/add_timelines.py``) are carried over as they are.

  python scripts/reprofile_nvml.py [--profiles datasets/h100/profiles/nvml] [--check]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colopred.errors import InputError  # noqa: E402
from colopred.measurement.profiling.nvml_profile import profile_from_gpm_averages  # noqa: E402
from colopred.profile import JobProfile  # noqa: E402
from colopred.runtime.sources import GPM_TIMELINE_FIELDS  # noqa: E402
from scripts.reprofile_ncu import unchanged  # noqa: E402


def rebuild(old: JobProfile, path: Path) -> JobProfile:
    gpm = old.meta.get("gpm")
    if not isinstance(gpm, dict):
        raise InputError(path, "GPM profile without its recorded counters (meta.gpm): cannot be rebuilt")
    new = profile_from_gpm_averages(gpm, name=old.name, gpu=old.gpu, iteration_ms=old.iteration_ms,
                                    iterations=old.iterations_profiled, peak_memory_gib=old.peak_memory_gib, meta=old.meta)
    new = new.with_(**{f: getattr(old, f) for f in GPM_TIMELINE_FIELDS})
    return unchanged(old, new, path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profiles", default=str(ROOT / "datasets/h100/profiles/nvml"))
    ap.add_argument("--check", action="store_true", help="only check that the shipped profiles are up to date")
    a = ap.parse_args()
    stale = 0
    try:
        for f in sorted(Path(a.profiles).glob("*.json")):
            old = JobProfile.from_json(f)
            if old.source != "nvml":
                continue
            new = rebuild(old, f)
            if new.to_dict() != old.to_dict():
                stale += 1
                if not a.check:
                    new.to_json(f)
                    print(f"rebuilt {f.name}")
    except InputError as e:
        print(f"reprofile_nvml: {e}", file=sys.stderr)
        return 1
    if a.check and stale:
        print(f"reprofile_nvml: {stale} profile(s) are not what the current profiler makes of their counters", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
