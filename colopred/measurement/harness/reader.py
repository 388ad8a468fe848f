"""Measurement records -> tidy pandas tables.

``read_windows`` gives one row per window record. ``slowdown_table`` gives one row per
(collocated window, job): solo ms, collocated ms, slowdown, and the set's δ and
normalised throughput. Each slowdown uses *nearby* solo times: the mean of the job's
solo windows just before and just after the collocated window in the same campaign,
mode and segment (drift between windows is real: several % on an H100). A segment is
a stretch of windows run on one machine without a break: it ends where the recorded
GPU UUID, host or run changes (harness 1.3 records a run id per invocation: a resume on the
same machine is a new run) or where more than SEGMENT_GAP_S pass between two windows (a
campaign resumed on another lease; records before harness 1.2 carry no UUID, and every
lease so far had the hostname "vm", so for them the pause is what tells machines apart). Solo times differ between machines by up to ~30% for small,
CPU-bound jobs, so a baseline from another segment is used only where the collocated
window's own segment has no solo window of the job (``solo_same_segment`` is then False).

The slowdown s_j = t'_j,S / t_j; δ and normalised throughput are :mod:`colopred.runtime.outcome`'s.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from ...constants import SEGMENT_GAP_S
from ...errors import InputError
from ...schema import problems
from ...runtime.outcome import delta as set_delta
from ...runtime.outcome import normalised_throughput
from .campaign import RECORDS_FILE, RETRIED_STATUSES
from .records import iter_records


def _record_files(paths) -> list[Path]:
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(p.rglob(RECORDS_FILE))
        elif p.exists():
            files.append(p)
        else:
            raise InputError(p, "no such file or directory")
    if not files:
        raise InputError(paths[0] if paths else None, f"no {RECORDS_FILE} found")
    return files


def read_windows(paths) -> pd.DataFrame:
    """One row per window record; ``campaign`` is the record file's folder name.

    ``window_id`` is ``CAMPAIGN/ID``: a record's own id is unique only within its campaign (a
    campaign that repeats another's plan, such as h100-c5br, reuses its ids), and every table
    built from this one groups windows by ``window_id``. ``record_id`` is the record's own id."""
    rows = []
    seen_campaigns: dict[str, Path] = {}
    for f in _record_files(paths):
        campaign = f.parent.name
        if campaign in seen_campaigns:
            raise InputError(f, f"campaign {campaign!r} is read twice (also {seen_campaigns[campaign]}): give each campaign once")
        seen_campaigns[campaign] = f
        first_of: dict[str, int] = {}  # window id -> its row (a window failed and run again by --resume: the last run counts)
        for seq, r in enumerate(iter_records(f)):
            try:
                row = _window_row(r, campaign, seq)
            except ValueError as e:
                raise InputError(f, f"record {seq + 1}: {e}") from None
            except (KeyError, TypeError, AttributeError) as e:
                raise InputError(f, f"record {seq + 1} is not a window record (lacks or mistypes {e.args[0] if e.args else 'a field'!s:.40})") from None
            bad = problems(r, "window_record")  # the rest of colopred/schemas/window_record.schema.json
            if bad:
                raise InputError(f, f"record {seq + 1} is not a window record ({bad[0]}; colopred/schemas/window_record.schema.json)")
            at = first_of.get(row["record_id"])
            if at is not None:
                if rows[at]["status"] not in RETRIED_STATUSES:
                    raise InputError(f, f"window {row['record_id']} is recorded twice (records {rows[at]['seq'] + 1} and {seq + 1}): "
                                        "two writers on one campaign? Remove the duplicate line")
                rows[at] = None  # superseded by its retry
            first_of[row["record_id"]] = len(rows)
            rows.append(row)
    rows = [r for r in rows if r is not None]
    df = pd.DataFrame(rows, columns=WINDOW_COLUMNS)
    df["segment"] = segments(df)
    return df


