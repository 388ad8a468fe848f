"""Parse the CSV that ``ncu --csv --page raw`` prints into one kernel table.

Real reports (``ncu ... --csv --page raw`` to stdout, or ``ncu --import R.ncu-rep --csv
--page raw``) carry, before the header row, the profiled program's own output and
``==PROF==``/``==WARNING==`` lines; right after the header a units row (``ns``, ``%``,
``byte``...); numbers with thousands separators (``137,376``); kernel names with commas,
quotes and templates; and hundreds of columns. This module reads only the columns it
needs, converts units, and returns a DataFrame with one row per kernel launch:

=================  =====================================================
column             meaning
=================  =====================================================
kernel_id          ncu's ``ID``
process_id         ``Process ID``
device             ``Device``
kernel_name        ``Kernel Name``
duration_ns        ``gpu__time_duration.sum`` converted to ns
dram_pct           ``dram__throughput.avg.pct_of_peak_sustained_elapsed``
occupancy_pct      ``sm__warps_active.avg.pct_of_peak_sustained_active``
sm_pct             ``sm__throughput.avg.pct_of_peak_sustained_elapsed`` (optional)
theo_occupancy_pct ``sm__maximum_warps_per_active_cycle_pct`` (optional)
l2_hit_pct         ``lts__t_sector_hit_rate.pct`` (optional)
grid_size, ...     ``launch__*`` columns, where present
=================  =====================================================
"""

from __future__ import annotations

import csv
import gzip
import io
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import InputError

# metric -> (column name in the kernel table, unit kind)
REQUIRED_METRICS: dict[str, tuple[str, str]] = {
    "gpu__time_duration.sum": ("duration_ns", "time"),
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": ("dram_pct", "pct"),
    "sm__warps_active.avg.pct_of_peak_sustained_active": ("occupancy_pct", "pct"),
}
OPTIONAL_METRICS: dict[str, tuple[str, str]] = {
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": ("sm_pct", "pct"),
    "sm__maximum_warps_per_active_cycle_pct": ("theo_occupancy_pct", "pct"),
    "lts__t_sector_hit_rate.pct": ("l2_hit_pct", "pct"),
    "launch__grid_size": ("grid_size", "count"),
    "launch__block_size": ("block_size", "count"),
    "launch__registers_per_thread": ("registers_per_thread", "count"),
    "launch__waves_per_multiprocessor": ("waves_per_sm", "count"),
    "launch__sm_count": ("sm_count", "count"),
}
ID_COLUMNS = {
    "ID": "kernel_id",
    "Process ID": "process_id",
    "Process Name": "process_name",
    "Device": "device",
    "Kernel Name": "kernel_name",
}
GPU_NAME_COLUMN = "device__attribute_display_name"
SM_COUNT_COLUMN = "device__attribute_multiprocessor_count"

# The --metrics list that produces every column above (launch__* come for free).
NCU_METRICS = list(REQUIRED_METRICS) + [m for m in OPTIONAL_METRICS if not m.startswith("launch__")]

_TIME_UNITS_NS = {
    "ns": 1.0, "nsecond": 1.0, "nanosecond": 1.0,
    "us": 1e3, "usecond": 1e3, "microsecond": 1e3,
    "ms": 1e6, "msecond": 1e6, "millisecond": 1e6,
    "s": 1e9, "second": 1e9,
}
_HEADER_PREFIX = '"ID","Process ID"'


@dataclass(frozen=True)
class NcuReport:
    """A parsed report: the kernel table and what it says of the GPU."""

    kernels: pd.DataFrame
    gpu_name: str | None
    sm_count: int | None
    path: str

    @property
    def total_kernel_ms(self) -> float:
        return float(self.kernels["duration_ns"].sum()) / 1e6


def _open_text(path: Path) -> io.TextIOBase:
    raw = path.open("rb")
    magic = raw.read(2)
    raw.seek(0)
    if magic == b"\x1f\x8b":
        return io.TextIOWrapper(gzip.GzipFile(fileobj=raw), encoding="utf-8", errors="replace", newline="")
    return io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="")


