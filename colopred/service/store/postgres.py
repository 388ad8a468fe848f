"""The store in a PostgreSQL database (``--store postgresql://...``): what several replicas on several hosts share.

The same tables and SQL as SQLite's (:mod:`colopred.service.store.base`). Every write transaction first takes one
transaction-scoped advisory lock, so writes commit one at a time in ``seq`` order and a replica reading rows after
the last ``seq`` it applied never skips one that commits later with a smaller number (a plain sequence gives no
such order). Needs the ``postgres`` extra (``pip install "colopred[serve,postgres]"``: psycopg 3).
"""

from __future__ import annotations

from typing import Any

from .base import Store, StoreError

WRITE_LOCK_KEY = 0x636F6C6F  # "colo": the advisory lock every write transaction holds


class PostgresStore(Store):
    placeholder = "%s"
    serial = "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
    real = "DOUBLE PRECISION"

    def __init__(self, url: str):
        super().__init__()
        try:
            import psycopg
        except ImportError:
            raise StoreError("a PostgreSQL store needs psycopg: pip install \"colopred[postgres]\"") from None
        self._psycopg = psycopg
        self._dsn = url
        self.url = _without_password(url)
        try:
            self._writer = self._connect()
            self._reader = self._connect()
        except psycopg.Error as e:
            raise StoreError(f"{self.url}: cannot connect ({str(e).strip().splitlines()[0] if str(e).strip() else e.__class__.__name__})") from None
        self._init_schema()
        self._heads: tuple[int, ...] | None = None

    def _connect(self) -> Any:
        return self._psycopg.connect(self._dsn, autocommit=False, connect_timeout=10)

    def _begin(self, conn: Any) -> None:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK_KEY,))

    def _end_read(self) -> None:
        self._reader.rollback()  # psycopg opens a transaction for every read; end it so the next sees new commits

    def changed(self) -> bool:
        """Whether any table's last ``seq`` moved since the last call (one query; PostgreSQL has no data_version)."""
        heads = tuple(int(v) for v in self._read(
            "SELECT (SELECT COALESCE(MAX(seq), 0) FROM profiles), (SELECT COALESCE(MAX(seq), 0) FROM observations), "
            "(SELECT COALESCE(MAX(seq), 0) FROM nodes), (SELECT COALESCE(MAX(seq), 0) FROM model_events), "
            "(SELECT COALESCE(MAX(seq), 0) FROM quarantine)")[0])
        if heads != self._heads:
            self._heads = heads
            return True
        return False


def _without_password(url: str) -> str:
    """The URL as it may be printed: the password, if any, replaced by ***."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