def _window_row(r: dict, campaign: str, seq: int) -> dict:
    prov = r.get("provenance") or {}
    if not isinstance(prov, dict) or not isinstance(r["jobs"], list) or not all(isinstance(j, str) for j in r["jobs"]):
        raise TypeError("jobs")
    for key in ("window_id", "mode", "kind", "status"):
        if not isinstance(r[key], str):
            raise TypeError(key)
    if r.get("results") is not None and not isinstance(r["results"], dict):
        raise TypeError("results")
    if r["status"] == "ok":
        for j in r["jobs"]:
            res = (r.get("results") or {}).get(j)
            t = res.get("mean_ms") if isinstance(res, dict) else None
            if not isinstance(t, (int, float)) or isinstance(t, bool) or not math.isfinite(t) or t <= 0:
                raise ValueError(f"window {r['window_id']} is ok but job {j}'s mean_ms is {str(t)[:20]} (must be a positive number of ms)")
    return {
        "campaign": campaign,
        "seq": seq,
        "window_id": f"{campaign}/{r['window_id']}",
        "record_id": r["window_id"],
        "mode": r["mode"],
        "kind": r["kind"],
        "jobs": tuple(r["jobs"]),
        "set": "+".join(sorted(r["jobs"])),
        "n_jobs": len(r["jobs"]),
        "repeat": r.get("repeat", 0),
        "status": r["status"],
        "reason": r.get("reason"),
        "results": r.get("results") or {},
        "gpm": r.get("gpm"),
        "window_s": r.get("window_s"),
        "wall_s": r.get("wall_s"),
        "started_at": r.get("started_at"),
        "gpu": prov.get("gpu"),
        "driver": prov.get("driver"),
        "torch": prov.get("torch"),
        "harness_version": prov.get("harness_version"),
        "host": prov.get("host"),
        "gpu_uuid": prov.get("gpu_uuid"),
        "park_idle": bool(r.get("park_idle", False)),
        "run_id": r.get("run_id"),
    }


WINDOW_COLUMNS = ["campaign", "seq", "window_id", "record_id", "mode", "kind", "jobs", "set", "n_jobs", "repeat", "status", "reason",
                  "results", "gpm", "window_s", "wall_s", "started_at", "gpu", "driver", "torch", "harness_version", "host",
                  "gpu_uuid", "park_idle", "run_id"]


def segments(windows: pd.DataFrame) -> pd.Series:
    """Segment number of each window within its campaign, in record (= execution) order: a new
    segment starts where the GPU UUID, the host or the run (``run_id``, harness 1.3: one per
    invocation, so a resume starts one) changes, or more than SEGMENT_GAP_S pass between windows
    (a missing UUID, host or run id never starts one)."""
    if windows.empty:
        return pd.Series([], dtype=int)
    t = pd.to_datetime(windows["started_at"], utc=True, errors="coerce")
    out = pd.Series(0, index=windows.index)
    for _, g in windows.groupby("campaign", sort=False):
        g = g.sort_values("seq")
        tg = t[g.index]
        gap = tg.diff().dt.total_seconds() > SEGMENT_GAP_S
        moved = pd.Series(False, index=g.index)
        for col in ("gpu_uuid", "host", "run_id"):
            v = g[col] if col in g else pd.Series(None, index=g.index)
            moved |= v.notna() & v.shift().notna() & (v != v.shift())
        out[g.index] = (gap | moved).cumsum().to_numpy()
    return out


def solo_table(windows: pd.DataFrame) -> pd.DataFrame:
    """One row per successful solo window: campaign, mode, seq, job, iteration ms, peak memory."""
    rows = []
    solo = windows[(windows["kind"] == "solo") & (windows["status"] == "ok")] if len(windows) else windows
    for w in solo.itertuples():
        job = w.jobs[0]
        r = w.results[job]
        rows.append(
            {"campaign": w.campaign, "mode": w.mode, "seq": w.seq, "segment": w.segment, "job": job, "iteration_ms": r["mean_ms"],
             "median_ms": r.get("median_ms"), "iterations": r.get("iterations"), "peak_memory_gib": r.get("peak_memory_gib"),
             "park_idle": w.park_idle, "started_at": w.started_at}
        )
    return pd.DataFrame(rows, columns=["campaign", "mode", "seq", "segment", "job", "iteration_ms", "median_ms", "iterations", "peak_memory_gib",
                                       "park_idle", "started_at"])


