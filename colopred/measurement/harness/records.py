"""Append-only measurement records (JSON Lines), one record per finished window.

Each line is one complete JSON object written with a single ``write`` followed by
``flush`` + ``fsync``. A campaign killed mid-write can leave at most one partial last
line; :func:`open_for_append` cuts that partial line off (it belongs to a window that
never finished and will be measured again) and never touches complete records.
"""

from __future__ import annotations

import io
import json
import os
import platform
from datetime import datetime, UTC
from pathlib import Path
from typing import Any, Iterator

from ...errors import InputError
from ...io import read_text_input

# Harness versions (docs/formats.md): 1.1 records the host; 1.2 the GPU's UUID (device leases share a
# hostname, so the host alone does not tell machines apart); 1.3 a ``run_id`` per invocation of a campaign
# (a resume is a new run and a new segment: a resume on the same machine can change the solo speed of
# CPU-bound jobs); 1.4 the ``shard`` and ``gpu_index`` of a window of a campaign spread over several GPUs.
HARNESS_VERSION = "1.4"
RECORD_SCHEMA = "colopred.window/1"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def repair_tail(path: Path) -> int:
    """Truncate a partial (newline-less) last line. Returns the bytes removed."""
    if not path.exists():
        return 0
    size = path.stat().st_size
    if size == 0:
        return 0
    with path.open("rb+") as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) == b"\n":
            return 0
        # Walk back to the previous newline.
        pos = size - 1
        chunk = 4096
        while pos > 0:
            start = max(0, pos - chunk)
            f.seek(start)
            buf = f.read(pos - start)
            i = buf.rfind(b"\n")
            if i >= 0:
                keep = start + i + 1
                break
            pos = start
        else:
            keep = 0
        f.truncate(keep)
        f.flush()
        os.fsync(f.fileno())
        return size - keep


class RecordWriter:
    """Appends records to a JSONL file, durably, one line per record."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.removed_bytes = repair_tail(self.path)
        self._f = self.path.open("a", encoding="utf-8")

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, sort_keys=True, allow_nan=False) + "\n"
        self._f.write(line)
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def iter_records(path: str | os.PathLike) -> Iterator[dict[str, Any]]:
    """Complete records of a JSONL file; a partial last line (interrupted write) is skipped."""
    path = Path(path)
    lines = io.StringIO(read_text_input(path, "JSONL record file")).readlines()
    for n, line in enumerate(lines, 1):
        if not line.endswith("\n"):
            if n == len(lines):
                return  # interrupted write: not a record
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(path, f"line {n} is not valid JSON ({e.msg})") from None
        except RecursionError:
            raise InputError(path, f"line {n} is not a window record (nested too deeply)") from None
        if not isinstance(rec, dict):
            raise InputError(path, f"line {n} is not a JSON object")
        yield rec


def provenance(mode: str, gpu_name: str | None = None, driver: str | None = None, gpu_uuid: str | None = None) -> dict[str, Any]:
    """Provenance stamped on every record: GPU (name and UUID), driver, CUDA, torch, harness version,
    host, date, mode."""
    info: dict[str, Any] = {
        "gpu": gpu_name,
        "gpu_uuid": gpu_uuid,  # tells physical GPUs apart: solo baselines are not mixed across them
        "driver": driver,
        "cuda": None,
        "torch": None,
        "harness_version": HARNESS_VERSION,
        "python": platform.python_version(),
        "host": platform.node(),  # the hostname; device leases may all share one
        "mode": mode,
        "date": now_iso(),
    }
    try:  # torch is present on the GPU side only
        import torch

        info["torch"] = torch.__version__
        info["cuda"] = torch.version.cuda
    except Exception:  # pragma: no cover - CPU-only environments
        pass
    return info
