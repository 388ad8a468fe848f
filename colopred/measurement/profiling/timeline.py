"""Solo timeline of a zoo job: when the host launched each kernel and when the GPU ran it.

``colopred profile timeline --zoo JOB --out DIR`` (GPU side) runs JOB's training loop as
``colopred measure`` does (one step, then a device synchronisation, per iteration), times
``--iterations`` iterations without a profiler, then records as many under ``torch.profiler``
with CUDA activity only (CUPTI: the runtime API calls on the host and the kernels, copies and
sets on the GPU; no per-operator host events, which would slow a launch-bound job), and writes

  DIR/JOB.timeline.csv.gz   one row per event (:data:`COLUMNS`), times in µs from the first event
  DIR/JOB.timeline.json     job, iteration times with and without the profiler, versions

:func:`reduce_trace` turns torch's Chrome trace into those rows; it is pure and tested on the
CPU with a recorded trace. Where the host is ahead of the GPU (a kernel waits in the queue)
and where the GPU waits for the host (a launch-bound job) is what the ncu report cannot say.
"""

from __future__ import annotations

import gzip
import json
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...constants import TIMELINE_ITERS, TIMELINE_WARMUP_ITERS
from ...errors import InputError, first_line
from ...io import atomic_file, read_input_bytes, write_text_atomic

# kind: kernel | memcpy | memset (GPU), runtime | driver (host API calls)
COLUMNS = ("kind", "name", "start_us", "dur_us", "correlation", "stream")
# A kernel's launch configuration, from the args CUPTI gives torch.profiler (NaN on other rows, and in
# timelines recorded before they were kept): blocks in the grid, threads per block, registers per thread,
# shared memory per block (bytes), and CUPTI's occupancy estimate (%), from which :func:`launch_table` derives the
# waves per SM that an ncu report gives.
LAUNCH_COLUMNS = ("grid_blocks", "block_threads", "registers_per_thread", "shared_mem_bytes", "est_occupancy_pct")
_LAUNCH_ARGS = {"registers_per_thread": "registers per thread", "shared_mem_bytes": "shared memory",
                "est_occupancy_pct": "est. achieved occupancy %"}
_KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset", "cuda_runtime": "runtime",
          "cuda_driver": "driver"}
NAME_CHARS = 80


def reduce_trace(trace: dict[str, Any]) -> pd.DataFrame:
    """Rows of :data:`COLUMNS` and :data:`LAUNCH_COLUMNS` from a torch.profiler Chrome trace (``traceEvents`` complete
    events of the categories in ``_KINDS``), sorted by start, start times relative to the earliest. A GPU event
    without a finite ``ts`` and a non-negative ``dur`` raises ValueError naming it."""
    rows = []
    events = trace.get("traceEvents", [])
    if not isinstance(events, list):
        raise ValueError("traceEvents is not a list")
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            continue
        cat = e.get("cat")
        kind = _KINDS.get(cat) if isinstance(cat, str) else None
        if kind is None or e.get("ph") != "X":
            continue
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        ts, dur = _number(e.get("ts")), _number(e.get("dur", 0.0))
        if ts is None or dur is None or dur < 0:
            raise ValueError(f"event {i} ({kind} {str(e.get('name', ''))[:40]!r}) lacks a numeric ts and a non-negative dur")
        rows.append((kind, str(e.get("name", ""))[:NAME_CHARS], ts, dur, _int(args.get("correlation")), _int(args.get("stream")),
                     *(_launch(args) if kind == "kernel" else _NO_LAUNCH)))
    df = pd.DataFrame(rows, columns=[*COLUMNS, *LAUNCH_COLUMNS])
    if len(df):
        df["start_us"] -= df["start_us"].min()
        df = df.sort_values(["start_us", "kind"], kind="stable").reset_index(drop=True)
    return df


_NO_LAUNCH = (np.nan,) * len(LAUNCH_COLUMNS)


def _launch(args: dict[str, Any]) -> tuple[float, ...]:
    """LAUNCH_COLUMNS of a kernel event's args (NaN where one is absent or not a number)."""
    def product(v: Any) -> float:
        dims = [_number(x) for x in v] if isinstance(v, list) and v else [None]
        return float(np.prod(dims)) if None not in dims else np.nan

    def num(key: str) -> float:
        x = _number(args.get(key))
        return np.nan if x is None else x

    return (product(args.get("grid")), product(args.get("block")), *(num(_LAUNCH_ARGS[c]) for c in LAUNCH_COLUMNS[2:]))