def park_effect(windows: pd.DataFrame) -> pd.DataFrame:
    """Solo iteration time of each (mode, job) with idle workers parked and resident, from the solo
    windows of both kinds: n and mean ms of each, and ``parked_vs_resident_pct`` = 100·(parked/resident − 1).
    Only jobs measured both ways appear. Compare like with like: windows of one machine, close in time."""
    s = solo_table(windows)
    cols = ["mode", "job", "n_parked", "parked_ms", "n_resident", "resident_ms", "parked_vs_resident_pct"]
    if s.empty:
        return pd.DataFrame(columns=cols)
    g = s.groupby(["mode", "job", "park_idle"])["iteration_ms"].agg(["count", "mean"]).unstack("park_idle")
    if True not in g["count"].columns or False not in g["count"].columns:
        return pd.DataFrame(columns=cols)
    out = pd.DataFrame({"n_parked": g["count"][True], "parked_ms": g["mean"][True],
                        "n_resident": g["count"][False], "resident_ms": g["mean"][False]}).dropna().reset_index()
    out["n_parked"] = out["n_parked"].astype(int)
    out["n_resident"] = out["n_resident"].astype(int)
    out["parked_vs_resident_pct"] = 100 * (out["parked_ms"] / out["resident_ms"] - 1)
    return out[cols]


def solo_noise(windows: pd.DataFrame) -> pd.DataFrame:
    """Spread of repeated solo windows per (campaign, mode, job): count, mean, CV (std/mean)."""
    s = solo_table(windows)
    if s.empty:
        return pd.DataFrame(columns=["campaign", "mode", "job", "n", "mean_ms", "cv"])
    g = s.groupby(["campaign", "mode", "job"])["iteration_ms"]
    out = g.agg(n="count", mean_ms="mean", std_ms="std").reset_index()
    out["cv"] = out["std_ms"] / out["mean_ms"]
    return out.drop(columns="std_ms")


def nearest_solo_windows(solos: pd.DataFrame, seq: int) -> pd.DataFrame:
    """The solo windows (rows of ``solos``, one job's, sorted by ``seq``) just before and just after
    record ``seq``: the ones a slowdown's baseline is the mean of (one where the other side has none)."""
    before = solos[solos["seq"] < seq]
    after = solos[solos["seq"] > seq]
    return pd.concat([before.iloc[-1:], after.iloc[:1]])


def _nearby_solo(solos: pd.DataFrame, seq: int, segment: int | None = None) -> tuple[float | None, bool]:
    """Mean of the solo windows just before and just after ``seq`` (either if only one exists),
    taken from ``segment`` where it has any; returns (ms, whether they came from ``segment``)."""
    if segment is not None:
        own = solos[solos["segment"] == segment]
        if len(own):
            return _nearby_solo(own, seq)[0], True
    vals = nearest_solo_windows(solos, seq)["iteration_ms"]
    return (float(np.mean(vals)) if len(vals) else None), segment is None


