"""Profile a training command on the GPU (``colopred profile run`` / ``profile nvml``).

The command marks its loop with :class:`colopred.window.ProfileWindow` (zoo jobs do).
``profile run`` makes three runs: one without any profiler, timing iterations (solo
iteration time, peak memory); one under ``torch.profiler`` with CUDA activity over a few
iterations (the solo timeline: the stream overlap, Σ kernel time / time a kernel runs, which
ncu's one-kernel-at-a-time replay cannot see); one under ``ncu`` over a bounded window of
iterations.
``profile nvml`` makes one timed run while sampling GPM counters.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...constants import GPM_MIN_INTERVALS, TIMELINE_ITERS
from ...errors import GpuError, InputError
from ...gpu import GpuInfo
from ...profile import JobProfile
from .ncu_csv import NCU_METRICS, REQUIRED_METRICS, read_ncu_csv
from .ncu_profile import profile_from_ncu
from .nvml_profile import profile_from_gpm

METRIC_SETS = {"full": NCU_METRICS, "minimal": list(REQUIRED_METRICS)}
DEFAULT_METRIC_SET = "minimal"
"""What ``profile run`` collects unless told: the three required metrics (ncu adds the ``launch__*`` statistics to
any set). Every profile field the shipped models read comes from them, the solo timing run and the timeline; the
full set adds SM throughput and the L2 hit rate, which no model reads, at 3-5x the replay time (docs/model.md,
"Which ncu metrics")."""
REPLAY_MODES = ("kernel", "application")


def zoo_command(job: str) -> list[str]:
    return [sys.executable, "-m", "colopred.measurement.zoo.run", job]


@dataclass
class TimedRun:
    iter_ms: list[float]
    peak_memory_gib: float | None
    gpu_name: str | None
    window_start: float
    window_end: float
    wall_s: float

    @property
    def iteration_ms(self) -> float:
        return sum(self.iter_ms) / len(self.iter_ms)


def _window_env(mode: str, warmup: int, iters: int, result: Path, trace: Path | None = None,
                min_seconds: float = 0.0) -> dict[str, str]:
    env = {**os.environ, "COLOPRED_WINDOW": mode, "COLOPRED_WARMUP": str(warmup), "COLOPRED_ITERS": str(iters),
           "COLOPRED_RESULT": str(result), "COLOPRED_EXIT": "1", "PYTHONUNBUFFERED": "1", "COLOPRED_MIN_SECONDS": str(min_seconds)}
    if trace is not None:
        env["COLOPRED_TRACE"] = str(trace)
    return env


def run_timeline(cmd: list[str], source: str = "ncu", *, warmup: int = 10, iters: int = TIMELINE_ITERS,
                 timeout: float = 900) -> dict[str, float] | None:
    """What ``cmd``'s solo timeline gives a profile of ``source`` (:func:`timeline.fields_for_profile`: the stream
    overlap; for a GPM profile also the kernel count and MPS wait): ``iters`` iterations after ``warmup`` traced with
    torch.profiler (CUDA activity). None where the trace holds no GPU kernel (a job run without a GPU)."""
    from .timeline import NoKernelError, fields_for_profile

    with tempfile.TemporaryDirectory() as d:
        result, trace = Path(d) / "window.json", Path(d) / "trace.json"
        p = subprocess.run(cmd, env=_window_env("trace", warmup, iters, result, trace), capture_output=True, text=True, timeout=timeout)
        _read_result(result, cmd, p)
        if not trace.exists():
            raise GpuError(f"{' '.join(cmd)!r}: the traced run wrote no timeline")
        try:
            return fields_for_profile(trace, source, iters)
        except NoKernelError:
            return None


def run_overlap(cmd: list[str], *, warmup: int = 10, iters: int = TIMELINE_ITERS, timeout: float = 900) -> float | None:
    """The stream overlap of ``cmd`` from its solo timeline (:func:`run_timeline`); None where it runs no GPU kernel."""
    fields = run_timeline(cmd, "ncu", warmup=warmup, iters=iters, timeout=timeout)
    return None if fields is None else fields["stream_overlap"]


def _read_result(result: Path, cmd: list[str], proc: subprocess.CompletedProcess) -> dict[str, Any]:
    if not result.exists() or result.stat().st_size == 0:
        tail = (proc.stderr or "")[-400:].strip().replace("\n", " | ")
        raise GpuError(
            f"{' '.join(cmd)!r} exited with code {proc.returncode} without finishing its profile window "
            f"(does the loop use colopred.window.ProfileWindow?) {tail}"
        )
    return json.loads(result.read_text())


def run_timed(cmd: list[str], *, warmup: int = 10, iters: int = 30, timeout: float = 900, min_seconds: float = 0.0) -> TimedRun:
    """Run ``cmd`` without a profiler and time ``iters`` iterations after ``warmup``, and more until the timed window
    lasts ``min_seconds``."""
    with tempfile.TemporaryDirectory() as d:
        result = Path(d) / "window.json"
        t0 = time.monotonic()
        p = subprocess.run(cmd, env=_window_env("time", warmup, iters, result, min_seconds=min_seconds), capture_output=True,
                           text=True, timeout=timeout)
        r = _read_result(result, cmd, p)
    if not r["iter_ms"]:
        raise GpuError(f"{' '.join(cmd)!r}: no iterations were timed")
    return TimedRun(r["iter_ms"], r.get("peak_memory_gib"), r.get("gpu_name"), r["window_start"], r["window_end"], time.monotonic() - t0)


def ncu_command(cmd: list[str], *, metrics: list[str], replay_mode: str = "kernel", ncu: str = "ncu") -> list[str]:
    """The ncu invocation colopred uses (clocks and caches left alone)."""
    if replay_mode not in REPLAY_MODES:
        raise ValueError(f"replay mode must be one of {REPLAY_MODES}")
    return [ncu, "--clock-control", "none", "--cache-control", "none", "--profile-from-start", "off",
            "--replay-mode", replay_mode, "--target-processes", "all", "--metrics", ",".join(metrics),
            "--csv", "--page", "raw", *cmd]


def run_ncu(cmd: list[str], csv_path: Path, *, warmup: int = 10, iters: int = 1, metrics: list[str] | None = None,
            replay_mode: str = "kernel", ncu: str = "ncu", timeout: float = 1800) -> float:
    """Run ``cmd`` under ncu over ``iters`` iterations; the CSV goes to ``csv_path``. Returns wall seconds."""
    if shutil.which(ncu) is None:
        raise GpuError(f"{ncu} (Nsight Compute) is not on PATH")
    full = ncu_command(cmd, metrics=metrics or NCU_METRICS, replay_mode=replay_mode, ncu=ncu)
    with tempfile.TemporaryDirectory() as d:
        result = Path(d) / "window.json"
        t0 = time.monotonic()
        with open(csv_path, "w") as out:
            p = subprocess.run(full, env=_window_env("ncu", warmup, iters, result), stdout=out, stderr=subprocess.PIPE,
                               text=True, timeout=timeout)
        wall = time.monotonic() - t0
        _read_result(result, cmd, p)
    return wall


def profile_command(cmd: list[str], *, name: str, iterations: int = 1, warmup: int = 10, timing_iters: int = 30,
                    replay_mode: str = "kernel", metric_set: str = DEFAULT_METRIC_SET, keep_csv: Path | None = None,
                    meta: dict[str, Any] | None = None, timeline: bool = True, log=lambda s: None) -> JobProfile:
    """Timed run, traced run (``timeline``: the stream overlap) and ncu run of ``cmd`` -> ``JobProfile`` (source ``ncu``)."""
    timed = run_timed(cmd, warmup=warmup, iters=timing_iters)
    log(f"{name}: solo iteration {timed.iteration_ms:.2f} ms, peak {timed.peak_memory_gib or 0:.2f} GiB ({timed.wall_s:.1f} s)")
    overlap = run_overlap(cmd, warmup=warmup) if timeline else None
    if timeline:
        log(f"{name}: stream overlap {overlap:.3f} from a solo timeline of {TIMELINE_ITERS} iterations" if overlap is not None
            else f"{name}: no GPU kernel in the solo timeline: stream overlap left out (counts as 1)")
    with tempfile.TemporaryDirectory() as d:
        csv_path = keep_csv or Path(d) / "report.csv"
        wall = run_ncu(cmd, csv_path, warmup=warmup, iters=iterations, metrics=METRIC_SETS[metric_set], replay_mode=replay_mode)
        log(f"{name}: ncu ({replay_mode} replay, {metric_set} metrics) took {wall:.1f} s")
        with warnings.catch_warnings(record=True) as caught:  # an optional metric left out: logged, and in the meta
            warnings.simplefilter("always")
            report = read_ncu_csv(csv_path)
    for w in dict.fromkeys(str(w.message) for w in caught):
        log(f"{name}: warning: {w}")
    m = {"command": cmd, "ncu_wall_s": wall, "ncu_replay_mode": replay_mode, "ncu_metric_set": metric_set,
         "timing_iterations": len(timed.iter_ms), "iteration_ms_median": sorted(timed.iter_ms)[len(timed.iter_ms) // 2],
         "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **(meta or {})}
    if overlap is not None:
        m["stream_overlap_from"] = f"torch.profiler solo timeline, {TIMELINE_ITERS} iterations after {warmup}"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p = profile_from_ncu(report, name=name, iteration_ms=timed.iteration_ms, iterations=iterations,
                             peak_memory_gib=timed.peak_memory_gib, meta=m)
    for w in dict.fromkeys(str(w.message) for w in caught):
        log(f"{name}: warning: {w}")
    return p if overlap is None else p.with_(stream_overlap=overlap)


def profile_command_gpm(cmd: list[str], *, name: str, warmup: int = 10, timing_iters: int = 50, interval_s: float = 0.1,
                        meta: dict[str, Any] | None = None, timeline: bool = True, log=lambda s: None) -> JobProfile:
    """One timed run of ``cmd`` while sampling GPM every ``interval_s``, then (``timeline``) a traced run for the kernel
    count, stream overlap and MPS wait the GPM model reads -> ``JobProfile`` (source ``nvml``)."""
    p = _gpm_profile(cmd, name=name, warmup=warmup, timing_iters=timing_iters, interval_s=interval_s, meta=meta)
    log(f"{name}: GPM counters over {p.iterations_profiled} iterations of {p.iteration_ms:.2f} ms")
    if not timeline:
        return p
    fields = run_timeline(cmd, "nvml", warmup=warmup)
    if fields is None:
        log(f"{name}: no GPU kernel in the solo timeline: kernel count and MPS wait left out")
        return p
    log(f"{name}: {fields['kernels_per_iteration']:.0f} kernels per iteration, MPS wait {fields['mps_wait_us']:.1f} µs "
        f"from a solo timeline of {TIMELINE_ITERS} iterations")
    return p.with_(**fields, meta={**p.meta, "timeline_fields_from": f"torch.profiler solo timeline, {TIMELINE_ITERS} "
                                                                     f"iterations after {warmup}"})


def _gpm_profile(cmd: list[str], *, name: str, warmup: int, timing_iters: int, interval_s: float,
                 meta: dict[str, Any] | None) -> JobProfile:
    from ..nvml import Nvml

    nv = Nvml(0)
    if not nv.gpm_supported:
        raise GpuError(f"{nv.gpu_name} does not support GPM metrics (Hopper or newer needed)")
    samples: list[tuple[float, Any]] = []
    stop = threading.Event()

    def sampler():
        while not stop.is_set():
            samples.append((time.time(), nv.sample()))
            stop.wait(interval_s)

    th = threading.Thread(target=sampler, daemon=True)
    th.start()
    try:
        timed = run_timed(cmd, warmup=warmup, iters=timing_iters, min_seconds=GPM_MIN_INTERVALS * interval_s)
    finally:
        stop.set()
        th.join()
    inside = [(t, s) for t, s in samples if timed.window_start <= t <= timed.window_end]
    intervals = []
    for (t1, s1), (t2, s2) in zip(inside, inside[1:]):
        intervals.append({"seconds": t2 - t1, **nv.metrics(s1, s2)})
    for _, s in samples:
        nv.free(s)
    gpu = GpuInfo.from_name(nv.gpu_name, sm_count=nv.sm_count, memory_gib=nv.memory_gib)
    nv.close()
    m = {"command": cmd, "gpm_interval_s": interval_s, "timing_iterations": len(timed.iter_ms),
         "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **(meta or {})}
    try:
        return profile_from_gpm(intervals, name=name, gpu=gpu, iteration_ms=timed.iteration_ms, iterations=len(timed.iter_ms),
                                peak_memory_gib=timed.peak_memory_gib, meta=m)
    except ValueError as e:
        raise InputError(None, f"{name}: {e}") from None