def device_properties(trace: dict[str, Any]) -> dict[str, Any] | None:
    """The first GPU's properties in a torch.profiler trace (``deviceProperties``: SMs, registers and shared memory
    per SM, ...), which turn the kernels' launch configurations into waves; None if the trace has none."""
    props = trace.get("deviceProperties")
    return props[0] if isinstance(props, list) and props and isinstance(props[0], dict) else None


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        return None
    try:
        x = float(v)
    except ValueError:
        return None
    return x if np.isfinite(x) else None


def _int(v: Any) -> int:
    x = _number(v)
    return int(x) if x is not None and abs(x) < 2**62 else -1


def stream_overlap(timeline: pd.DataFrame) -> float:
    """JobProfile.stream_overlap: Σ kernel durations / length of the union of the kernels'
    [start, end) intervals (the time at least one kernel runs). 1 for a job whose kernels never
    overlap (one stream); up to the number of streams running at once."""
    k = timeline[timeline["kind"] == "kernel"]
    if k.empty:
        raise ValueError("the timeline holds no kernel")
    order = np.argsort(k["start_us"].to_numpy(), kind="stable")
    start = k["start_us"].to_numpy(float)[order]
    end = start + k["dur_us"].to_numpy(float)[order]
    reach = np.maximum.accumulate(end)
    new = np.r_[True, start[1:] > reach[:-1]]  # a kernel that starts after every earlier one ended
    first = np.flatnonzero(new)
    last = np.r_[first[1:] - 1, len(start) - 1]
    union = float(np.sum(reach[last] - start[first]))
    if union <= 0:
        raise ValueError("the timeline's kernels all last 0 µs: it holds no kernel time")
    return float(max(1.0, (end - start).sum() / union))


class NoKernelError(InputError):
    """A timeline or trace that holds no GPU kernel (a job run without a GPU, or traced without CUDA activity)."""


def read_timeline(path: str | Path) -> pd.DataFrame:
    """A ``JOB.timeline.csv.gz`` back as a DataFrame of :data:`COLUMNS` (and :data:`LAUNCH_COLUMNS` where recorded)."""
    df = pd.read_csv(path)
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise InputError(path, f"not a colopred timeline (missing columns {', '.join(missing)})")
    return df


def load_timeline(path: str | Path) -> pd.DataFrame:
    """A timeline from ``path``: a colopred table (``*.csv`` or ``*.csv.gz``) or a torch.profiler Chrome
    trace (``*.json`` or ``*.json.gz``, from ``prof.export_chrome_trace`` with CUDA activity), reduced by
    :func:`reduce_trace`. Raises InputError naming the file if it is unreadable, NoKernelError if it holds no GPU kernel."""
    return _load(path)[0]


def _load(path: str | Path) -> tuple[pd.DataFrame, dict[str, Any] | None]:
    """(:func:`load_timeline` of ``path``, the parsed Chrome trace where ``path`` is one, else None)."""
    path = Path(path)
    trace = None
    if not path.is_file():
        raise InputError(path, "is a directory, not a timeline file" if path.is_dir() else "no such file")
    name = path.name.lower()
    if name.endswith((".json", ".json.gz")):
        trace = _read_trace(path, gzipped=name.endswith(".gz"))
        if not isinstance(trace, dict) or "traceEvents" not in trace:
            raise InputError(path, "not a Chrome trace (no traceEvents)")
        try:
            df = reduce_trace(trace)
        except ValueError as e:
            raise InputError(path, str(e)) from None
    elif name.endswith((".csv", ".csv.gz")):
        what = "not a readable timeline table"
        try:
            df = read_timeline(path)
        except (EOFError, zlib.error, gzip.BadGzipFile) as e:
            raise InputError(path, f"{what}: truncated or corrupt gzip file ({first_line(e, 100)})") from None
        except UnicodeDecodeError as e:
            raise InputError(path, f"{what}: not UTF-8 text ({e.reason})") from None
        except OSError as e:
            raise InputError(path, f"cannot read ({e.strerror or e.__class__.__name__})") from None
        except pd.errors.EmptyDataError:
            raise InputError(path, f"{what}: the file is empty (no header row)") from None
        except pd.errors.ParserError as e:
            detail = first_line(e, 100).removeprefix("Error tokenizing data. C error: ")
            raise InputError(path, f"{what}: its rows do not parse as CSV ({detail})") from None
        for col in ("start_us", "dur_us"):
            v = pd.to_numeric(df[col], errors="coerce")
            bad = ~np.isfinite(v.to_numpy(dtype=float)) | (v.to_numpy(dtype=float) < 0 if col == "dur_us" else False)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise InputError(path, f"row {i + 1}: {col} is {str(df[col].iloc[i])[:20]!r}, not a {'non-negative ' if col == 'dur_us' else ''}number")
            df[col] = v.astype(float)
        df["kind"] = df["kind"].astype(str)
    else:
        raise InputError(path, "expected a colopred timeline (.csv, .csv.gz) or a torch.profiler trace (.json, .json.gz)")
    kernels = df["kind"] == "kernel"
    if not kernels.any():
        raise NoKernelError(path, "no GPU kernel in the timeline (trace with torch.profiler's CUDA activity)")
    if not (df.loc[kernels, "dur_us"] > 0).any():  # no kernel time: no overlap, kernel share or wait to measure
        raise InputError(path, f"its {int(kernels.sum())} GPU kernels all last 0 µs: the timeline holds no kernel time "
                               "(a broken trace? record it again)")
    return df, trace


