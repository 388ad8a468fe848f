"""Where the service keeps what it must not forget: :class:`Store` (``base``), in SQLite (``sqlite``, one host) or
PostgreSQL (``postgres``, replicas on several hosts). :func:`open_store` picks one from ``--store``."""

from __future__ import annotations

from .base import (QUARANTINE_KINDS, IdempotencyConflict, ModelEvent, ModelVersion, ObservationJob, ObservationRecord,
                   QuarantineRecord, Store, StoreError, VersionRecord, now_utc)

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def open_store(spec: str) -> Store:
    """A folder (SQLite, ``FOLDER/colopred.sqlite3``) or a ``postgresql://`` URL."""
    if spec.startswith(POSTGRES_SCHEMES):
        from .postgres import PostgresStore

        return PostgresStore(spec)
    from .sqlite import SqliteStore

    return SqliteStore(spec)


__all__ = ["QUARANTINE_KINDS", "IdempotencyConflict", "ModelEvent", "ModelVersion", "ObservationJob", "ObservationRecord",
           "QuarantineRecord", "Store", "StoreError", "VersionRecord", "now_utc", "open_store"]
