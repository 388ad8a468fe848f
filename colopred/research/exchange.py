"""Collocation measurements in and out as one tidy table (``colopred import`` / ``colopred export``).

The table (CSV, or Parquet where pandas has a Parquet engine) has one row per job of each measured set
(``docs/formats.md``, "Collocation table"):

  set_id    one collocated measurement: the rows sharing it were measured together
  job       the job's name
  mode      ``timeslice`` or ``mps`` (``time-slicing``, ``MPS`` and the like are read too)
  solo_ms   the job's solo iteration time, ms: its baseline for this set
  colo_ms   its iteration time in the set, ms; or ``speed`` = solo_ms / colo_ms (normalised speed, Gavel's
            normalised throughput of one job), from which colo_ms = solo_ms / speed
  gpu       optional: the GPU's name as NVML reports it (one GPU per table)
  started_at, iterations   optional: when the set was measured (ISO 8601), timed collocated iterations

and, optionally, the job's solo profile from coarse counters (one value per job: they describe the job alone),
mapped onto a GPM-like :class:`JobProfile` (source ``nvml``) by :func:`coarse_profile`:

  gpu_util_pct       % of time a kernel ran (nvidia-smi utilization.gpu, DCGM GR_ENGINE_ACTIVE x 100)
  mem_util_pct       % of time / cycles device memory was busy (nvidia-smi utilization.memory, DCGM DRAM_ACTIVE x 100)
  sm_occupancy_pct   optional: resident warps / maximum, % (DCGM SM_OCCUPANCY x 100; GPM SM_OCCUPANCY). nvidia-smi
                     gives none: without it a profile has no achieved occupancy (the models read it as missing), and
                     import warns and notes it in the profile's ``meta.lacks``
  sm_active_pct      optional: % of time an SM had a warp resident (DCGM SM_ACTIVE x 100)
  tensor_util_pct    optional: tensor pipe activity, % (DCGM PIPE_TENSOR_ACTIVE x 100)
  memory_used_gib    optional: GPU memory the job held alone, GiB (nvidia-smi memory.used / 1024)

Headers as nvidia-smi (``--query-gpu=... --format=csv``) and DCGM (field names) write them are recognised
(:data:`ALIASES`); any other header is mapped with ``--column OURS=THEIRS``. Jobs may instead take full profiles
from a folder of JobProfile JSON (``--profiles``), which win over the columns.

Import writes ``DATASET/campaigns/NAME/windows.jsonl`` (window records, ``colopred.window/1``), an
``import.json`` with the provenance (source file and its SHA-256, date, tool, the columns mapped), and
``DATASET/profiles/SOURCE/JOB.json`` (the folders ``colopred train --profiles SOURCE`` reads; each profile's
``source`` says what it is). Each set becomes its own segment (``run_id``) of one solo window per job (``solo_ms``)
followed by the collocated window, so the slowdown ``colopred train`` and ``evaluate`` read is exactly colo_ms /
solo_ms of the row, and sets keep the table's order. A set may hold copies of one job (several rows of one job:
a hyperparameter sweep's runs side by side): the collocated window names them by instance, ``JOB#1``, ``JOB#2``, ...
in the order of their rows (:func:`colopred.profile.instance_names`), and they share the job's one solo window, of
the mean of their rows' solo_ms. Export writes :func:`export_table` of records: the same columns, one row per job
of each collocated window with its solo baseline (``reader.slowdown_table``; a copy under its job's name), so
exporting records and importing the table back gives the same training rows, in the same order.
"""

from __future__ import annotations

import csv
import io
import json
import lzma
import math
import os
import re
import shutil
import warnings
import zipfile
import zlib
from dataclasses import dataclass
from datetime import datetime, UTC
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..constants import MODES
from ..errors import InputError, first_line
from ..gpu import GpuInfo
from ..io import read_input_bytes, sha256_of, write_text_atomic
from ..measurement.harness.reader import read_windows, slowdown_table
from ..measurement.harness.records import RECORD_SCHEMA
from ..profile import JobProfile, instance_names, job_of

