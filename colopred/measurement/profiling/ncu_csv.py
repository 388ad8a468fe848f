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
import io
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ...constants import NCU_PCT_TOLERANCE
from ...errors import InputError
from ...io import read_input_bytes

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
_HEADER_PREFIX = b'"ID","Process ID"'


@dataclass(frozen=True)
class NcuReport:
    """A parsed report: the kernel table and what it says of the GPU."""

    kernels: pd.DataFrame
    gpu_name: str | None
    sm_count: int | None
    path: str
    left_out: dict[str, str] = field(default_factory=dict)
    """Optional metrics the report holds but the kernel table leaves out, each with why (some kernels' values lie
    outside the metric's plausible range, :data:`PLAUSIBLE_RANGE`): ``{metric: "N of M kernels outside lo..hi %"}``."""

    @property
    def total_kernel_ms(self) -> float:
        return float(self.kernels["duration_ns"].sum()) / 1e6


def _locate_header(path: Path, data: bytes) -> tuple[int, int]:
    """(line number of the header row, offset in ``data`` where the header row starts), skipping the preamble."""
    if data.startswith(_HEADER_PREFIX):
        return 0, 0
    at = data.find(b"\n" + _HEADER_PREFIX)
    if at < 0:
        error = _ncu_error(data)
        if error is not None:  # ncu failed and wrote its error where the table would be: that is the cause
            raise InputError(path, f'no ncu CSV header found: ncu reported an error: "{error}"')
        raise InputError(
            path,
            "no ncu CSV header found (expected a row starting with \"ID\",\"Process ID\"; "
            "was the report written with `ncu --csv --page raw`?)",
        )
    return data.count(b"\n", 0, at + 1), at + 1


NCU_ERROR_CHARS = 200
"""How much of ncu's own ``==ERROR==`` line a message quotes: the longest recorded, application replay's
"Unexpected number of profiled kernels..." (tests/fixtures/ncu_app_replay_error.csv.gz), is 182 characters."""


def _ncu_error(data: bytes) -> str | None:
    """The first ``==ERROR==`` line ncu wrote in ``data`` (trimmed to NCU_ERROR_CHARS), or None."""
    if data.startswith(b"==ERROR=="):
        at = 0
    else:
        at = data.find(b"\n==ERROR==")
        if at < 0:
            return None
        at += 1
    line = _split_line(data, at)[0].decode("utf-8", errors="replace").strip()
    return line if len(line) <= NCU_ERROR_CHARS else line[: NCU_ERROR_CHARS - 3] + "..."


def _parse_row(path: Path, line: bytes, what: str) -> list[str]:
    try:
        return next(csv.reader([line.decode("utf-8", errors="replace")]))
    except (csv.Error, StopIteration) as e:
        raise InputError(path, f"{what} is not valid CSV ({str(e)[:80]})") from None


def _split_line(data: bytes, start: int) -> tuple[bytes, int]:
    """(the line starting at ``start`` without its end of line, offset of the next line)."""
    end = data.find(b"\n", start)
    if end < 0:
        return data[start:].rstrip(b"\r"), len(data)
    return data[start:end].rstrip(b"\r"), end + 1