def slowdown_table(windows: pd.DataFrame) -> pd.DataFrame:
    """One row per (successful collocated window, job) with slowdown, δ and throughput."""
    solos = solo_table(windows)
    by_key = {k: g.sort_values("seq") for k, g in solos.groupby(["campaign", "mode", "job"])}
    noise = solo_noise(windows).set_index(["campaign", "mode", "job"])["cv"].to_dict() if len(solos) else {}
    rows = []
    colo = windows[(windows["kind"] == "colo") & (windows["status"] == "ok")]
    for w in colo.itertuples():
        per_job = []
        for job in w.jobs:
            s = by_key.get((w.campaign, w.mode, job))
            t, same = (None, False) if s is None else _nearby_solo(s, w.seq, w.segment)
            r = w.results[job]
            per_job.append((job, t, r["mean_ms"], r.get("iterations"), r.get("peak_memory_gib"), same))
        if any(t is None for _, t, *_ in per_job):
            continue  # no solo baseline for some member: cannot form a slowdown
        delta = set_delta([t for _, t, *_ in per_job], [c for _, _, c, *_ in per_job])
        thr = normalised_throughput([c / t for _, t, c, *_ in per_job])
        for job, t, c, iters, mem, same in per_job:
            rows.append(
                {"campaign": w.campaign, "window_id": w.window_id, "seq": w.seq, "segment": w.segment, "mode": w.mode, "set": w.set,
                 "n_jobs": w.n_jobs, "repeat": w.repeat, "job": job, "solo_ms": t, "colo_ms": c, "slowdown": c / t,
                 "delta": delta, "throughput": thr, "iterations": iters, "peak_memory_gib": mem,
                 "solo_cv": noise.get((w.campaign, w.mode, job), np.nan), "solo_same_segment": same, "gpu": w.gpu,
                 "gpu_uuid": w.gpu_uuid, "started_at": w.started_at}
            )
    cols = ["campaign", "window_id", "seq", "segment", "mode", "set", "n_jobs", "repeat", "job", "solo_ms", "colo_ms", "slowdown",
            "delta", "throughput", "iterations", "peak_memory_gib", "solo_cv", "solo_same_segment", "gpu", "gpu_uuid", "started_at"]
    return pd.DataFrame(rows, columns=cols)


def set_table(windows: pd.DataFrame) -> pd.DataFrame:
    """One row per collocated window, failures and infeasible sets included."""
    slow = slowdown_table(windows)
    agg = slow.groupby("window_id").agg(delta=("delta", "first"), throughput=("throughput", "first"),
                                        max_slowdown=("slowdown", "max")).reset_index()
    colo = windows[windows["kind"] == "colo"][["campaign", "window_id", "record_id", "segment", "mode", "set", "n_jobs", "repeat", "status",
                                              "reason", "gpu", "gpu_uuid", "started_at"]]
    return colo.merge(agg, on="window_id", how="left")


def segment_key(df: pd.DataFrame) -> pd.Series:
    """``CAMPAIGN#SEGMENT`` of each row (of any table with ``campaign`` and ``segment``): one stretch of
    windows on one machine and lease, across campaigns."""
    return df["campaign"] + "#" + df["segment"].astype(str)


def machine_key(df: pd.DataFrame) -> pd.Series:
    """The GPU each row was measured on: its UUID (harness 1.2 on), else its ``CAMPAIGN#SEGMENT``
    (before 1.2 a segment break is a pause of over 5 minutes: another device lease). Two segments of
    one GPU (a resumed run, another campaign) are the same machine."""
    uuid = df["gpu_uuid"] if "gpu_uuid" in df else pd.Series(None, index=df.index, dtype=object)
    return uuid.where(uuid.notna(), segment_key(df))


def remeasured_sets(sets: pd.DataFrame) -> pd.DataFrame:
    """Per (mode, set) with a successful window (``set_table`` rows): how many windows measured it,
    on how many machines (:func:`machine_key`: GPU UUIDs, or segments where no UUID was recorded) and
    on how many UTC days. ``another_lease`` is True for a set measured on two or more machines (or
    leases), ``another_day`` for one measured on two or more days."""
    ok = sets[sets["status"] == "ok"].copy()
    ok["seg_key"] = machine_key(ok)
    ok["day"] = pd.to_datetime(ok["started_at"], utc=True, errors="coerce").dt.date
    out = ok.groupby(["mode", "set"]).agg(n_jobs=("n_jobs", "first"), windows=("window_id", "count"),
                                          segments=("seg_key", "nunique"), days=("day", "nunique")).reset_index()
    out["another_lease"] = out["segments"] > 1
    out["another_day"] = out["days"] > 1
    return out


def repeat_noise(slowdowns: pd.DataFrame) -> pd.DataFrame:
    """Absolute difference of slowdowns between repeated measurements of the same (mode, set, job)."""
    g = slowdowns.groupby(["mode", "set", "job"])["slowdown"]
    out = g.agg(n="count", min="min", max="max").reset_index()
    out = out[out["n"] >= 2].copy()
    out["abs_diff"] = out["max"] - out["min"]
    return out