TABLE_COLUMNS = ["set_id", "job", "mode", "solo_ms", "colo_ms", "gpu", "started_at", "iterations"]
"""Columns :func:`export_table` writes, in order (the import format's own names)."""
REQUIRED = ("set_id", "job", "mode", "solo_ms")
PROFILE_COLUMNS = ("gpu_util_pct", "mem_util_pct", "sm_occupancy_pct", "sm_active_pct", "tensor_util_pct", "memory_used_gib")
REQUIRED_PROFILE = ("gpu_util_pct", "mem_util_pct")
"""A job described by table columns needs these two: they give JobProfile's required busy_fraction and
dram_util_pct. ``sm_occupancy_pct`` gives its achieved occupancy where the table has it: nvidia-smi alone has none
(DCGM's SM_OCCUPANCY, or a GPM sample, gives it), and a profile without it says so (``meta.lacks``)."""
NO_OCCUPANCY = ("no sm_occupancy_pct in the table (nvidia-smi gives none; DCGM's SM_OCCUPANCY or a GPM sample does): "
                "achieved occupancy unknown, read by the models as missing")

# Other tools' headers -> (our column, factor to our unit). nvidia-smi --format=csv headers carry the unit;
# DCGM's profiling fields are ratios in 0..1, its framebuffer field MiB.
ALIASES: dict[str, tuple[str, float]] = {
    "name": ("gpu", 1.0),  # nvidia-smi --query-gpu=name
    "utilization.gpu [%]": ("gpu_util_pct", 1.0),
    "utilization.memory [%]": ("mem_util_pct", 1.0),
    "memory.used [MiB]": ("memory_used_gib", 1 / 1024),
    "DCGM_FI_DEV_GPU_UTIL": ("gpu_util_pct", 1.0),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gpu_util_pct", 100.0),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("mem_util_pct", 1.0),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("mem_util_pct", 100.0),
    "DCGM_FI_PROF_SM_OCCUPANCY": ("sm_occupancy_pct", 100.0),
    "DCGM_FI_PROF_SM_ACTIVE": ("sm_active_pct", 100.0),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("tensor_util_pct", 100.0),
    "DCGM_FI_DEV_FB_USED": ("memory_used_gib", 1 / 1024),
}
UNIT_CHANGES = {100.0: "ratio x 100 = %", 1 / 1024: "MiB / 1024 = GiB"}
MODE_NAMES = {"timeslice": "timeslice", "time-slicing": "timeslice", "time_slicing": "timeslice", "timeslicing": "timeslice",
              "time-slice": "timeslice", "ts": "timeslice", "mps": "mps", "cuda-mps": "mps", "cuda_mps": "mps"}
JOB_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.=-]{0,99}$")  # fits window ids (no + or :) and file names
IMPORT_FILE = "import.json"


# ----------------------------------------------------------------------------------------------- export
def export_table(paths) -> pd.DataFrame:
    """The collocation table of the records under ``paths`` (campaign folders or windows.jsonl files): one row
    per job of each successful collocated window with a solo baseline, in record order (``TABLE_COLUMNS``)."""
    windows = read_windows(paths)
    if windows.empty:
        raise InputError(Path(paths[0] if isinstance(paths, (list, tuple)) else paths), "holds no window records")
    slow = slowdown_table(windows)
    jobs = slow["job"].map(job_of)  # a copy of a job (JOB#2) under its job's name: import names the copies again
    out = pd.DataFrame({"set_id": slow["window_id"], "job": jobs, "mode": slow["mode"], "solo_ms": slow["solo_ms"],
                        "colo_ms": slow["colo_ms"], "gpu": slow["gpu"], "started_at": slow["started_at"],
                        "iterations": slow["iterations"].astype("Int64")})
    return out[TABLE_COLUMNS]


def write_table(df: pd.DataFrame, path: str | os.PathLike) -> Path:
    """CSV (floats written to round-trip exactly), or Parquet for a ``.parquet`` name; atomically."""
    from ..io import atomic_file, write_csv_atomic

    path = Path(path)
    if path.suffix.lower() == ".parquet":
        with atomic_file(path, "wb") as f:
            try:
                df.to_parquet(f, index=False)
            except ImportError:
                raise InputError(path, "writing Parquet needs pyarrow or fastparquet; write a .csv") from None
        return path
    return write_csv_atomic(df, path, index=False, float_format="%.17g")


