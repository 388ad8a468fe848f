"""Nsight Compute's binary reports (``.ncu-rep``) -> the CSV :func:`ncu_csv.read_ncu_csv` reads.

An ``.ncu-rep`` file is Nsight Compute's own format, which only ``ncu`` reads: ``ncu --import REPORT --csv
--page raw`` prints every metric the report holds, one row per kernel, exactly as ``ncu --csv --page raw``
prints it while profiling (the columns colopred needs are the ``--metrics`` of
:data:`ncu_csv.NCU_METRICS`; a report taken without them is refused by the CSV reader naming the metric).
Where ``ncu`` is not on PATH the user is told the one command that exports the report elsewhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from ...errors import InputError

NCU_REP_SUFFIX = ".ncu-rep"
EXPORT_TIMEOUT_S = 600.0  # a report of a few thousand kernels exports in seconds; a hung ncu is cut off


def is_ncu_rep(path: str | os.PathLike) -> bool:
    return str(path).lower().endswith(NCU_REP_SUFFIX)


def export_command(report: str | os.PathLike, ncu: str = "ncu") -> list[str]:
    """The ncu invocation that prints ``report`` as the CSV colopred reads."""
    return [ncu, "--import", os.fspath(report), "--csv", "--page", "raw"]


def export_ncu_rep(report: str | os.PathLike, csv_path: str | os.PathLike, ncu: str = "ncu") -> None:
    """Write ``ncu --import REPORT --csv --page raw`` to ``csv_path``. Raises InputError naming ``report``
    when ncu is not on PATH (with the command to run where it is) or fails."""
    report = Path(report)
    if not report.is_file():
        raise InputError(report, "no such file" if not report.exists() else "is a directory, not an ncu report")
    exe = shutil.which(ncu)
    shown = " ".join(export_command(report.name)) + " > report.csv"
    if exe is None:
        raise InputError(report, f"an Nsight Compute report, and ncu is not on PATH to read it: export it where Nsight "
                                 f"Compute is installed with `{shown}` and give report.csv")
    try:
        with open(csv_path, "wb") as out:
            p = subprocess.run(export_command(report, exe), stdout=out, stderr=subprocess.PIPE, timeout=EXPORT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise InputError(report, f"ncu did not export the report within {EXPORT_TIMEOUT_S:.0f} s") from None
    except OSError as e:
        raise InputError(report, f"cannot run {exe} ({e.strerror or e.__class__.__name__})") from None
    if p.returncode != 0:
        why = " | ".join(p.stderr.decode("utf-8", "replace").strip().splitlines()[-2:])[:200]
        raise InputError(report, f"`{shown}` failed (exit {p.returncode}){': ' + why if why else ''}")
