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
window's own segment has no solo window of the job (``solo_same_segment`` is then False), and then only one of
the same GPU (same UUID; where none was recorded, the same shard of a multi-GPU campaign; before harness 1.2,
any).

A campaign over several GPUs (``sharding``) keeps one record file per GPU, ``windows.shardK.jsonl``, in its
folder; they are read as one campaign, file after file, each shard's records a segment (or several) of its own.

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
from ...profile import job_of
from ...schema import problems
from ...runtime.outcome import delta as set_delta
from ...runtime.outcome import normalised_throughput
from .campaign import RETRIED_STATUSES
from .records import iter_records
from .sharding import RECORDS_FILE, SHARD_FILE_PREFIX, shard_of_file


def campaign_record_files(folder: Path) -> list[Path]:
    """Record files of the campaigns in ``folder`` and below: ``windows.jsonl``, and ``windows.shardK.jsonl`` of
    campaigns over several GPUs (each folder's: the one-GPU file first, then shard by shard)."""
    files = list(folder.rglob(RECORDS_FILE)) + [f for f in folder.rglob(SHARD_FILE_PREFIX + "*.jsonl") if shard_of_file(f.name) is not None]
    return sorted(files, key=lambda f: (str(f.parent), -1 if shard_of_file(f.name) is None else shard_of_file(f.name)))


def _record_files(paths) -> list[Path]:
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files += campaign_record_files(p)
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
    seen_files: set[Path] = set()
    first_of: dict[str, int] = {}  # CAMPAIGN/ID -> its row (a window failed and run again by --resume: the last run counts)
    next_seq: dict[str, int] = {}  # a campaign's records are numbered on across its files (one per GPU)
    for f in _record_files(paths):
        campaign = f.parent.name
        at_dir = seen_campaigns.get(campaign)
        if f.resolve() in seen_files or (at_dir is not None and at_dir.parent.resolve() != f.parent.resolve()):
            raise InputError(f, f"campaign {campaign!r} is read twice (also {at_dir}): give each campaign once")
        seen_campaigns.setdefault(campaign, f)
        seen_files.add(f.resolve())
        seq0 = next_seq.get(campaign, 0)
        for seq, r in enumerate(iter_records(f), seq0):
            next_seq[campaign] = seq + 1
            try:
                row = _window_row(r, campaign, seq)
            except ValueError as e:
                raise InputError(f, f"record {seq - seq0 + 1}: {e}") from None
            except (KeyError, TypeError, AttributeError) as e:
                raise InputError(f, f"record {seq - seq0 + 1} is not a window record (lacks or mistypes {e.args[0] if e.args else 'a field'!s:.40})") from None
            bad = problems(r, "window_record")  # the rest of colopred/schemas/window_record.schema.json
            if bad:
                raise InputError(f, f"record {seq - seq0 + 1} is not a window record ({bad[0]}; colopred/schemas/window_record.schema.json)")
            at = first_of.get(row["window_id"])
            if at is not None:
                if rows[at]["status"] not in RETRIED_STATUSES:
                    raise InputError(f, f"window {row['record_id']} is recorded twice (records {rows[at]['seq'] + 1} and {seq + 1} of "
                                        f"campaign {campaign}): two writers on one campaign? Remove the duplicate line")
                rows[at] = None  # superseded by its retry
            first_of[row["window_id"]] = len(rows)
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
    for key in ("shard", "gpu_index"):
        if r.get(key) is not None and (not isinstance(r[key], int) or isinstance(r[key], bool) or r[key] < 0):
            raise TypeError(key)
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
        "pin_cpus": bool(r.get("pin_cpus", False)),
        "run_id": r.get("run_id"),
        "shard": r.get("shard"),
        "gpu_index": r.get("gpu_index"),
    }


WINDOW_COLUMNS = ["campaign", "seq", "window_id", "record_id", "mode", "kind", "jobs", "set", "n_jobs", "repeat", "status", "reason",
                  "results", "gpm", "window_s", "wall_s", "started_at", "gpu", "driver", "torch", "harness_version", "host",
                  "gpu_uuid", "park_idle", "pin_cpus", "run_id", "shard", "gpu_index"]