# ----------------------------------------------------------------------------------------------- import
def read_table(path: str | os.PathLike) -> pd.DataFrame:
    """A collocation table as strings (CSV) or its stored types (Parquet); one InputError if unreadable, truncated
    (a compressed file cut short, or a CSV whose last row is cut off: :func:`_check_last_row`) or corrupt."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "no such file" if not path.exists() else "is a directory, not a table")
    try:
        if path.suffix.lower() == ".parquet":
            try:
                return pd.read_parquet(path)
            except ImportError:
                raise InputError(path, "reading Parquet needs pyarrow or fastparquet; export the table as CSV") from None
        text = _csv_text(path)
        df = pd.read_csv(path if text is None else io.StringIO(text), dtype=str, keep_default_na=False,
                         skipinitialspace=True, encoding="utf-8")
    except InputError:
        raise
    except pd.errors.EmptyDataError:
        raise InputError(path, "empty file: no header row") from None
    except pd.errors.ParserError as e:
        first = str(e).splitlines()[0] if str(e) else e.__class__.__name__
        if "EOF inside string" in first:
            raise InputError(path, "the file ends inside a quoted cell: it is truncated (cut off mid-row)") from None
        raise InputError(path, f"not a readable table ({first.removeprefix('Error tokenizing data. C error: ')[:80]})") from None
    except (EOFError, zlib.error, lzma.LZMAError, zipfile.BadZipFile) as e:  # a compressed file pandas opened itself
        raise InputError(path, f"truncated or corrupt compressed file ({first_line(e)})") from None
    except (UnicodeDecodeError, ValueError, OSError) as e:
        raise InputError(path, f"not a readable table ({first_line(e)})") from None
    if text is not None:
        _check_last_row(path, text, df)
    return df


COMPRESSION_BY_SUFFIX = {".gz": "gzip", ".bz2": "bzip2", ".xz": "xz"}
"""Compressions :func:`read_table` undoes itself (pandas infers these from the same suffixes), to check the text."""


def _csv_text(path: Path) -> str | None:
    """The text of the CSV table at ``path``, decompressed (gzip, bzip2, xz); None for another compression, which
    pandas reads itself. A compressed file cut short or corrupt is one InputError."""
    suffix = path.suffix.lower()
    if suffix in (".zip", ".zst", ".tar", ".tgz"):
        return None
    return read_input_bytes(path, COMPRESSION_BY_SUFFIX.get(suffix)).decode("utf-8-sig")


def _check_last_row(path: Path, text: str, df: pd.DataFrame) -> None:
    """Refuse a CSV whose last row is cut off (a file truncated mid-row), which pandas would read as a row whose
    missing cells are blank: a file that ends without a line break in a record (parsed as pandas parses it) with
    fewer cells than the header, or, in the format :func:`export_table` writes (every line ends with a line break),
    any last line without its line break."""
    if df.empty:
        return
    header, last = None, None
    try:
        for record in csv.reader(io.StringIO(text), skipinitialspace=True):
            if record:
                if header is None:
                    header = record
                last = record
    except csv.Error:  # a record pandas reads but the csv module does not (e.g. a cell over its size limit): no check
        return
    n, have = len(header), len(last)
    ends_line = text.endswith(("\n", "\r"))
    row = len(df)
    if have < n and not ends_line:  # (a short row that ends its line is written so: pandas reads its missing cells blank)
        raise InputError(path, f"its last row (row {row}) is cut off after {have} of the header's {n} cells: "
                               "the file is truncated")
    if not ends_line and header == TABLE_COLUMNS:
        raise InputError(path, f"its last row (row {row}) is cut off: the file does not end with a line break, as every "
                               "table `colopred export` writes does (truncated? if the row is whole, add the line break)")


def _number(v: Any) -> float | None:
    """A cell as a float: blank -> None; nvidia-smi's ``45 %`` / ``1234 MiB`` lose their unit; ValueError otherwise."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, (int, float, np.number)) and not isinstance(v, bool):
        return float(v)
    s = str(v).strip()
    if s == "" or s.lower() in ("n/a", "[n/a]", "nan", "na"):
        return None
    s = re.sub(r"\s*(%|MiB|GiB|ms)$", "", s)
    return float(s)


@dataclass(frozen=True)
class ImportResult:
    campaign_dir: Path
    sets: int
    rows: int
    jobs: tuple[str, ...]
    profiles_written: tuple[str, ...]


