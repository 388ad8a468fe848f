"""The store in one SQLite file (``--store FOLDER``: ``FOLDER/colopred.sqlite3``), the default.

Write-ahead logging (``journal_mode=WAL``) lets readers run beside the one writer; ``synchronous=FULL`` makes a
commit durable before it returns (the WAL is fsynced at every commit), so an acknowledged write survives a
killed process and a power cut. Several processes of one host (a server's workers, or two servers) share the
file safely: SQLite locks it, ``BEGIN IMMEDIATE`` takes the write lock up front, and ``busy_timeout`` waits for it.
WAL needs shared memory between the processes, so the file must sit on a local disk of one host: replicas on
several hosts share a PostgreSQL database instead (:mod:`colopred.service.store.postgres`).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from .base import Store, StoreError

FILE_NAME = "colopred.sqlite3"
NETWORK_FILE_SYSTEMS = frozenset({"nfs", "nfs4", "cifs", "smb3", "smbfs", "afs", "ceph", "glusterfs", "lustre", "fuse.sshfs",
                                  "fuse.s3fs", "fuse.gcsfuse", "9p"})
BUSY_TIMEOUT_MS = 30_000


class SqliteStore(Store):
    def __init__(self, folder: str | os.PathLike):
        super().__init__()
        folder = Path(folder)
        if folder.exists() and not folder.is_dir():
            raise StoreError(f"{folder}: not a folder (--store names a folder for the store's database)")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"{folder}: cannot create the store folder ({e.strerror or e})") from None
        if not folder.is_dir():
            raise StoreError(f"{folder}: not a folder (--store names a folder for the store's database)")
        self.path = folder / FILE_NAME
        fs = filesystem_type(folder)
        if fs in NETWORK_FILE_SYSTEMS:
            raise StoreError(f"{folder}: on a network file system ({fs}), where SQLite's locks and shared memory do not hold "
                             "between hosts: keep the store on a local disk, or share a PostgreSQL database "
                             "(--store postgresql://...)")
        self.url = f"sqlite:{self.path}"
        try:
            self._writer = self._connect()
            self._reader = self._connect()
            mode = self._writer.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path}: cannot open the store ({e})") from None
        if mode.lower() != "wal":
            raise StoreError(f"{self.path}: the store needs write-ahead logging and the file system refused it (journal mode {mode})")
        self._init_schema()
        self._data_version = self._reader.execute("PRAGMA data_version").fetchone()[0]

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: transactions are ours (BEGIN IMMEDIATE ... COMMIT), never the driver's implicit ones
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    def _begin(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")

    def changed(self) -> bool:
        """``PRAGMA data_version`` of the reader: it changes when any other connection (this process's writer
        included) has committed since the last call. Costs a look at the WAL index, no disk read."""
        with self._read_lock:
            v = self._reader.execute("PRAGMA data_version").fetchone()[0]
        if v != self._data_version:
            self._data_version = v
            return True
        return False

    def integrity(self) -> str:
        """``PRAGMA integrity_check``'s answer (``ok`` when the file is sound)."""
        return self._read("PRAGMA integrity_check")[0][0]


def filesystem_type(folder: Path) -> str | None:
    """The type of the file system ``folder`` lies on, from /proc/self/mounts (None where that is not readable)."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    target = str(folder.resolve())
    best, kind = "", None
    for line in mounts:
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        if (target == point or target.startswith(point.rstrip("/") + "/")) and len(point) > len(best):
            best, kind = point, parts[2]
    return kind