def segments(windows: pd.DataFrame) -> pd.Series:
    """Segment number of each window within its campaign, in record (= execution) order: a new
    segment starts where the GPU UUID, the host, the run (``run_id``, harness 1.3: one per
    invocation, so a resume starts one) or the shard (harness 1.4) changes, or more than SEGMENT_GAP_S
    pass between windows (a missing UUID, host, run id or shard never starts one)."""
    if windows.empty:
        return pd.Series([], dtype=int)
    t = pd.to_datetime(windows["started_at"], utc=True, errors="coerce")
    out = pd.Series(0, index=windows.index)
    for _, g in windows.groupby("campaign", sort=False):
        g = g.sort_values("seq")
        tg = t[g.index]
        gap = tg.diff().dt.total_seconds() > SEGMENT_GAP_S
        moved = pd.Series(False, index=g.index)
        for col in ("gpu_uuid", "host", "run_id", "shard"):
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
             "park_idle": w.park_idle, "started_at": w.started_at, "gpu_uuid": w.gpu_uuid, "shard": w.shard}
        )
    return pd.DataFrame(rows, columns=["campaign", "mode", "seq", "segment", "job", "iteration_ms", "median_ms", "iterations", "peak_memory_gib",
                                       "park_idle", "started_at", "gpu_uuid", "shard"])


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


def same_gpu(solos: pd.DataFrame, gpu_uuid, shard) -> pd.DataFrame:
    """The solo windows (``solo_table`` rows) of the GPU a window ran on: its UUID where recorded, else its shard
    (a multi-GPU campaign without NVML), else all of them (records before harness 1.2 name no GPU)."""
    if isinstance(gpu_uuid, str):
        return solos[solos["gpu_uuid"] == gpu_uuid]
    if shard is not None and not pd.isna(shard):
        return solos[solos["shard"] == shard]
    return solos


def _nearby_solo(solos: pd.DataFrame, seq: int, segment: int | None = None) -> tuple[float | None, bool]:
    """Mean of the solo windows just before and just after ``seq`` (either if only one exists),
    taken from ``segment`` where it has any; returns (ms, whether they came from ``segment``)."""
    if segment is not None:
        own = solos[solos["segment"] == segment]
        if len(own):
            return _nearby_solo(own, seq)[0], True
    vals = nearest_solo_windows(solos, seq)["iteration_ms"]
    return (float(np.mean(vals)) if len(vals) else None), segment is None


SLOWDOWN_COLUMNS = ["campaign", "window_id", "seq", "segment", "mode", "set", "n_jobs", "repeat", "job", "instance", "solo_ms", "colo_ms",
                    "slowdown", "delta", "throughput", "iterations", "peak_memory_gib", "solo_cv", "solo_same_segment", "gpu",
                    "gpu_uuid", "started_at"]
"""The columns of ``slowdown_table``, in order."""


class _JobSolos:
    """One (campaign, mode, job)'s solo windows (``solo_table`` rows sorted by ``seq``) as arrays: the baselines of
    many windows at once, as :func:`same_gpu` and :func:`_nearby_solo` take them from the table."""

    def __init__(self, solos: pd.DataFrame):
        self.seq = solos["seq"].to_numpy()
        self.ms = solos["iteration_ms"].to_numpy()
        self.segment = solos["segment"].to_numpy()
        self.gpu_uuid = solos["gpu_uuid"].to_numpy()
        self.shard = solos["shard"].to_numpy()

    def baseline(self, seq: int, gpu_uuid, shard, segment: int | None) -> tuple[float | None, bool]:
        """``_nearby_solo(same_gpu(solos, gpu_uuid, shard), seq, segment)``."""
        if isinstance(gpu_uuid, str):
            on_gpu = self.gpu_uuid == gpu_uuid
        elif shard is not None and not pd.isna(shard):
            on_gpu = self.shard == shard
        else:
            on_gpu = np.ones(len(self.seq), dtype=bool)
        if segment is not None:
            own = on_gpu & (self.segment == segment)
            if own.any():
                return self._nearest_mean(own, seq), True
        return self._nearest_mean(on_gpu, seq), segment is None

    def _nearest_mean(self, rows: np.ndarray, seq: int) -> float | None:
        """Mean iteration ms of the solo windows of ``rows`` just before and just after ``seq``
        (:func:`nearest_solo_windows`)."""
        seqs, ms = self.seq[rows], self.ms[rows]
        before, after = np.searchsorted(seqs, seq, side="left"), np.searchsorted(seqs, seq, side="right")
        vals = ([ms[before - 1]] if before > 0 else []) + ([ms[after]] if after < len(seqs) else [])
        return float(np.mean(vals)) if vals else None


