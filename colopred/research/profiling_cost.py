"""What profiling each job cost, ncu against GPM, from a dataset's own records (``profiling_cost/`` and profiles).

ncu (``profiling_cost/ncu_profiles*.log``, written by ``scripts/gpu_session.py`` as each job was profiled): two
processes per job, a solo timing run (iteration time and peak memory, "solo iteration ... (X s)") and the ncu
kernel-replay run with the minimal metric set ("ncu (...) took Y s"); the job's cost is their sum.

GPM (``profiles/nvml/*.json``): one process per job times 50 iterations while NVML samples the GPM counters. No
log line times it; each profile records when it was written (``meta.date``, to the second), and the GPM jobs of
one run were profiled one after another. A job's cost is the time from the previous GPM profile of the same run
(written at most ``RUN_GAP_S`` before) to its own: its process start, warm-up and timed iterations. The first job
of each run has no predecessor and no figure. ``meta.gpm_seconds`` is the sampled window alone.

Timeline (``timelines/launch/gpu_session*.log``, the output of ``scripts/gpu_session.py --steps timeline``): one
process per job recording its solo timeline ("timeline JOB: rc=0 N s"), what the traced run of ``colopred profile
nvml`` adds to a GPM profile for the kernel count and MPS wait its model reads. Where the GPM run traced its own
timeline (its log, ``profiling_cost/gpm_profiles*.log``, says "JOB: N kernels per iteration, ... from a solo
timeline"), that run's time already holds it: its GPM total is the GPM time alone.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import pandas as pd

from ..profile import JobProfile

RUN_GAP_S = 120.0
"""Two GPM profiles written further apart than this belong to different runs (a GPM job takes 10–30 s; between
runs the sessions profiled with ncu or measured collocations for minutes)."""

_TIMING = re.compile(r"^(?P<job>\S+): solo iteration .* \((?P<s>[0-9.]+) s\)$")
_NCU = re.compile(r"^(?P<job>\S+): ncu \(.*\) took (?P<s>[0-9.]+) s$")
_TIMELINE = re.compile(r"^\[\s*[0-9.]+s\] timeline (?P<job>\S+): rc=0 (?P<s>[0-9.]+) s$")
_GPM_TRACED = re.compile(r"^(?P<job>\S+): [0-9.]+ kernels per iteration, .* from a solo timeline")


def ncu_costs(cost_dir: Path) -> pd.DataFrame:
    """One row per job profiled with ncu in ``cost_dir``'s logs: ``timing_run_s``, ``ncu_run_s`` (the last of each
    where a job was profiled twice)."""
    rows: dict[str, dict[str, float]] = {}
    for log in sorted(cost_dir.glob("ncu_profiles*.log")):
        for line in log.read_text().splitlines():
            for rx, key in ((_TIMING, "timing_run_s"), (_NCU, "ncu_run_s")):
                m = rx.match(line.strip())
                if m:
                    rows.setdefault(m["job"], {})[key] = float(m["s"])
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("job")


def gpm_traced(cost_dir: Path) -> set[str]:
    """Jobs whose GPM run traced its own solo timeline, by ``cost_dir``'s GPM logs."""
    return {m["job"] for log in sorted(cost_dir.glob("gpm_profiles*.log")) for line in log.read_text().splitlines()
            if (m := _GPM_TRACED.match(line.strip()))}


def timeline_costs(tdir: Path) -> pd.DataFrame:
    """One row per job whose solo timeline ``tdir``'s session logs time: ``timeline_s`` (the last where timed twice)."""
    rows: dict[str, dict[str, float]] = {}
    for log in sorted(tdir.glob("gpu_session*.log")):
        for line in log.read_text().splitlines():
            m = _TIMELINE.match(line.strip())
            if m:
                rows[m["job"]] = {"timeline_s": float(m["s"])}
    return pd.DataFrame.from_dict(rows, orient="index", columns=["timeline_s"]).rename_axis("job")


def gpm_costs(profiles: dict[str, JobProfile]) -> pd.DataFrame:
    """One row per GPM profile: ``gpm_s`` (from the previous GPM profile of its run, NaN for a run's first) and
    ``gpm_sampled_s`` (``meta.gpm_seconds``)."""
    when = sorted((datetime.fromisoformat(str(p.meta["date"]).replace("Z", "+00:00")), n) for n, p in profiles.items()
                  if p.meta.get("date"))
    rows = {}
    for i, (t, name) in enumerate(when):
        gap = (t - when[i - 1][0]).total_seconds() if i else float("inf")
        rows[name] = {"gpm_s": gap if gap <= RUN_GAP_S else float("nan"),
                      "gpm_sampled_s": float(profiles[name].meta.get("gpm_seconds", float("nan")))}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("job")


def profiling_cost_table(root: str | Path) -> pd.DataFrame:
    """Per job of ``root/profiles/nvml``: ncu's timing, replay and total seconds beside GPM's counters, its timeline
    and their total (module doc), sorted by job. A job the logs show profiled with ncu but without a GPM profile
    (a profiling attempt left out of the data) has no row."""
    from .dataset import load_profiles_dir

    root = Path(root)
    ncu = ncu_costs(root / "profiling_cost")
    gpm = gpm_costs(load_profiles_dir(root / "profiles" / "nvml"))
    t = ncu.join(gpm, how="right").join(timeline_costs(root / "timelines" / "launch"), how="left").sort_index()
    t["ncu_total_s"] = t["timing_run_s"] + t["ncu_run_s"]
    traced = t.index.isin(list(gpm_traced(root / "profiling_cost")))
    t["gpm_total_s"] = t["gpm_s"] + t["timeline_s"].where(~traced, 0.0)
    t["ncu_over_gpm"] = t["ncu_total_s"] / t["gpm_total_s"]
    return t[["timing_run_s", "ncu_run_s", "ncu_total_s", "gpm_s", "gpm_sampled_s", "timeline_s", "gpm_total_s",
              "ncu_over_gpm"]].reset_index()