def _mapped(df: pd.DataFrame, columns: dict[str, str], path: Path) -> tuple[pd.DataFrame, dict[str, str], dict[str, float]]:
    """``df`` with our column names: ``columns`` ({ours: theirs}) first, then known aliases. Returns the table,
    {ours: theirs} of every column used, and {ours: factor to our unit}."""
    known = set(TABLE_COLUMNS) | {"speed"} | set(PROFILE_COLUMNS)
    for ours, theirs in columns.items():
        if ours not in known:
            raise InputError(path, f"--column {ours}={theirs}: {ours} is not a column of the format ({', '.join(sorted(known))})")
        if theirs not in df.columns:
            raise InputError(path, f"--column {ours}={theirs}: the table has no column {theirs!r}")
    used = dict(columns)
    factor = dict.fromkeys(columns, 1.0)
    for theirs in df.columns:
        if theirs in used.values():
            continue
        if theirs in known and theirs not in used:
            used[theirs] = theirs
            factor[theirs] = 1.0
        elif theirs in ALIASES and ALIASES[theirs][0] not in used:
            ours, f = ALIASES[theirs]
            used[ours] = theirs
            factor[ours] = f
    out = pd.DataFrame({ours: df[theirs] for ours, theirs in used.items()})
    return out, used, factor


def _check_columns(t: pd.DataFrame, path: Path) -> None:
    missing = [c for c in REQUIRED if c not in t.columns]
    if "colo_ms" not in t.columns and "speed" not in t.columns:
        missing.append("colo_ms (or speed)")
    if missing:
        raise InputError(path, f"missing column(s) {', '.join(missing)} (map yours with --column {missing[0].split()[0]}=YOURS)")


def _values(t: pd.DataFrame, col: str, factor: dict[str, float], path: Path, *, positive: bool = True,
            maximum: float | None = None) -> list[float | None]:
    """Column ``col`` of ``t`` in our unit, one value a row (None for a blank cell, and for every row of a table without
    the column); InputError naming the first row whose cell is not a number in range."""
    out = []
    for i, v in enumerate(t[col] if col in t.columns else [None] * len(t)):
        try:
            x = _number(v)
        except ValueError:
            raise InputError(path, f"row {i + 1}: {col} is {str(v)[:20]!r}, not a number") from None
        if x is not None:
            x *= factor.get(col, 1.0)
            if not math.isfinite(x) or (x <= 0 if positive else x < 0):
                raise InputError(path, f"row {i + 1}: {col} is {str(v)[:20]!r}: it must be a {'positive' if positive else 'non-negative'} "
                                       f"finite number{' of ms' if col.endswith('_ms') else ''}")
            if maximum is not None and x > maximum:
                raise InputError(path, f"row {i + 1}: {col} is {str(v)[:20]!r}: more than {maximum:g}")
        out.append(x)
    return out


def coarse_profile(name: str, gpu: GpuInfo, iteration_ms: float, values: dict[str, float | None], meta: dict[str, Any]) -> JobProfile:
    """A GPM-like profile (source ``nvml``) from coarse solo counters, mapped as :mod:`nvml_profile` maps GPM's
    time averages to busy-time ones (``docs/formats.md`` says what each column maps to and what stays missing):

      busy_fraction          = gpu_util_pct / 100
      dram_util_pct          = min(100, mem_util_pct / busy_fraction)
      achieved_occupancy_pct = min(100, sm_occupancy_pct / (sm_active_pct / 100))   (sm_active_pct absent: busy_fraction;
                                                                                      sm_occupancy_pct absent: None)
      tensor_util_pct        = min(100, tensor_util_pct / busy_fraction)
      kernel_ms_per_iteration = busy_fraction x iteration_ms;  peak_memory_gib = memory_used_gib
    """
    busy = values["gpu_util_pct"] / 100.0

    def per_busy(v: float | None, den: float) -> float | None:
        if v is None:
            return None
        return 0.0 if den <= 1e-6 else min(100.0, v / den)

    active = values.get("sm_active_pct")
    return JobProfile(
        name=name, gpu=gpu, source="nvml", iteration_ms=iteration_ms, iterations_profiled=1, busy_fraction=busy,
        dram_util_pct=per_busy(values["mem_util_pct"], busy),
        achieved_occupancy_pct=per_busy(values.get("sm_occupancy_pct"), active / 100.0 if active is not None else busy),
        tensor_util_pct=per_busy(values.get("tensor_util_pct"), busy), kernel_ms_per_iteration=busy * iteration_ms,
        peak_memory_gib=values.get("memory_used_gib"), meta=meta)