def slowdown_table(windows: pd.DataFrame) -> pd.DataFrame:
    """One row per (successful collocated window, job) with slowdown, δ and throughput."""
    solos = solo_table(windows)
    by_key = {k: _JobSolos(g.sort_values("seq")) for k, g in solos.groupby(["campaign", "mode", "job"])}
    noise = solo_noise(windows).set_index(["campaign", "mode", "job"])["cv"].to_dict() if len(solos) else {}
    rows = []
    colo = windows[(windows["kind"] == "colo") & (windows["status"] == "ok")]
    for w in colo.itertuples():
        per_job = []
        for member in w.jobs:  # a job, or a copy JOB#k of one, measured against the job's solo windows
            job = job_of(member)
            s = by_key.get((w.campaign, w.mode, job))
            t, same = (None, False) if s is None else s.baseline(w.seq, w.gpu_uuid, w.shard, w.segment)
            r = w.results[member]
            per_job.append((job, t, r["mean_ms"], r.get("iterations"), r.get("peak_memory_gib"), same, member))
        if any(t is None for _, t, *_ in per_job):
            continue  # no solo baseline for some member: cannot form a slowdown
        delta = set_delta([t for _, t, *_ in per_job], [c for _, _, c, *_ in per_job])
        thr = normalised_throughput([c / t for _, t, c, *_ in per_job])
        for job, t, c, iters, mem, same, member in per_job:
            rows.append(
                {"campaign": w.campaign, "window_id": w.window_id, "seq": w.seq, "segment": w.segment, "mode": w.mode, "set": w.set,
                 "n_jobs": w.n_jobs, "repeat": w.repeat, "job": job, "instance": member, "solo_ms": t, "colo_ms": c, "slowdown": c / t,
                 "delta": delta, "throughput": thr, "iterations": iters, "peak_memory_gib": mem,
                 "solo_cv": noise.get((w.campaign, w.mode, job), np.nan), "solo_same_segment": same, "gpu": w.gpu,
                 "gpu_uuid": w.gpu_uuid, "started_at": w.started_at}
            )
    return pd.DataFrame(rows, columns=SLOWDOWN_COLUMNS)


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


def gpu_key(df: pd.DataFrame) -> pd.Series:
    """The GPU of each row for cross-GPU checks: :func:`machine_key`, except that a shard of a multi-GPU campaign
    measured without NVML (no UUID) is its own GPU (``CAMPAIGN#sK``)."""
    key = machine_key(df)
    if "shard" in df and "gpu_uuid" in df:
        shard = df["shard"]
        use = df["gpu_uuid"].isna() & shard.notna()
        key = key.where(~use, df["campaign"] + "#s" + shard.astype("Int64").astype(str))
    return key