def _read_trace(path: Path, gzipped: bool) -> Any:
    """The JSON document of the Chrome trace at ``path``; one InputError saying in words why it is unreadable."""
    what = "not a readable Chrome trace"
    raw = read_input_bytes(path, "gzip" if gzipped else None, what=f"{what}: ")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        hint = " (it is gzip-compressed: name it .json.gz)" if raw[:2] == b"\x1f\x8b" else ""
        raise InputError(path, f"{what}: not UTF-8 text (byte {raw[e.start]:#04x} at offset {e.start}){hint}") from None
    del raw
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        cut = "; the file ends there: truncated?" if e.pos >= len(text.rstrip()) else ""
        raise InputError(path, f"{what}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno}{cut})") from None
    except RecursionError:
        raise InputError(path, f"{what}: not valid JSON (nested too deeply)") from None


def overlap_of(path: str | Path) -> float:
    """JobProfile.stream_overlap of the timeline or trace at ``path`` (:func:`load_timeline`), to 6 decimals
    as profiles store it."""
    return round(stream_overlap(load_timeline(path)), 6)


def capture(job_name: str, out_dir: str | Path, iterations: int = TIMELINE_ITERS, warmup: int = TIMELINE_WARMUP_ITERS, keep_trace: bool = False) -> dict[str, Any]:  # pragma: no cover - GPU
    """Run, time and trace ``job_name`` on the GPU; write the two files (and torch's raw trace,
    gzipped, with ``keep_trace``); return the metadata."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from ..zoo.registry import JobSpec
    from ..zoo.training import build

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    job = build(JobSpec.parse(job_name), "cuda")
    job.timed_steps(warmup)
    plain_ms = job.timed_steps(iterations)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        traced_ms = job.timed_steps(iterations)
    tmp = out_dir / f"{job_name}.trace.json"
    prof.export_chrome_trace(str(tmp))
    trace = json.loads(tmp.read_text())
    rows = reduce_trace(trace)
    if keep_trace:
        with open(tmp, "rb") as src, gzip.open(out_dir / f"{job_name}.trace.json.gz", "wb") as dst:
            dst.write(src.read())
    tmp.unlink()
    with atomic_file(out_dir / f"{job_name}.timeline.csv.gz", "wb") as raw, gzip.open(raw, "wt") as f:
        rows.to_csv(f, index=False, float_format="%.3f")
    meta = {"job": job_name, "iterations": iterations, "warmup": warmup, "iter_ms_plain": plain_ms, "iter_ms_traced": traced_ms,
            "events": len(rows), "kernels": int((rows["kind"] == "kernel").sum()), "torch": torch.__version__,
            "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(), "device_properties": device_properties(trace),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    write_text_atomic(out_dir / f"{job_name}.timeline.json", json.dumps(meta, indent=1))
    return meta


# Residency limits of one SM used to turn a launch configuration into waves (CUDA C++ Programming Guide, "Compute
# Capabilities", technical specifications for compute capability 8.x and 9.x, and the CUDA Occupancy Calculator's
# allocation rules):
# registers are allocated per warp in units of 256, shared memory per block in units of 128 bytes plus 1 KiB the
# runtime reserves, at most 32 resident blocks. Checked against CUPTI's own occupancy estimate on recorded H100
# traces (tests/test_timeline.py).
MAX_BLOCKS_PER_SM = 32
REGISTER_ALLOCATION_UNIT = 256
SHARED_MEM_ALLOCATION_UNIT_BYTES = 128
SHARED_MEM_RESERVED_PER_BLOCK_BYTES = 1024


DEVICE_KEYS = ("numSms", "maxThreadsPerMultiprocessor", "regsPerMultiprocessor", "sharedMemPerMultiprocessor")
"""The GPU properties (a trace's ``deviceProperties``) that turn launch configurations into waves."""


def resident_blocks_per_sm(block_threads: np.ndarray, registers_per_thread: np.ndarray, shared_mem_bytes: np.ndarray,
                           device: dict[str, Any]) -> np.ndarray:
    """How many blocks of each launch configuration one SM holds at once (≥ 1; NaN where the configuration is unknown),
    the least of the limits by warps, registers, shared memory and MAX_BLOCKS_PER_SM. ``device``: a trace's
    :func:`device_properties` (warpSize, maxThreadsPerMultiprocessor, regsPerMultiprocessor, sharedMemPerMultiprocessor)."""
    warp = float(device.get("warpSize", 32))
    warps = np.ceil(np.asarray(block_threads, float) / warp)
    regs_per_warp = np.ceil(np.asarray(registers_per_thread, float) * warp / REGISTER_ALLOCATION_UNIT) * REGISTER_ALLOCATION_UNIT
    with np.errstate(divide="ignore", invalid="ignore"):
        by_warps = np.floor(float(device["maxThreadsPerMultiprocessor"]) / warp / warps)
        by_regs = np.where(regs_per_warp > 0, np.floor(np.floor(float(device["regsPerMultiprocessor"]) / regs_per_warp) / warps),
                           MAX_BLOCKS_PER_SM)
        smem = np.asarray(shared_mem_bytes, float)
        per_block = np.ceil((smem + SHARED_MEM_RESERVED_PER_BLOCK_BYTES) / SHARED_MEM_ALLOCATION_UNIT_BYTES) * SHARED_MEM_ALLOCATION_UNIT_BYTES
        by_smem = np.where(smem > 0, np.floor(float(device["sharedMemPerMultiprocessor"]) / per_block), MAX_BLOCKS_PER_SM)
    blocks = np.minimum.reduce([by_warps, by_regs, by_smem, np.full(warps.shape, float(MAX_BLOCKS_PER_SM))])
    return np.where(np.isfinite(blocks), np.maximum(blocks, 1.0), np.nan)


def launch_table(timeline: pd.DataFrame, device: dict[str, Any]) -> pd.DataFrame:
    """The timeline's kernels as the kernel table an ncu report gives (``duration_ns``, ``waves_per_sm``,
    ``occupancy_pct``), for ``ncu_profile.kernel_metrics``: waves = grid blocks / (SMs x resident blocks per SM),
    occupancy = the warps of min(resident blocks, grid blocks / SMs) over the SM's warps (what the grid can hold
    resident; ncu measures the achieved occupancy). CUPTI's own estimate is not used: it is 0 for many kernels
    (those with thread-block clusters or opt-in shared memory among them). Kernels recorded without a launch
    configuration are left out; an empty table if none has one."""
    k = timeline[timeline["kind"] == "kernel"]
    if not set(LAUNCH_COLUMNS) <= set(k.columns):
        return pd.DataFrame(columns=["duration_ns", "waves_per_sm", "occupancy_pct"])
    k = k[np.isfinite(k[list(LAUNCH_COLUMNS)].to_numpy(float)).all(axis=1)]
    resident = resident_blocks_per_sm(k["block_threads"].to_numpy(float), k["registers_per_thread"].to_numpy(float),
                                      k["shared_mem_bytes"].to_numpy(float), device)
    blocks_per_sm = k["grid_blocks"].to_numpy(float) / float(device["numSms"])
    warps = np.ceil(k["block_threads"].to_numpy(float) / float(device.get("warpSize", 32)))
    max_warps = float(device["maxThreadsPerMultiprocessor"]) / float(device.get("warpSize", 32))
    return pd.DataFrame({"duration_ns": 1e3 * k["dur_us"].to_numpy(float), "waves_per_sm": blocks_per_sm / resident,
                         "occupancy_pct": 100.0 * np.minimum(resident, blocks_per_sm) * warps / max_warps})


TIMELINE_FIELDS = ("kernels_per_iteration", "stream_overlap", "sm_fill_pct", "launch_fill_pct", "mps_wait_us")
"""The JobProfile fields a timeline gives (:func:`timeline_fields`): those an ncu report gives from the kernels'
launch configurations and durations, without ncu's counters."""


def timeline_fields(timeline: pd.DataFrame, iterations: int, device: dict[str, Any] | None) -> dict[str, float | None]:
    """:data:`TIMELINE_FIELDS` of a solo timeline of ``iterations`` iterations: kernels per iteration, the stream
    overlap (:func:`stream_overlap`), and, where the kernels carry their launch configuration and ``device`` its
    properties, the SM fill, the per-launch fill and the MPS wait that ``ncu_profile.kernel_metrics`` computes from
    an ncu report (None otherwise)."""
    from .ncu_profile import kernel_metrics

    if iterations < 1:
        raise ValueError(f"iterations must be at least 1, got {iterations}")
    n_kernels = int((timeline["kind"] == "kernel").sum())
    out: dict[str, float | None] = {"kernels_per_iteration": n_kernels / iterations, "stream_overlap": stream_overlap(timeline),
                                    "sm_fill_pct": None, "launch_fill_pct": None, "mps_wait_us": None}
    table = launch_table(timeline, device) if device else None
    if table is not None and len(table):
        km = kernel_metrics(table)
        out.update({f: km.get(f) for f in ("sm_fill_pct", "launch_fill_pct", "mps_wait_us")})
    return out


def fields_for_profile(path: str | Path, source: str, iterations: int | None = None) -> dict[str, float]:
    """The fields the solo timeline or trace at ``path`` sets in a profile of ``source``: the stream overlap for an ncu
    profile (its report has the rest); for a GPM profile also the kernel count and MPS wait (``runtime.sources.timeline_fields_of``). The number of
    iterations traced and the GPU's properties come from a colopred table's ``.json`` beside it, or ``iterations`` and
    the trace's ``deviceProperties``. Raises InputError naming the file where one is missing."""
    from ...runtime.sources import timeline_fields_of

    path = Path(path)
    if iterations is not None and (isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1):
        raise InputError(None, f"--iterations must be a positive integer, not {iterations!r}")
    timeline, trace = _load(path)
    overlap = round(stream_overlap(timeline), 6)
    if source != "nvml":
        return {"stream_overlap": overlap}
    name = path.name.lower()
    if name.endswith((".csv", ".csv.gz")):
        meta_path = path.with_name(path.name[: -len(".csv.gz" if name.endswith(".gz") else ".csv")] + ".json")
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError):
            raise InputError(meta_path, "unreadable or missing: a GPM profile needs the timeline's iterations and GPU "
                                        "(colopred profile timeline writes this file beside the table)") from None
        iterations = iterations if iterations is not None else meta.get("iterations")
        device = meta.get("device_properties")
    else:
        device = device_properties(trace)
    kernels = timeline[timeline["kind"] == "kernel"]
    if not set(LAUNCH_COLUMNS) <= set(kernels.columns) or not np.isfinite(kernels[list(LAUNCH_COLUMNS)].to_numpy(float)).all(axis=1).any():
        raise InputError(path, "its kernels carry no launch configuration (a timeline recorded by an older colopred, or "
                               "a trace without kernel args): record it again")
    if not isinstance(iterations, int) or iterations < 1:
        raise InputError(path, "how many training iterations the trace holds is unknown: give --iterations N")
    lacking = [k for k in DEVICE_KEYS if not isinstance((device or {}).get(k), (int, float)) or device[k] <= 0]
    if lacking:
        raise InputError(path, f"its GPU properties (deviceProperties) lack {', '.join(lacking)}: record it again with "
                               "torch.profiler's CUDA activity")
    f = timeline_fields(timeline, iterations, device)
    f["stream_overlap"] = overlap
    return {k: float(f[k]) for k in timeline_fields_of(source)}


def with_timeline(profile, path: str | Path, iterations: int | None = None):
    """``profile`` (a JobProfile) with :func:`fields_for_profile` of the timeline at ``path`` set, and the timeline's
    file name in its ``meta['timeline_fields_from']``. InputError naming the timeline if the profile cannot hold them."""
    from dataclasses import replace

    fields = fields_for_profile(path, profile.source, iterations)
    try:
        return replace(profile, **fields, meta={**profile.meta, "timeline_fields_from": Path(path).name})
    except ValueError as e:
        raise InputError(path, f"gives a {', '.join(k.replace('_', ' ') for k in fields)} the profile cannot hold ({e})") from None