def import_table(path: str | os.PathLike, dataset: str | os.PathLike, *, name: str | None = None,
                 columns: dict[str, str] | None = None, profiles_dir: str | os.PathLike | None = None,
                 gpu_name: str | None = None, sm_count: int | None = None, memory_gib: float | None = None) -> ImportResult:
    """Turn the table at ``path`` into a campaign ``dataset/campaigns/NAME`` and profiles ``dataset/profiles/ncu``
    (see the module doc). Everything is checked before anything is written; a profile already in the dataset is
    kept if it is the same job's same profile, else refused; the campaign folder appears whole or not at all."""
    from .. import __version__
    from .dataset import load_profiles_dir

    path = Path(path)
    dataset = Path(dataset)
    name = name or re.sub(r"[^A-Za-z0-9_.-]+", "_", path.name.split(".")[0]) or "imported"
    if not JOB_NAME.match(name):
        raise InputError(None, f"--name {name!r}: a campaign name is letters, digits, _ . - (at most 100)")
    camp_dir = dataset / "campaigns" / name
    if camp_dir.exists():
        raise InputError(camp_dir, "already exists: import under another --name")
    if dataset.exists() and not dataset.is_dir():
        raise InputError(dataset, "is a file; --out names the dataset's folder")
    raw = read_table(path)
    if raw.empty:
        raise InputError(path, "holds no rows")
    t, used, factor = _mapped(raw, columns or {}, path)
    _check_columns(t, path)

    # ---- per row: the measurement
    solo = _values(t, "solo_ms", factor, path)
    colo = _values(t, "colo_ms", factor, path)
    speed = _values(t, "speed", factor, path)
    iters = _values(t, "iterations", factor, path)
    rows = []
    for i in range(len(t)):
        set_id, job = str(t["set_id"].iloc[i]).strip(), str(t["job"].iloc[i]).strip()
        mode = MODE_NAMES.get(str(t["mode"].iloc[i]).strip().lower())
        if not set_id:
            raise InputError(path, f"row {i + 1}: set_id is empty")
        if not JOB_NAME.match(job):
            raise InputError(path, f"row {i + 1}: job {job[:40]!r} is not a usable name (letters, digits, _ . = -; no + or :)")
        if mode is None:
            raise InputError(path, f"row {i + 1}: mode {str(t['mode'].iloc[i])[:20]!r} is not {' or '.join(MODES)}")
        if solo[i] is None:
            raise InputError(path, f"row {i + 1}: solo_ms is empty")
        c = colo[i]
        if c is None:
            if speed[i] is None:
                raise InputError(path, f"row {i + 1}: neither colo_ms nor speed is given")
            c = solo[i] / speed[i]
        elif speed[i] is not None and abs(solo[i] / speed[i] / c - 1) > 0.01:
            raise InputError(path, f"row {i + 1}: colo_ms {c:g} and speed {speed[i]:g} disagree (solo_ms / speed = {solo[i] / speed[i]:g})")
        if iters[i] is not None and not float(iters[i]).is_integer():
            raise InputError(path, f"row {i + 1}: iterations {iters[i]:g} is not a whole number")
        started = str(t["started_at"].iloc[i]).strip() if "started_at" in t.columns else ""
        if started:
            try:
                datetime.fromisoformat(started.replace("Z", "+00:00"))
            except ValueError:
                raise InputError(path, f"row {i + 1}: started_at {started[:30]!r} is not an ISO 8601 time") from None
        gpu = str(t["gpu"].iloc[i]).strip() if "gpu" in t.columns else ""
        rows.append({"row": i + 1, "set_id": set_id, "job": job, "mode": mode, "solo_ms": solo[i], "colo_ms": c,
                     "iterations": None if iters[i] is None else int(iters[i]), "started_at": started or None, "gpu": gpu or None})

    # ---- per set and per table
    sets: dict[str, list[dict]] = {}
    for r in rows:
        sets.setdefault(r["set_id"], []).append(r)
    for sid, members in sets.items():
        if len(members) < 2:
            raise InputError(path, f"set {sid[:40]!r} (row {members[0]['row']}) has one job: a collocation needs two or more")
        for m, instance in zip(members, instance_names([m["job"] for m in members])):  # copies of one job: JOB#1, JOB#2, ...
            m["instance"] = instance
        if len({m["mode"] for m in members}) > 1:
            raise InputError(path, f"set {sid[:40]!r} mixes modes")
    gpus = sorted({r["gpu"] for r in rows if r["gpu"]})
    if len(gpus) > 1:
        raise InputError(path, f"mixes GPUs ({', '.join(g[:30] for g in gpus[:3])}): import one GPU's measurements at a time")
    if gpus and gpu_name and gpus[0] != gpu_name:
        raise InputError(path, f"its gpu column says {gpus[0]!r}, --gpu says {gpu_name!r}")
    gpu_label = gpus[0] if gpus else gpu_name

    # ---- profiles: --profiles first, then the table's profile columns
    jobs = list(dict.fromkeys(r["job"] for r in rows))
    given: dict[str, JobProfile] = {}
    if profiles_dir is not None:
        given = {j: p for j, p in load_profiles_dir(Path(profiles_dir)).items() if j in jobs}
    have_cols = [c for c in PROFILE_COLUMNS if c in t.columns]
    imported_at = datetime.now(UTC).isoformat(timespec="seconds")
    digest = sha256_of(path)
    source = {"tool": f"colopred import {__version__}", "source": path.name, "source_sha256": digest, "imported_at": imported_at}
    profiles: dict[str, JobProfile] = {}
    gpu_info = None
    parsed: dict[str, list[float | None]] = {}  # each profile column parsed once, when the first job built from it needs it
    without_occupancy: list[str] = []
    for j in jobs:
        if j in given:
            profiles[j] = given[j]
            continue
        if not have_cols:
            raise InputError(path, f"job {j} has no profile: give the profile columns ({', '.join(REQUIRED_PROFILE)}) or --profiles DIR")
        idx = [r["row"] - 1 for r in rows if r["job"] == j]
        values: dict[str, float | None] = {}
        for c in have_cols:
            if c not in parsed:
                parsed[c] = _values(t, c, factor, path, positive=False, maximum=None if c == "memory_used_gib" else 100.0 + 1e-9)
            col = parsed[c]
            vals = {col[i] for i in idx if col[i] is not None}
            if len(vals) > 1:
                raise InputError(path, f"job {j}: {c} differs between its rows ({', '.join(f'{v:g}' for v in sorted(vals)[:3])}): "
                                       "profile columns describe the job alone, one value per job")
            values[c] = vals.pop() if vals else None
        lacking = [c for c in REQUIRED_PROFILE if values.get(c) is None]
        if lacking:
            raise InputError(path, f"job {j} lacks {', '.join(lacking)}: a profile from table columns needs {', '.join(REQUIRED_PROFILE)} "
                                   "(or give --profiles DIR)")
        lacks = {} if values.get("sm_occupancy_pct") is not None else {"achieved_occupancy_pct": NO_OCCUPANCY}
        if gpu_info is None:
            if not gpu_label:
                raise InputError(path, "no gpu column: give --gpu NAME for the profiles built from its columns")
            try:
                gpu_info = GpuInfo.from_name(gpu_label, sm_count=sm_count, memory_gib=memory_gib)
            except ValueError as e:
                raise InputError(path, f"{e} (--gpu-sm-count, --gpu-memory-gib)") from None
        solo_mean = float(np.mean([rows[i]["solo_ms"] for i in idx]))
        meta = {**source, "columns": {c: used[c] for c in have_cols}, "iteration_ms_from": f"mean solo_ms of the job's {len(idx)} rows",
                "iterations_profiled": "not known (imported)", **({"lacks": lacks} if lacks else {})}
        if lacks:
            without_occupancy.append(j)
        try:
            profiles[j] = coarse_profile(j, gpu_info, solo_mean, values, meta)
        except ValueError as e:
            raise InputError(path, f"job {j}: its columns give no valid profile ({str(e)[:120]})") from None

    # each profile in the folder of its source, the one `train --profiles SOURCE` reads: ncu, or nvml (GPM and the
    # coarse profiles built from table columns)
    pdir = {j: dataset / "profiles" / profiles[j].source for j in jobs}
    existing = {}
    for j in jobs:
        f = pdir[j] / f"{j}.json"
        if f.exists():
            existing[j] = JobProfile.from_json(f)
            if existing[j].with_(meta={}) != profiles[j].with_(meta={}):  # the same measurement, whenever imported
                raise InputError(f, f"holds another profile of {j}: import into another dataset, or give this one with --profiles")

    # ---- records: per set, its own segment (run_id) of one solo window per job (copies of a job share it), then the
    # collocated window, whose results are keyed by instance name (JOB#k for a copy)
    records = []
    n = 0
    for k, (sid, members) in enumerate(sets.items()):
        mode = members[0]["mode"]
        prov = {"gpu": gpu_label, "gpu_uuid": None, "driver": None, "cuda": None, "torch": None, "python": None, "host": None,
                "harness_version": None, "mode": mode, "date": imported_at, **{k2: v for k2, v in source.items() if k2 != "imported_at"}}
        base = {"schema": RECORD_SCHEMA, "mode": mode, "repeat": 0, "status": "ok", "reason": None, "gpm": None,
                "started_at": members[0]["started_at"], "provenance": prov, "run_id": f"import-{k:06d}", "park_idle": False}
        for j in dict.fromkeys(m["job"] for m in members):
            copies = [m for m in members if m["job"] == j]
            res = {"status": "ok", "mean_ms": float(np.mean([m["solo_ms"] for m in copies])) if len(copies) > 1 else copies[0]["solo_ms"]}
            records.append({**base, "window_id": f"{mode}:{n:06d}:solo:{j}:r0", "kind": "solo", "jobs": [j],
                            "results": {j: res}, "imported": {"set_id": sid, "rows": [m["row"] for m in copies]}})
            n += 1
        results = {m["instance"]: {"status": "ok", "mean_ms": m["colo_ms"], **({"iterations": m["iterations"]} if m["iterations"] is not None else {})}
                   for m in members}
        records.append({**base, "window_id": f"{mode}:{n:06d}:colo:{'+'.join(m['instance'] for m in members)}:r0", "kind": "colo",
                        "jobs": [m["instance"] for m in members], "results": results,
                        "imported": {"set_id": sid, "rows": [m["row"] for m in members]}})
        n += 1
    if without_occupancy:
        warnings.warn(f"{path}: {len(without_occupancy)} of {len(jobs)} profiles built from its columns have no achieved occupancy "
                      f"({NO_OCCUPANCY.split(': ', 1)[0]}): the models read it as missing (meta.lacks of each)", UserWarning, stacklevel=2)

    # ---- write: profiles (atomically, new ones only), then the campaign in a hidden folder renamed into place
    (dataset / "campaigns").mkdir(parents=True, exist_ok=True)
    written = []
    for j in jobs:
        if j not in existing:
            pdir[j].mkdir(parents=True, exist_ok=True)
            profiles[j].to_json(pdir[j] / f"{j}.json")
            written.append(j)
    tmp = dataset / f".{name}.importing"  # outside campaigns/: a killed import leaves no half campaign there
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        text = "".join(json.dumps(r, sort_keys=True, allow_nan=False) + "\n" for r in records)
        write_text_atomic(tmp / "windows.jsonl", text)
        manifest = {**source, "source_path": str(path.resolve()), "columns": used,
                    "units": {c: UNIT_CHANGES.get(f, f"x{f:g}") for c, f in factor.items() if f != 1.0}, "rows": len(rows),
                    "sets": len(sets),
                    "jobs": jobs, "gpu": gpu_label,
                    "profiles": {j: ("--profiles " + str(Path(profiles_dir))) if j in given else "table columns" for j in jobs},
                    **({"profiles_lack": {"achieved_occupancy_pct": without_occupancy}} if without_occupancy else {})}
        write_text_atomic(tmp / IMPORT_FILE, json.dumps(manifest, indent=1) + "\n")
        os.replace(tmp, camp_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return ImportResult(camp_dir, len(sets), len(rows), tuple(jobs), tuple(written))