def _check_rows(path: Path, body: bytes, header: list[str], first_line: int) -> bytes:
    """``body`` (the lines after the units row) with ncu's own trailing lines (``==PROF==`` ...) removed,
    after checking that every data row has the header's number of cells: a row cut short, or cut short and
    merged with the next, would otherwise be read from the wrong columns. ncu quotes every cell, so a row
    of N cells has 2N quotes and N-1 ``","`` separators; a row that does not is parsed exactly with csv."""
    n = len(header)
    n_quotes, n_seps = 2 * n, n - 1
    lines = body.split(b"\n")
    dropped = False
    for i, line in enumerate(lines):
        if line.count(b'","') == n_seps and line.count(b'"') == n_quotes and line[:1] == b'"' and line.rstrip(b"\r")[-1:] == b'"':
            continue
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith(b"=="):  # ncu's own messages after the table
            lines[i] = b""
            dropped = True
            continue
        where = first_line + i + 1
        text = line.decode("utf-8", errors="replace")
        try:
            cells = next(csv.reader([text]))
        except csv.Error as e:
            raise InputError(path, f"malformed line {where} ({str(e)[:80]})") from None
        kid = cells[0].strip() if cells else ""
        if kid.isdigit():
            try:  # strict: a quote not closed on its line, or text after a closing quote (ncu never writes either)
                next(csv.reader([text], strict=True))
                if line.count(b'"') % 2:
                    raise csv.Error("a quote is not closed")
            except csv.Error as e:
                raise InputError(path, f"malformed line {where} (kernel ID {kid[:20]}): not valid CSV ({str(e)[:60]}): a row cut "
                                       "short, or cut short and merged with the next?") from None
        if not kid.isdigit():
            raise InputError(path, f"malformed line {where} (ID {kid[:40]!r} is not a kernel ID)")
        if len(cells) < n:
            raise InputError(path, f"malformed line {where} (kernel ID {kid}): {len(cells)} cells where the header has {n}; "
                                   f"the row is cut short after column {header[len(cells) - 1][:60]!r}")
        if len(cells) > n:
            raise InputError(path, f"malformed line {where} (kernel ID {kid}): {len(cells)} cells where the header has {n} "
                                   f"(a row cut short and merged with the next?)")
    return b"\n".join(lines) if dropped else body


def _line_of(body: bytes, row: int, first_line: int) -> int:
    """Line number in the file of the ``row``-th data row of ``body`` (blank lines, which pandas skips, counted)."""
    seen = -1
    for n, line in enumerate(body.split(b"\n")):
        if line.strip():
            seen += 1
            if seen == row:
                return first_line + n + 1
    return first_line + 1


