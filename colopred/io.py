"""Writing outputs: every file colopred writes goes through :func:`atomic_file` (a temporary file in the same
folder, flushed and fsynced, then renamed over the target), so a run killed or failing at any moment leaves
either the old file or the new one, never half of one. :func:`check_output` refuses, before anything is
computed, an output that cannot be written or that is one of the inputs. :func:`sha256_of` is the checksum that
model manifests and imported tables record of a file. :func:`read_json` reads a JSON input document, every failure
one error naming the file."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import IO, Iterator

from .errors import InputError, SchemaError


def check_output(path: str | os.PathLike, *inputs: str | os.PathLike | None, what: str = "output") -> Path:
    """``path`` as a Path, after checking that it can be written: not a folder, its folder exists, and it is none
    of ``inputs`` (an input is read before the output is written, but a failure in between would lose it)."""
    path = Path(path)
    if str(path) == "" or path.name in ("", ".", ".."):
        raise InputError(path, f"the {what} needs a file name")
    if path.is_dir():
        raise InputError(path, f"the {what} is a directory; give a file name")
    folder = path.parent
    if not folder.is_dir():
        raise InputError(path, f"the {what}'s folder {str(folder)!r} does not exist")
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


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike, mode: str = "w", *, encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open a temporary file beside ``path`` for writing; on a clean exit flush, fsync and rename it over
    ``path``; on an exception remove it (``path`` is untouched). A folder that is missing or not writable, or
    a ``path`` that is a folder, is an :class:`InputError` naming ``path``."""
    path = Path(path)
    if path.is_dir():
        raise InputError(path, "is a directory; give a file name")
    binary = "b" in mode
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except FileNotFoundError:
        raise InputError(path, f"folder {str(path.parent)!r} does not exist") from None
    except OSError as e:
        raise InputError(path, f"cannot write in {str(path.parent)!r} ({e.strerror or e.__class__.__name__})") from None
    try:
        with os.fdopen(fd, mode, **({} if binary else {"encoding": encoding, "newline": ""})) as f:
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
    try:  # the extension kept last: XGBoost picks its format by it
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}")
    except FileNotFoundError:
        raise InputError(path, f"folder {str(path.parent)!r} does not exist") from None
    except OSError as e:
        raise InputError(path, f"cannot write in {str(path.parent)!r} ({e.strerror or e.__class__.__name__})") from None
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


def read_json(path: str | os.PathLike) -> object:
    """The JSON document in ``path``: a missing or unreadable file is an :class:`InputError`, text that is not JSON a
    :class:`SchemaError`, each naming the file."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(path, "no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(path, f"cannot read ({getattr(e, 'strerror', None) or e.__class__.__name__})") from None
    except (json.JSONDecodeError, RecursionError) as e:
        raise SchemaError(path, f"not valid JSON ({getattr(e, 'msg', 'nested too deeply')})") from None