def _locate_header(path: Path) -> tuple[int, str, str]:
    """(line number of the header row, header line, units line), skipping the preamble."""
    with _open_text(path) as f:
        for n, line in enumerate(f):
            if line.startswith(_HEADER_PREFIX):
                return n, line, f.readline()
    raise InputError(
        path,
        "no ncu CSV header found (expected a row starting with \"ID\",\"Process ID\"; "
        "was the report written with `ncu --csv --page raw`?)",
    )


def _parse_row(line: str) -> list[str]:
    return next(csv.reader([line]))


def read_ncu_csv(
    path: str | os.PathLike,
    *,
    process_id: int | None = None,
    device: int | None = None,
) -> NcuReport:
    """Parse an ``ncu --csv --page raw`` report (plain or gzip) into a kernel table.

    Raises :class:`InputError` naming the file and the problem for a missing header,
    a missing required metric (and the ncu flag that adds it), a unit it cannot
    convert, a non-numeric or NaN cell, an empty profiling window, or a report holding
    several processes or devices when none was picked.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(path, "no such file")
    if path.is_dir():
        raise InputError(path, "is a directory, not an ncu CSV report")
    header_at, header_line, units_line = _locate_header(path)
    header = _parse_row(header_line)
    if not units_line.strip():
        raise InputError(path, "report ends after the header row (truncated file?)")
    units = _parse_row(units_line)
    if len(units) != len(header) or units[0] != "":
        raise InputError(path, "second row is not ncu's units row (expected `--page raw` output with units)")
    col_index = {name: i for i, name in enumerate(header)}

    missing = [m for m in REQUIRED_METRICS if m not in col_index]
    if missing:
        raise InputError(
            path,
            f"required metric {missing[0]} is missing (profile with `ncu --metrics {','.join(REQUIRED_METRICS)}`)",
        )
    wanted: dict[str, tuple[str, str]] = {}
    for col, new in ID_COLUMNS.items():
        if col in col_index:
            wanted[col] = (new, "id")
    for metric, spec in {**REQUIRED_METRICS, **OPTIONAL_METRICS}.items():
        if metric in col_index:
            wanted[metric] = spec
    for extra in (GPU_NAME_COLUMN, SM_COUNT_COLUMN):
        if extra in col_index:
            wanted[extra] = (extra, "id")
    for col in ("ID", "Kernel Name"):
        if col not in col_index:
            raise InputError(path, f"column {col!r} is missing from the report header")

    # Units must be ones we understand.
    for col, (_, kind) in wanted.items():
        unit = units[col_index[col]]
        if kind == "time" and unit not in _TIME_UNITS_NS:
            raise InputError(path, f"metric {col} has unit {unit!r}; expected a time unit (ns, us, ms, s)")
        if kind == "pct" and unit != "%":
            raise InputError(path, f"metric {col} has unit {unit!r}; expected '%'")

    usecols = [col_index[c] for c in wanted]
    numeric = {col_index[c] for c, (_, kind) in wanted.items() if kind != "id"}

    def read_table(dtype) -> pd.DataFrame:
        try:
            with _open_text(path) as f:
                return pd.read_csv(f, header=None, skiprows=header_at + 2, usecols=usecols, dtype=dtype, thousands=",",
                                   keep_default_na=False, na_values=[], engine="c")
        except pd.errors.EmptyDataError:
            return pd.DataFrame(columns=usecols)

    try:
        df = read_table({i: (float if i in numeric else str) for i in usecols})
    except (ValueError, pd.errors.ParserError):
        # A non-numeric cell or a malformed line somewhere: read as text and find it below.
        try:
            df = read_table(str)
        except (pd.errors.ParserError, ValueError) as e:
            raise InputError(path, f"malformed CSV after the header: {str(e).splitlines()[0]}") from None
    names = {col_index[c]: c for c in wanted}
    df = df.rename(columns=names)

    # Lines after the table that ncu or the program printed (==PROF== ...), or a row cut short.
    ids = df["ID"].fillna("").astype(str).str.strip()
    is_row = ids.str.fullmatch(r"\d+")
    if not is_row.all():
        first_bad = int(np.flatnonzero(~is_row.to_numpy())[0])
        text = ids.iloc[first_bad]
        if not text.startswith("=="):
            raise InputError(path, f"malformed line {header_at + 3 + first_bad} (ID {text[:40]!r} is not a kernel ID)")
        df = df[is_row.to_numpy()]
    if df.empty:
        raise InputError(path, "the report has no kernels (empty profiling window: check the profiler start/stop range)")

    out = pd.DataFrame(index=df.index)
    for col, (new, kind) in wanted.items():
        s = df[col]
        if kind == "id":
            out[new] = s
            continue
        if pd.api.types.is_numeric_dtype(s):
            num = s.astype(float)
        else:
            num = pd.to_numeric(s.str.replace(",", "", regex=False), errors="coerce")
        bad = num.isna() | ~np.isfinite(num)
        if kind == "count":
            out[new] = num  # launch statistics: best effort
            continue
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            row = df.iloc[i]
            value = s.iloc[i]
            cut_short = row.isna().sum() > 1  # several cells missing: the row ends early
            if isinstance(value, float) and not cut_short:  # parsed as a number: nan or inf
                problem = f"is not a finite number ({value!r})"
                value = "nan"
            elif not isinstance(value, str) or cut_short:
                problem = "is missing (row cut short: truncated file?)"
                value = ""
            elif value == "":
                problem = "is empty"
            else:
                problem = f"is not a finite number ({value[:30]!r})"
            # Optional metrics may be n/a for some kernels; required ones may not.
            if col in REQUIRED_METRICS or value.lower() not in ("n/a", ""):
                raise InputError(path, f"metric {col} of kernel ID {row['ID']} {problem}")
        if kind == "time":
            num = num * _TIME_UNITS_NS[units[col_index[col]]]
        out[new] = num.astype(float)
    out["kernel_id"] = out["kernel_id"].astype(np.int64)
    for c in ("process_id", "device"):
        if c in out:
            out[c] = pd.to_numeric(out[c], errors="coerce").astype("Int64")

    if (out["duration_ns"] < 0).any():
        raise InputError(path, "a kernel has a negative gpu__time_duration.sum")
    out = _select(out, path, process_id=process_id, device=device)

    gpu_name = None
    sm_count = None
    if GPU_NAME_COLUMN in out:
        names_seen = out[GPU_NAME_COLUMN].dropna().unique()
        gpu_name = str(names_seen[0]) if len(names_seen) else None
        out = out.drop(columns=[GPU_NAME_COLUMN])
    if SM_COUNT_COLUMN in out:
        sm = pd.to_numeric(out[SM_COUNT_COLUMN].str.replace(",", "", regex=False), errors="coerce").dropna()
        sm_count = int(sm.iloc[0]) if len(sm) else None
        out = out.drop(columns=[SM_COUNT_COLUMN])
    if sm_count is None and "sm_count" in out and out["sm_count"].notna().any():
        sm_count = int(out["sm_count"].dropna().iloc[0])
    return NcuReport(kernels=out.reset_index(drop=True), gpu_name=gpu_name, sm_count=sm_count, path=str(path))


def _select(df: pd.DataFrame, path: Path, *, process_id: int | None, device: int | None) -> pd.DataFrame:
    for col, pick, flag in (("process_id", process_id, "--process"), ("device", device, "--device")):
        if col not in df:
            if pick is not None:
                raise InputError(path, f"cannot select by {col}: the report has no such column")
            continue
        seen = sorted(int(x) for x in df[col].dropna().unique())
        if pick is not None:
            if pick not in seen:
                raise InputError(path, f"{col} {pick} is not in the report (it has {', '.join(map(str, seen))})")
            df = df[df[col] == pick]
        elif len(seen) > 1:
            raise InputError(
                path,
                f"the report holds {len(seen)} {col.replace('_', ' ')}s ({', '.join(map(str, seen))}); pick one with {flag}",
            )
    return df