def read_ncu_csv(
    path: str | os.PathLike,
    *,
    process_id: int | None = None,
    device: int | None = None,
) -> NcuReport:
    """Parse an ``ncu --csv --page raw`` report (plain or gzip) into a kernel table.

    Raises :class:`InputError` naming the file and the problem for a missing header, a missing required
    metric (and the ncu flag that adds it), a unit it cannot convert, a truncated or corrupt file, a row
    whose number of cells differs from the header's (the line and kernel ID), a cell that is not a number
    (a misplaced thousands separator included), a required metric's value outside its range (the kernel ID
    and column: a percentage in 0..100, a time >= 0), all durations 0, an empty profiling window, or a report
    holding several processes or devices when none was picked.

    An optional metric with a value outside its plausible range (:data:`PLAUSIBLE_RANGE`) costs that metric,
    not the report: its column is left out of the kernel table, the ``UserWarning`` and
    :attr:`NcuReport.left_out` name it and how many kernels.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(path, "no such file")
    if path.is_dir():
        raise InputError(path, "is a directory, not an ncu CSV report")
    data = read_input_bytes(path, "auto")  # the whole report, gzip or plain
    header_at, offset = _locate_header(path, data)
    header_line, offset = _split_line(data, offset)
    units_line, offset = _split_line(data, offset)
    header = _parse_row(path, header_line, "the header row")
    if not units_line.strip():
        raise InputError(path, "report ends after the header row (truncated file?)")
    units = _parse_row(path, units_line, "the units row")
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

    body = _check_rows(path, data[offset:], header, header_at + 2)
    del data
    usecols = [col_index[c] for c in wanted]
    # Percentages are read as numbers (a report with a separator in one, "1,340.18", falls back to text below);
    # times and launch counts as text, since ncu prints them with separators ("137,376").
    as_float = {col_index[c] for c, (_, kind) in wanted.items() if kind == "pct"}

    def read_table(dtype) -> pd.DataFrame:
        try:
            return pd.read_csv(io.BytesIO(body), header=None, usecols=usecols, dtype=dtype, keep_default_na=False,
                               na_values=[], engine="c", encoding="utf-8", encoding_errors="replace")
        except pd.errors.EmptyDataError:
            return pd.DataFrame(columns=usecols)

    try:
        df = read_table({i: (float if i in as_float else str) for i in usecols})
    except (ValueError, pd.errors.ParserError):
        # A non-numeric cell somewhere: read as text and find it below.
        try:
            df = read_table(str)
        except (pd.errors.ParserError, ValueError) as e:
            raise InputError(path, f"malformed CSV after the header: {str(e).splitlines()[0][:120]}") from None
    names = {col_index[c]: c for c in wanted}
    df = df.rename(columns=names)
    if df.empty:
        raise InputError(path, "the report has no kernels (empty profiling window: check the profiler start/stop range)")

    out = pd.DataFrame(index=df.index)
    left_out: dict[str, str] = {}
    for col, (new, kind) in wanted.items():
        s = df[col]
        if kind == "id":
            out[new] = s
            continue
        num, problem_at = _numbers(s, kind)
        lo, hi = PLAUSIBLE_RANGE.get(col, _RANGES[kind])
        if problem_at is None:
            with np.errstate(invalid="ignore"):
                outside = ~((num >= lo) & (num <= hi)).to_numpy() & num.notna().to_numpy()
            if outside.any():
                i = int(np.flatnonzero(outside)[0])
                unit = units[col_index[col]]
                value = s.iloc[i] if isinstance(s.iloc[i], str) else f"{s.iloc[i]:g}"
                if col in REQUIRED_METRICS:
                    raise InputError(path, f"metric {col} of kernel ID {df['ID'].iloc[i]} is {value!r}, outside "
                                           f"{lo:g}..{hi:g} {unit}")
                left_out[col] = (f"{int(outside.sum())} of {len(outside)} kernels outside {lo:g}..{hi:g} {unit} (kernel ID "
                                 f"{df['ID'].iloc[i]}: {value})")
                warnings.warn(f"{path}: metric {col}: {left_out[col]}; left out of the profile", UserWarning, stacklevel=2)
                continue
        else:
            i, problem = problem_at
            # Optional metrics and launch statistics may be n/a for some kernels; required ones may not.
            raise InputError(path, f"metric {col} of kernel ID {df['ID'].iloc[i]} {problem}")
        if kind == "time":
            num = num * _TIME_UNITS_NS[units[col_index[col]]]
        out[new] = num.astype(float)
    ids = out["kernel_id"].astype(str).str.strip()
    bad = ~ids.str.fullmatch(r"\d{1,18}").to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(path, f"malformed line {_line_of(body, i, header_at + 2)} (ID {ids.iloc[i][:40]!r} is not a kernel ID)")
    out["kernel_id"] = ids.astype(np.int64)
    dup = out["kernel_id"].duplicated().to_numpy()
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        raise InputError(path, f"kernel ID {out['kernel_id'].iloc[i]} appears twice (line {_line_of(body, i, header_at + 2)} "
                               "repeats an earlier row)")
    if not (out["duration_ns"] > 0).any():
        raise InputError(path, "every kernel has gpu__time_duration.sum 0: the report holds no kernel time")
    for c, col in (("process_id", "Process ID"), ("device", "Device")):
        if c in out:
            text = out[c].astype(str).str.strip()
            bad = ~(text.str.fullmatch(r"\d{1,9}") | text.isin(("", "n/a"))).to_numpy()
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise InputError(path, f"{col} of kernel ID {out['kernel_id'].iloc[i]} is {text.iloc[i][:30]!r}, not a number")
            out[c] = pd.to_numeric(text, errors="coerce").astype("Int64")

    out = _select(out, path, process_id=process_id, device=device)

    gpu_name = None
    sm_count = None
    if GPU_NAME_COLUMN in out:
        names_seen = out[GPU_NAME_COLUMN].dropna().unique()
        gpu_name = str(names_seen[0]) if len(names_seen) else None
        out = out.drop(columns=[GPU_NAME_COLUMN])
    if SM_COUNT_COLUMN in out:
        sm = pd.to_numeric(out[SM_COUNT_COLUMN].str.replace(",", "", regex=False), errors="coerce").dropna()
        sm_count = int(sm.iloc[0]) if len(sm) and 0 < sm.iloc[0] < 1e6 else None
        out = out.drop(columns=[SM_COUNT_COLUMN])
    if sm_count is None and "sm_count" in out and out["sm_count"].notna().any():
        sm_count = int(out["sm_count"].dropna().iloc[0])
    return NcuReport(kernels=out.reset_index(drop=True), gpu_name=gpu_name, sm_count=sm_count, path=str(path),
                     left_out=left_out)


# Range of each unit kind: a required metric's value outside it refuses the report, an optional metric's costs
# that metric (PLAUSIBLE_RANGE gives a metric its own).
_RANGES = {"pct": (0.0, 100.0 + NCU_PCT_TOLERANCE), "time": (0.0, np.inf), "count": (0.0, np.inf)}
PLAUSIBLE_RANGE: dict[str, tuple[float, float]] = {
    # ncu's per-kernel L2 hit rate (hits / lookups) exceeds 100 where hits and lookups were counted in different
    # replay passes of a kernel too small to reach a steady state (NVIDIA's answer on its developer forum, "Weird
    # number for L2 cache hitrate"): on real reports up to 132.58 % (H100) and 1,340.18 % (H200), on kernels of a few
    # µs (under 1% of the kernel time of the H200 resnet50 report). No upper bound holds across GPUs; the
    # duration-weighted hit rate of a profile (JobProfile.l2_hit_rate_pct) is bounded by 100 instead.
    "lts__t_sector_hit_rate.pct": (0.0, np.inf),
}
_THOUSANDS = r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d*)?(?:[eE][+-]?\d+)?"


_THOUSANDS_RE = re.compile(_THOUSANDS)


def _number(v: str) -> float:
    """A cell as ncu prints it: a separator only between groups of three digits ("137,376", "1,340.18"), never a
    decimal comma ("1,5" is refused, not read as 15)."""
    if "," not in v:
        return float(v)
    if not _THOUSANDS_RE.fullmatch(v.strip()):
        raise ValueError(v)
    return float(v.replace(",", ""))


def _numbers(s: pd.Series, kind: str) -> tuple[pd.Series, tuple[int, str] | None]:
    """(the column as floats, NaN where n/a; (row, problem) of its first bad cell, or None)."""
    if pd.api.types.is_numeric_dtype(s):
        num = s.astype(float)
        bad = ~np.isfinite(num.to_numpy())
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            return num, (i, f"is not a finite number ({s.iloc[i]!r})")
        return num, None
    try:  # the common case: every cell a number, separators where ncu puts them
        num = pd.Series(np.fromiter((_number(v) for v in s.to_numpy(dtype=object)), float, len(s)), index=s.index)
        if np.isfinite(num.to_numpy()).all():
            return num, None
    except (ValueError, TypeError):
        pass
    text = s.astype(str).str.strip()
    has_sep = text.str.contains(",", regex=False)
    if has_sep.any():
        wrong = has_sep & ~text.str.fullmatch(_THOUSANDS)
        if wrong.any():
            i = int(np.flatnonzero(wrong.to_numpy())[0])
            return text, (i, f"is not a number ({text.iloc[i][:30]!r}: misplaced thousands separator)")
        text = text.str.replace(",", "", regex=False)
    num = pd.to_numeric(text, errors="coerce")
    bad = ~np.isfinite(num.to_numpy(dtype=float, na_value=np.nan))
    if s.name not in REQUIRED_METRICS:  # optional metrics and launch statistics may be n/a for some kernels
        bad &= ~text.str.lower().isin(("n/a", "")).to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        value = text.iloc[i]
        return num, (i, "is empty" if value == "" else f"is not a finite number ({value[:30]!r})")
    return num.astype(float), None


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