def cross_gpu_agreement(windows: pd.DataFrame) -> pd.DataFrame:
    """Whether the GPUs a campaign was spread over (or the machines of several campaigns) measure the same slowdowns.

    For each (mode, set, job) measured on two or more GPUs (:func:`gpu_key`), GPU g's difference is
    d_g = 100·(m_g / mean of the other GPUs' m − 1), m being a GPU's mean slowdown of that job in that set. The
    repeat noise is the same quantity for two windows of one set on one GPU, 100·|s₁ − s₂| / mean(s₁, s₂),
    averaged over the mode's repeated sets. One row per (mode, GPU): ``n`` differences, ``bias_pct`` (mean d:
    this GPU measures larger slowdowns when positive), ``abs_pct`` (mean |d|) and its standard error,
    ``noise_pct`` and ``n_noise`` (the mode's repeat noise and how many repeats it rests on), and ``agrees``:
    abs_pct ≤ noise_pct + 2·abs_se (no more than repeat noise at about 95% one-sided confidence; None without
    repeats)."""
    slow = slowdown_table(windows)
    cols = ["mode", "gpu_key", "gpu", "gpu_index", "n", "bias_pct", "abs_pct", "abs_se", "noise_pct", "n_noise", "agrees"]
    if slow.empty:
        return pd.DataFrame(columns=cols)
    key_rows = windows.assign(gpu_key=gpu_key(windows))
    index_of = key_rows.dropna(subset=["gpu_index"]).groupby("gpu_key")["gpu_index"].first().to_dict() if len(key_rows) else {}
    name_of = key_rows.dropna(subset=["gpu"]).groupby("gpu_key")["gpu"].first().to_dict() if len(key_rows) else {}
    slow = slow.merge(key_rows[["window_id", "gpu_key"]], on="window_id", how="left")
    per = slow.groupby(["mode", "set", "job", "gpu_key"])["slowdown"]
    m = per.mean().rename("m").reset_index()
    reps = per.agg(lambda x: 200 * abs(x.iloc[0] - x.iloc[1]) / (x.iloc[0] + x.iloc[1]) if len(x) >= 2 else np.nan).dropna()
    noise = reps.groupby(level="mode").agg(["mean", "count"])
    rows = []
    for (mode, _, _), g in m.groupby(["mode", "set", "job"]):
        if len(g) < 2:
            continue
        total = g["m"].sum()
        for key, mg in zip(g["gpu_key"], g["m"]):
            rows.append({"mode": mode, "gpu_key": key, "d": 100 * (mg / ((total - mg) / (len(g) - 1)) - 1)})
    if not rows:
        return pd.DataFrame(columns=cols)
    d = pd.DataFrame(rows)
    out = []
    for (mode, key), g in d.groupby(["mode", "gpu_key"]):
        a = g["d"].abs()
        se = float(a.std(ddof=1) / np.sqrt(len(a))) if len(a) > 1 else np.nan
        nz = noise["mean"].get(mode, np.nan) if len(noise) else np.nan
        nn = int(noise["count"].get(mode, 0)) if len(noise) else 0
        agrees = None if np.isnan(nz) else bool(a.mean() <= nz + 2 * (0.0 if np.isnan(se) else se))
        idx = index_of.get(key)
        out.append({"mode": mode, "gpu_key": key, "gpu": name_of.get(key), "gpu_index": None if idx is None else int(idx), "n": len(g),
                    "bias_pct": float(g["d"].mean()), "abs_pct": float(a.mean()), "abs_se": se, "noise_pct": nz, "n_noise": nn,
                    "agrees": agrees})
    return pd.DataFrame(out, columns=cols).astype({"gpu_index": "Int64"})


def _union_minutes(intervals: list[tuple[float, float]]) -> float:
    """Length in minutes of the union of [start, end] intervals (s)."""
    total, end = 0.0, -np.inf
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total / 60


def throughput_by_gpu(windows: pd.DataFrame) -> pd.DataFrame:
    """Windows measured per minute on each GPU of each campaign, and for each campaign as a whole (``gpu_key``
    ``all``): windows run (every status but ``infeasible``, which is not run) over the time the GPU (or any GPU
    of the campaign) was measuring: the union of its segments' spans, first window's start to last window's
    end (start-ups and gaps between windows count; pauses between resumed runs do not). ``started_at`` has
    whole seconds; over minutes that is a small error."""
    cols = ["campaign", "gpu_key", "gpu_index", "windows", "minutes", "windows_per_min"]
    ran = windows[windows["status"] != "infeasible"].copy()
    if ran.empty:
        return pd.DataFrame(columns=cols)
    ran["gpu_key"] = gpu_key(ran)
    t0 = pd.to_datetime(ran["started_at"], utc=True, errors="coerce")
    ran["t0"] = (t0 - pd.Timestamp("2020-01-01", tz="UTC")).dt.total_seconds()
    ran["t1"] = ran["t0"] + pd.to_numeric(ran["wall_s"], errors="coerce").fillna(0.0)
    ran = ran.dropna(subset=["t0"])
    out = []
    for campaign, c in ran.groupby("campaign", sort=False):
        for key, g in list(c.groupby("gpu_key", sort=False)) + [("all", c)]:
            spans = g.groupby("segment").agg(t0=("t0", "min"), t1=("t1", "max"))
            minutes = _union_minutes(list(zip(spans["t0"], spans["t1"])))
            idx = g["gpu_index"].dropna()
            out.append({"campaign": campaign, "gpu_key": key, "gpu_index": int(idx.iloc[0]) if key != "all" and len(idx) else None,
                        "windows": len(g), "minutes": minutes, "windows_per_min": len(g) / minutes if minutes > 0 else np.nan})
    return pd.DataFrame(out, columns=cols).astype({"gpu_index": "Int64"})
