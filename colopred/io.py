"""Writing outputs: every file colopred writes goes through :func:`atomic_file` (a temporary file in the same
folder, flushed and fsynced, then renamed over the target), so a run killed or failing at any moment leaves
either the old file or the new one, never half of one. :func:`check_output` refuses, before anything is
computed, an output that cannot be written or that is one of the inputs. :func:`sha256_of` is the checksum that
model manifests and imported tables record of a file. :func:`read_json` reads a JSON input document, every failure
one error naming the file."""

from __future__ import annotations

import bz2
import contextlib
import gzip
import hashlib
import json
import lzma
import os
import tempfile
import zlib
from pathlib import Path
from typing import IO, Iterator

from .errors import InputError, SchemaError, first_line


def check_output(path: str | os.PathLike, *inputs: str | os.PathLike | None, what: str = "output") -> Path:
    """``path`` as a Path, after checking that it can be written: not a folder, its folder exists, and it is none
    of ``inputs`` (an input is read before the output is written, but a failure in between would lose it)."""
    if os.fspath(path) == "":
        raise InputError(None, f"the {what} path is empty: give a file name")
    path = Path(path)
    if path.name in ("", ".", ".."):
        raise InputError(path, f"the {what} needs a file name")
    if path.is_dir():
        raise InputError(path, f"the {what} is a directory; give a file name")
    folder = path.parent
    if not folder.is_dir():
        raise InputError(path, f"the {what}'s folder {_missing_folder(folder)}")
    if not os.access(folder, os.W_OK):
        raise InputError(path, f"the {what}'s folder {str(folder)!r} is not writable")
    for i in inputs:
        if i is None:
            continue
        i = Path(i)
        same = i.exists() and path.exists() and os.path.samefile(i, path)
        if same or path.resolve() == i.resolve():
            raise InputError(path, f"the {what} is the input {str(i)!r}: write it to another file")
    return path


def _missing_folder(folder: Path) -> str:
    """What is wrong with a folder that cannot hold a new file: "'F' does not exist", or is a file."""
    if folder.exists() and not folder.is_dir():
        return f"{str(folder)!r} is a file, not a folder"
    for above in folder.parents:  # the nearest existing ancestor that is a file, not a folder
        if above.exists():
            if not above.is_dir():
                return f"{str(folder)!r} does not exist ({str(above)!r} is a file, not a folder)"
            break
    return f"{str(folder)!r} does not exist"


def _temporary_beside(path: Path, prefix: str, suffix: str) -> tuple[int, str]:
    """``tempfile.mkstemp`` in ``path``'s folder, its failures an :class:`InputError` naming ``path``: a folder that
    is missing, or one that exists but refuses new files (a read-only or pseudo file system such as /proc)."""
    try:
        return tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=suffix)
    except FileNotFoundError:
        if path.parent.is_dir():
            raise InputError(path, f"cannot create a file in folder {str(path.parent)!r}") from None
        raise InputError(path, f"folder {_missing_folder(path.parent)}") from None
    except NotADirectoryError:
        raise InputError(path, f"folder {_missing_folder(path.parent)}") from None
    except OSError as e:
        raise InputError(path, f"cannot write in {str(path.parent)!r} ({e.strerror or e.__class__.__name__})") from None


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike, mode: str = "w", *, encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open a temporary file beside ``path`` for writing; on a clean exit flush, fsync and rename it over
    ``path``; on an exception remove it (``path`` is untouched). A folder that is missing or not writable, or
    a ``path`` that is a folder, is an :class:`InputError` naming ``path``."""
    path = Path(path)
    if path.is_dir():
        raise InputError(path, "is a directory; give a file name")
    binary = "b" in mode
    fd, tmp = _temporary_beside(path, f".{path.name}.", ".tmp")
    try:
        with (os.fdopen(fd, mode) if binary else os.fdopen(fd, mode, encoding=encoding, newline="")) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (:func:`atomic_file`)."""
    with atomic_file(path) as f:
        f.write(text)
    return Path(path)


def write_csv_atomic(df, path: str | os.PathLike, **to_csv) -> Path:
    """``df.to_csv(path, **to_csv)``, atomically (:func:`atomic_file`); a ``path`` ending in ``.gz`` is gzipped, with
    no time stamp in its header, so that the same table gives the same bytes."""
    if str(path).endswith(".gz"):
        with atomic_file(path, "wb") as f:
            df.to_csv(f, compression={"method": "gzip", "mtime": 0}, **to_csv)
    else:
        with atomic_file(path) as f:
            df.to_csv(f, **to_csv)
    return Path(path)


def stage_file(path: str | os.PathLike) -> Path:
    """A fresh temporary name beside ``path`` (same folder, hence same file system) for a file that a library
    writes by name (XGBoost's ``save_model``); rename it over ``path`` once complete, or unlink it."""
    path = Path(path)
    fd, tmp = _temporary_beside(path, f".{path.stem}.", f".tmp{path.suffix}")  # extension last: XGBoost picks its format by it
    os.close(fd)
    return Path(tmp)


def fsync_file(path: str | os.PathLike) -> None:
    """Flush a complete file to disk before it is renamed into place."""
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


def sha256_of(path: str | os.PathLike) -> str:
    """The SHA-256 hex digest of the file at ``path``, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


DECOMPRESSORS = {"gzip": gzip.decompress, "bzip2": bz2.decompress, "xz": lzma.decompress}
"""The compressions :func:`read_input_bytes` undoes, by name."""


def read_input_bytes(path: str | os.PathLike, compression: str | None = None, what: str = "") -> bytes:
    """The bytes of the input file ``path``, decompressed: ``compression`` is one of ``DECOMPRESSORS``, "auto" (gzip
    where the file starts with gzip's magic bytes) or None (as stored). An unreadable file, or a compressed one cut
    short or corrupt, is one :class:`InputError` naming the file (its problem after ``what``, e.g. "not a readable
    Chrome trace: ")."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise InputError(path, f"cannot read ({e.strerror or e.__class__.__name__})") from None
    if compression == "auto":
        compression = "gzip" if raw[:2] == b"\x1f\x8b" else None
    if compression is None:
        return raw
    try:
        return DECOMPRESSORS[compression](raw)
    except (EOFError, OSError, zlib.error, lzma.LZMAError, ValueError) as e:
        raise InputError(path, f"{what}truncated or corrupt {compression} file ({first_line(e)})") from None


def read_text_input(path: str | os.PathLike, what: str = "file") -> str:
    """The UTF-8 text of the input file ``path``; every failure an :class:`InputError` naming the file and saying what
    is wrong in words (``what`` names the kind of file expected: "profile", "request"...)."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(path, "no such file") from None
    except IsADirectoryError:
        raise InputError(path, f"is a directory, not a {what}") from None
    except PermissionError:
        raise InputError(path, "permission denied") from None
    except UnicodeDecodeError:
        with open(path, "rb") as f:
            gz = f.read(2) == b"\x1f\x8b"
        raise InputError(path, f"is not a text {what}" + (" (it is gzip-compressed)" if gz else " (binary data)")) from None
    except OSError as e:
        raise InputError(path, f"cannot read ({e.strerror or e.__class__.__name__})") from None


def read_json(path: str | os.PathLike, what: str = "JSON file") -> object:
    """The JSON document in ``path``: a missing or unreadable file is an :class:`InputError`, text that is not JSON a
    :class:`SchemaError`, each naming the file."""
    path = Path(path)
    text = read_text_input(path, what)
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError) as e:
        raise SchemaError(path, f"not valid JSON ({getattr(e, 'msg', 'nested too deeply')})") from None
