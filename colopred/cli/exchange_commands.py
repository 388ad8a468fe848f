"""``colopred import`` (someone else's collocation table -> records and profiles) and ``colopred export`` (records ->
that table)."""

from __future__ import annotations

from ..errors import ColopredError, InputError


def _columns(specs: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for s in specs or []:
        ours, sep, theirs = s.partition("=")
        if not sep or not ours.strip() or not theirs:
            raise ColopredError(f"--column {s!r}: expected OURS=THEIRS, e.g. --column solo_ms=baseline_ms")
        if ours.strip() in out:
            raise ColopredError(f"--column: {ours.strip()} is mapped twice")
        out[ours.strip()] = theirs
    return out


def cmd_import(a) -> int:
    import warnings

    from ..research.exchange import import_table
    from .profile_commands import check_number
    from .common import log_of, print_warnings

    check_number(a.gpu_memory_gib, "--gpu-memory-gib", unit=" GiB")
    if a.gpu_sm_count is not None and a.gpu_sm_count < 1:
        raise ColopredError(f"--gpu-sm-count must be a positive integer, not {a.gpu_sm_count}")
    with warnings.catch_warnings(record=True) as caught:  # what the profiles built from the table's columns lack
        warnings.simplefilter("always")
        r = import_table(a.table, a.out, name=a.name, columns=_columns(a.column), profiles_dir=a.profiles, gpu_name=a.gpu,
                         sm_count=a.gpu_sm_count, memory_gib=a.gpu_memory_gib)
    print_warnings(caught)
    log_of(a)(f"imported {r.rows} rows ({r.sets} sets, {len(r.jobs)} jobs) into {r.campaign_dir}; "
              f"{len(r.profiles_written)} profiles written to {a.out}/profiles/ (ncu/ or nvml/ by source: train --profiles SOURCE)")
    return 0


def cmd_export(a) -> int:
    from ..io import check_output
    from ..research.exchange import export_table, write_table
    from .common import log_of

    check_output(a.output, *a.paths)
    if not a.output.lower().endswith((".csv", ".csv.gz", ".parquet")):
        raise InputError(a.output, "the table is written as CSV or Parquet: name it .csv, .csv.gz or .parquet")
    t = export_table(a.paths)
    if t.empty:
        raise ColopredError(f"{a.paths[0]}: no collocated window with solo baselines of its jobs: nothing to export")
    write_table(t, a.output)
    log_of(a)(f"wrote {a.output} ({len(t)} rows, {t['set_id'].nunique()} sets)")
    return 0


def add_commands(sub) -> None:
    from .common import command

    p = command(sub, "import", "turn a table of collocation measurements into records and profiles", cmd_import,
                "Turn a tidy table of collocation measurements (one row per job of each set; docs/formats.md, "
                "\"Collocation table\") into a campaign and profiles that train and evaluate read.")
    p.add_argument("table", help="the table: CSV, or Parquet where pandas has an engine")
    p.add_argument("--out", required=True, help="dataset folder: writes campaigns/NAME/ and profiles/SOURCE/JOB.json (ncu, or nvml for GPM-like profiles)")
    p.add_argument("--name", help="the campaign's name (default: the table's file name)")
    p.add_argument("--column", action="append", metavar="OURS=THEIRS",
                   help="read column OURS (set_id, job, mode, solo_ms, colo_ms, speed, gpu, gpu_util_pct, ...) from the "
                        "table's column THEIRS; repeatable")
    p.add_argument("--profiles", help="folder of JobProfile JSON for the table's jobs (wins over its profile columns)")
    p.add_argument("--gpu", help="GPU name as NVML reports it, where the table has no gpu column")
    p.add_argument("--gpu-sm-count", type=int, help="SM count of a GPU colopred does not know")
    p.add_argument("--gpu-memory-gib", type=float, help="memory of a GPU colopred does not know, GiB")

    p = command(sub, "export", "write records as the collocation table import reads", cmd_export,
                "One row per job of each collocated window with its solo baseline, in the format `colopred import` reads.")
    p.add_argument("paths", nargs="+", help="campaign directories or windows.jsonl files")
    p.add_argument("-o", "--output", required=True, help="table to write: .csv, or .parquet")
