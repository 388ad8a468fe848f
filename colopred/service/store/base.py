"""The service's store: one small interface (:class:`Store`) over SQL, two dialects (SQLite, PostgreSQL).

Everything the service must not forget lives here, append-only, each write one transaction committed before the
request that made it is answered:

  profiles          every version of every registered profile (a deletion is a version without a document)
  observations      every measured collocation posted, with what the server predicted of it at the time
  observation_jobs  one row per job of each observation: its measured and predicted slowdowns and their log ratio
  nodes             every report of what runs on a node's GPUs (a deletion is a version without a document)
  quarantine        observations refused as implausible (unknown jobs, non-finite or implausible slowdowns, a GPU
                    of another type, a node of another mode), each with its kind and reason: kept, never applied
                    or trained on
  model_versions    every model version ``colopred train --store`` wrote (its files in the models folder), with how
                    it was trained and how it fared against the version it was compared with
  model_events      every promotion and rollback: the latest event of a model name says which version serves it

Each table's ``seq`` orders its rows in commit order (SQLite serialises writers; under PostgreSQL every write
transaction takes one advisory lock first, so that no reader sees seq n + 1 before seq n). A server's memory is a
function of these rows read in ``seq`` order, so every worker, replica and restart rebuilds the same state from
them (:mod:`colopred.service.state`).
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import dataclass, field
from datetime import datetime, UTC
from typing import Any, Iterator, Sequence


def now_utc() -> str:
    """The time now, UTC, ISO 8601 with microseconds."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


class StoreError(Exception):
    """The store cannot be opened or used (named, one line)."""


class IdempotencyConflict(Exception):
    """An idempotency key already names a different observation (``quarantined``: one held in quarantine)."""

    def __init__(self, key: str, seq: int, quarantined: bool = False):
        self.key, self.seq, self.quarantined = key, seq, quarantined
        where = f"quarantined observation #{seq}" if quarantined else f"observation #{seq}"
        super().__init__(f"idempotency_key {key!r} was already used for another {where}")


@dataclass(frozen=True)
class VersionRecord:
    """One version of a named document (a profile or a node report); ``document`` None: deleted in this version."""

    seq: int
    name: str
    version: int
    document: dict[str, Any] | None
    sha256: str | None
    created_at: str


@dataclass(frozen=True)
class ObservationJob:
    """One job of one observation: measured slowdown, the live prediction at the time, the model's own (uncorrected)
    prediction and log(measured / uncorrected), the term the job's offset averages."""

    job: str
    slowdown: float
    predicted: float
    predicted_raw: float
    log_ratio: float


@dataclass(frozen=True)
class ObservationRecord:
    """A measured collocation as stored: what was posted, when, and what the server predicted of it then."""

    seq: int
    mode: str
    model: str
    """The model that predicted it: ``NAME@SHA256-PREFIX`` (``/v1/models``)."""
    received_at: str
    jobs: tuple[ObservationJob, ...]
    idempotency_key: str | None = None
    request_sha256: str = ""
    detail: dict[str, Any] = field(default_factory=dict)
    """The rest of what was posted and known: ``profile_versions``, ``solo_ms``, ``colocated_ms``, ``gpu``,
    ``time`` (when it ran, as the poster said), ``source``."""

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.seq, "mode": self.mode, "jobs": [j.job for j in self.jobs],
                "slowdowns": [j.slowdown for j in self.jobs], **self.detail,
                "idempotency_key": self.idempotency_key, "received_at": self.received_at, "model": self.model,
                "predicted": [j.predicted for j in self.jobs], "predicted_uncorrected": [j.predicted_raw for j in self.jobs]}


def _strict(value: Any) -> Any:
    """``value`` with every NaN or infinite float written as a string (``"NaN"``, ``"Infinity"``): what a quarantined
    body holds may be anything, and every answer is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strict(v) for v in value]
    return value


QUARANTINE_KINDS = ("unknown_job", "not_finite", "implausible_slowdown", "gpu_mismatch", "mode_mismatch")
"""Why an observation is quarantined (``colopred.service.validation``)."""


@dataclass(frozen=True)
class QuarantineRecord:
    """An observation kept but never applied or trained on: what was posted, when, and why it was held back."""

    seq: int
    kind: str
    """One of :data:`QUARANTINE_KINDS`."""
    field: str | None
    """The field blamed (``slowdowns[1]``, ``jobs[0]``, ``gpu``)."""
    reason: str
    """One line, starting with the field."""
    received_at: str
    mode: str | None
    jobs: tuple[str, ...]
    body: dict[str, Any]
    """The body as posted (non-finite numbers as they came)."""
    idempotency_key: str | None = None
    request_sha256: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.seq, "quarantined": True, "kind": self.kind, "field": self.field, "reason": self.reason,
                "mode": self.mode, "jobs": list(self.jobs), "body": _strict(self.body),
                "idempotency_key": self.idempotency_key, "received_at": self.received_at}


@dataclass(frozen=True)
class ModelVersion:
    """One trained model version: ``NAME`` (the served model it replaces, e.g. ``h100-mps``), its ``version`` (1, 2,
    ...; 0 is the model a server was started with, never stored), ``model_id`` (``NAME@SHA256[:12]``, as answers and
    observation records name a model), its manifest's ``path`` in the models folder and ``detail``: ``training``
    (data, observations used, rows), ``evaluation`` (the comparison with the version then serving, and the rule's
    verdict)."""

    seq: int
    name: str
    version: int
    model_id: str
    sha256: str
    path: str
    mode: str
    profile_source: str
    created_at: str
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "id": self.model_id, "sha256": self.sha256, "path": self.path,
                "mode": self.mode, "profile_source": self.profile_source, "created_at": self.created_at, **self.detail}


MODEL_ACTIONS = ("promote", "rollback")


@dataclass(frozen=True)
class ModelEvent:
    """A change of the version serving ``name``: ``promote`` (a trained version that passed the promotion rule, or
    an operator's) or ``rollback`` (back to an earlier version; 0: the model the server was started with)."""

    seq: int
    name: str
    action: str
    version: int
    model_id: str | None
    """The version's ``NAME@SHA256[:12]``; None for version 0 (each server's own start-up model)."""
    at: str
    reason: str
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.seq, "name": self.name, "action": self.action, "version": self.version, "model": self.model_id,
                "at": self.at, "reason": self.reason, **self.detail}


SCHEMA_VERSION = 1

DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS profiles (
    seq {serial}, name TEXT NOT NULL, version INTEGER NOT NULL, document TEXT, sha256 TEXT,
    created_at TEXT NOT NULL, UNIQUE (name, version));
CREATE TABLE IF NOT EXISTS observations (
    seq {serial}, idempotency_key TEXT UNIQUE, request_sha256 TEXT NOT NULL, mode TEXT NOT NULL,
    model TEXT NOT NULL, received_at TEXT NOT NULL, n_jobs INTEGER NOT NULL, detail TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS observation_jobs (
    seq BIGINT NOT NULL, position INTEGER NOT NULL, job TEXT NOT NULL, slowdown {real} NOT NULL,
    predicted {real} NOT NULL, predicted_raw {real} NOT NULL, log_ratio {real} NOT NULL, PRIMARY KEY (seq, position));
CREATE INDEX IF NOT EXISTS observation_jobs_by_job ON observation_jobs (job, seq);
CREATE TABLE IF NOT EXISTS checkpoints (model TEXT NOT NULL, head BIGINT NOT NULL, created_at TEXT NOT NULL,
    PRIMARY KEY (model, head));
CREATE TABLE IF NOT EXISTS checkpoint_sums (
    model TEXT NOT NULL, head BIGINT NOT NULL, job TEXT NOT NULL, sum_log_ratio {real} NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (model, head, job));
CREATE TABLE IF NOT EXISTS nodes (
    seq {serial}, name TEXT NOT NULL, version INTEGER NOT NULL, document TEXT, sha256 TEXT,
    created_at TEXT NOT NULL, UNIQUE (name, version));
CREATE TABLE IF NOT EXISTS quarantine (
    seq {serial}, idempotency_key TEXT UNIQUE, request_sha256 TEXT NOT NULL, mode TEXT, kind TEXT NOT NULL,
    field TEXT, reason TEXT NOT NULL, received_at TEXT NOT NULL, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS quarantine_jobs (
    seq BIGINT NOT NULL, position INTEGER NOT NULL, job TEXT NOT NULL, PRIMARY KEY (seq, position));
CREATE INDEX IF NOT EXISTS quarantine_jobs_by_job ON quarantine_jobs (job, seq);
CREATE TABLE IF NOT EXISTS model_versions (
    seq {serial}, name TEXT NOT NULL, version INTEGER NOT NULL, model_id TEXT NOT NULL, sha256 TEXT NOT NULL,
    path TEXT NOT NULL, mode TEXT NOT NULL, profile_source TEXT NOT NULL, created_at TEXT NOT NULL, detail TEXT NOT NULL,
    UNIQUE (name, version));
CREATE TABLE IF NOT EXISTS model_events (
    seq {serial}, name TEXT NOT NULL, action TEXT NOT NULL, version INTEGER NOT NULL, model_id TEXT, at TEXT NOT NULL,
    reason TEXT NOT NULL, detail TEXT NOT NULL);
"""

VERSIONED = ("profiles", "nodes")


class Store:
    """The interface the service uses (and the SQL both dialects share). Subclasses give ``_connect``, ``_begin``
    (a write transaction that serialises writers) and ``changed`` (a cheap test for commits by others)."""

    url: str
    placeholder = "?"
    serial = "INTEGER PRIMARY KEY AUTOINCREMENT"
    real = "REAL"

    def __init__(self) -> None:
        self._write_lock = threading.Lock()  # one writer connection per process, used by one thread at a time
        self._read_lock = threading.Lock()

    # ------------------------------------------------------------------ plumbing
    def _sql(self, q: str) -> str:
        return q if self.placeholder == "?" else q.replace("?", self.placeholder)

    def _connect(self) -> Any:  # pragma: no cover (dialects)
        raise NotImplementedError

    def _begin(self, conn: Any) -> None:  # pragma: no cover (dialects)
        raise NotImplementedError

    def changed(self) -> bool:  # pragma: no cover (dialects)
        """Whether another connection may have committed since the last call (True when in doubt)."""
        raise NotImplementedError

    def close(self) -> None:
        for c in (getattr(self, "_writer", None), getattr(self, "_reader", None)):
            if c is not None:
                c.close()

    def _init_schema(self) -> None:
        with self._write_lock:
            conn = self._writer
            self._begin(conn)
            try:
                cur = conn.cursor()
                for stmt in DDL.format(serial=self.serial, real=self.real).split(";"):
                    if stmt.strip():
                        cur.execute(stmt)
                cur.execute(self._sql("SELECT value FROM meta WHERE key = 'schema_version'"))
                row = cur.fetchone()
                if row is None:
                    cur.execute(self._sql("INSERT INTO meta (key, value) VALUES ('schema_version', ?)"), (str(SCHEMA_VERSION),))
                elif int(row[0]) != SCHEMA_VERSION:
                    raise StoreError(f"{self.url}: store schema version {row[0]}, this colopred reads version {SCHEMA_VERSION}")
                conn.commit()
            except BaseException:
                conn.rollback()
                raise

    def _write(self, fn) -> Any:
        """Run ``fn(cursor)`` in one write transaction, committed before returning (rolled back on any error)."""
        with self._write_lock:
            conn = self._writer
            self._begin(conn)
            try:
                out = fn(conn.cursor())
                conn.commit()
                return out
            except BaseException:
                conn.rollback()
                raise

    def _read(self, q: str, args: Sequence[Any] = ()) -> list[tuple]:
        with self._read_lock:
            cur = self._reader.cursor()
            cur.execute(self._sql(q), tuple(args))
            rows = cur.fetchall()
            self._end_read()
            return rows

    def _end_read(self) -> None:
        """Close the reader's implicit transaction where the driver opens one (PostgreSQL)."""

    # ------------------------------------------------------------------ versioned documents (profiles, nodes)
    def _put_version(self, table: str, name: str, document: dict[str, Any] | None, sha256: str | None) -> tuple[VersionRecord, bool]:
        """A new version of ``name`` unless its latest already holds this document (``sha256``); returns the
        record and whether it is new."""
        def tx(cur):
            cur.execute(self._sql(f"SELECT seq, version, document, sha256, created_at FROM {table} WHERE name = ? "
                                  "ORDER BY version DESC LIMIT 1"), (name,))
            row = cur.fetchone()
            if row is not None and row[3] == sha256 and (row[2] is None) == (document is None):
                return _version(name, row), False
            if row is None and document is None:
                return None, False
            version = 1 if row is None else int(row[1]) + 1
            at = now_utc()
            text = None if document is None else json.dumps(document, separators=(",", ":"), allow_nan=False)
            cur.execute(self._sql(f"INSERT INTO {table} (name, version, document, sha256, created_at) VALUES (?, ?, ?, ?, ?) "
                                  "RETURNING seq"), (name, version, text, sha256, at))
            seq = int(cur.fetchone()[0])
            return VersionRecord(seq, name, version, document, sha256, at), True
        return self._write(tx)

    def _version_of(self, table: str, name: str, version: int | None) -> VersionRecord | None:
        if version is None:
            rows = self._read(f"SELECT seq, version, document, sha256, created_at FROM {table} WHERE name = ? "
                              "ORDER BY version DESC LIMIT 1", (name,))
        else:
            rows = self._read(f"SELECT seq, version, document, sha256, created_at FROM {table} WHERE name = ? AND version = ?",
                              (name, version))
        return _version(name, rows[0]) if rows else None

    def _versions(self, table: str, name: str) -> list[VersionRecord]:
        rows = self._read(f"SELECT seq, version, NULL, sha256, created_at, document IS NULL FROM {table} WHERE name = ? "
                          "ORDER BY version", (name,))
        return [VersionRecord(int(r[0]), name, int(r[1]), None if r[5] else {}, r[3], r[4]) for r in rows]

    def _latest(self, table: str, after: str, limit: int) -> list[VersionRecord]:
        """The latest version of each name after ``after`` (by name), deleted names left out, without documents."""
        rows = self._read(f"SELECT t.seq, t.name, t.version, t.sha256, t.created_at FROM {table} t "
                          f"JOIN (SELECT name, MAX(version) AS v FROM {table} WHERE name > ? GROUP BY name) m "
                          "ON t.name = m.name AND t.version = m.v WHERE t.document IS NOT NULL ORDER BY t.name LIMIT ?",
                          (after, limit))
        return [VersionRecord(int(r[0]), r[1], int(r[2]), {}, r[3], r[4]) for r in rows]

    def _changes(self, table: str, after_seq: int, limit: int) -> list[VersionRecord]:
        rows = self._read(f"SELECT seq, name, version, document, sha256, created_at FROM {table} WHERE seq > ? "
                          "ORDER BY seq LIMIT ?", (after_seq, limit))
        return [_version(r[1], (r[0], r[2], r[3], r[4], r[5])) for r in rows]

    def head(self, table: str) -> int:
        """The last ``seq`` committed to ``table`` (0: none)."""
        rows = self._read(f"SELECT COALESCE(MAX(seq), 0) FROM {table}")
        return int(rows[0][0])

    # profiles
    def put_profile(self, name: str, document: dict[str, Any], sha256: str) -> tuple[VersionRecord, bool]:
        return self._put_version("profiles", name, document, sha256)

    def put_profiles(self, items: Sequence[tuple[str, dict[str, Any], str]]) -> int:
        """Register many (name, document, sha256) in one transaction, each as a new version unless its latest
        holds the same document; returns how many versions were added."""
        def tx(cur):
            added = 0
            at = now_utc()
            for name, document, sha256 in items:
                cur.execute(self._sql("SELECT version, sha256, document IS NULL FROM profiles WHERE name = ? "
                                      "ORDER BY version DESC LIMIT 1"), (name,))
                row = cur.fetchone()
                if row is not None and row[1] == sha256 and not row[2]:
                    continue
                cur.execute(self._sql("INSERT INTO profiles (name, version, document, sha256, created_at) VALUES (?, ?, ?, ?, ?)"),
                            (name, 1 if row is None else int(row[0]) + 1,
                             json.dumps(document, separators=(",", ":"), allow_nan=False), sha256, at))
                added += 1
            return added
        return self._write(tx)

    def delete_profile(self, name: str) -> tuple[VersionRecord | None, bool]:
        return self._put_version("profiles", name, None, None)

    def profile(self, name: str, version: int | None = None) -> VersionRecord | None:
        return self._version_of("profiles", name, version)

    def profile_versions(self, name: str) -> list[VersionRecord]:
        return self._versions("profiles", name)

    def profiles(self, after: str = "", limit: int = 1000) -> list[VersionRecord]:
        return self._latest("profiles", after, limit)

    def profile_changes(self, after_seq: int, limit: int = 10_000) -> list[VersionRecord]:
        return self._changes("profiles", after_seq, limit)

    # nodes
    def put_node(self, name: str, document: dict[str, Any], sha256: str) -> tuple[VersionRecord, bool]:
        return self._put_version("nodes", name, document, sha256)

    def delete_node(self, name: str) -> tuple[VersionRecord | None, bool]:
        return self._put_version("nodes", name, None, None)

    def node(self, name: str) -> VersionRecord | None:
        return self._version_of("nodes", name, None)

    def nodes(self, after: str = "", limit: int = 1000) -> list[VersionRecord]:
        return self._latest("nodes", after, limit)

    def node_changes(self, after_seq: int, limit: int = 10_000) -> list[VersionRecord]:
        return self._changes("nodes", after_seq, limit)

    # ------------------------------------------------------------------ observations
    def add_observations(self, records: Sequence[ObservationRecord]) -> list[tuple[ObservationRecord, bool]]:
        """Store ``records`` (their ``seq`` is ignored) in one transaction; returns each as stored and whether it is
        new. A record whose idempotency key is already stored with the same ``request_sha256`` is the stored one
        (not stored again); with another, :class:`IdempotencyConflict` and nothing is stored."""
        def tx(cur):
            out = []
            for r in records:
                if r.idempotency_key is not None:
                    cur.execute(self._sql("SELECT seq, request_sha256 FROM observations WHERE idempotency_key = ?"),
                                (r.idempotency_key,))
                    row = cur.fetchone()
                    if row is not None:
                        if row[1] != r.request_sha256:
                            raise IdempotencyConflict(r.idempotency_key, int(row[0]))
                        out.append((int(row[0]), False))
                        continue
                    self._key_free_of(cur, "quarantine", r.idempotency_key)
                cur.execute(self._sql("INSERT INTO observations (idempotency_key, request_sha256, mode, model, received_at, "
                                      "n_jobs, detail) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING seq"),
                            (r.idempotency_key, r.request_sha256, r.mode, r.model, r.received_at, len(r.jobs),
                             json.dumps(r.detail, separators=(",", ":"), allow_nan=False)))
                seq = int(cur.fetchone()[0])
                cur.executemany(self._sql("INSERT INTO observation_jobs (seq, position, job, slowdown, predicted, predicted_raw, "
                                          "log_ratio) VALUES (?, ?, ?, ?, ?, ?, ?)"),
                                [(seq, i, j.job, j.slowdown, j.predicted, j.predicted_raw, j.log_ratio) for i, j in enumerate(r.jobs)])
                out.append((seq, True))
            return out
        done = self._write(tx)
        by_seq = {r.seq: r for r in self.observations_by_seq([s for s, _ in done])}
        return [(by_seq[s], new) for s, new in done]

    def add_observation(self, record: ObservationRecord) -> tuple[ObservationRecord, bool]:
        return self.add_observations([record])[0]

    def _observations(self, where: str, args: Sequence[Any], order: str = "o.seq", limit: int | None = None) -> list[ObservationRecord]:
        lim = "" if limit is None else f" LIMIT {int(limit)}"
        heads = self._read(f"SELECT o.seq, o.idempotency_key, o.request_sha256, o.mode, o.model, o.received_at, o.detail "
                           f"FROM observations o WHERE {where} ORDER BY {order}{lim}", args)
        if not heads:
            return []
        seqs = [int(h[0]) for h in heads]
        jobs: dict[int, list[ObservationJob]] = {s: [] for s in seqs}
        for lo in range(0, len(seqs), 500):
            chunk = seqs[lo:lo + 500]
            marks = ",".join("?" * len(chunk))
            for r in self._read(f"SELECT seq, job, slowdown, predicted, predicted_raw, log_ratio FROM observation_jobs "
                                f"WHERE seq IN ({marks}) ORDER BY seq, position", chunk):
                jobs[int(r[0])].append(ObservationJob(r[1], float(r[2]), float(r[3]), float(r[4]), float(r[5])))
        return [ObservationRecord(int(h[0]), h[3], h[4], h[5], tuple(jobs[int(h[0])]), h[1], h[2], json.loads(h[6]))
                for h in heads]

    def observations_by_seq(self, seqs: Sequence[int]) -> list[ObservationRecord]:
        if not seqs:
            return []
        return self._observations(f"o.seq IN ({','.join('?' * len(seqs))})", list(seqs))

    def observation_by_key(self, key: str) -> ObservationRecord | None:
        rows = self._observations("o.idempotency_key = ?", (key,))
        return rows[0] if rows else None

    def observations_of(self, job: str, mode: str | None = None, before: int | None = None, limit: int = 100) -> list[ObservationRecord]:
        """The latest observations that hold ``job`` (newest first), of ``mode`` if given, below seq ``before``."""
        where = "o.seq IN (SELECT seq FROM observation_jobs WHERE job = ?)"
        args: list[Any] = [job]
        if mode is not None:
            where += " AND o.mode = ?"
            args.append(mode)
        if before is not None:
            where += " AND o.seq < ?"
            args.append(before)
        return self._observations(where, args, order="o.seq DESC", limit=limit)

    def observation_rows(self, after_seq: int = 0, limit: int | None = None) -> Iterator[tuple[int, str, str, str, float, float]]:
        """(seq, mode, model, job, log_ratio, abs error of the prediction at the time) of every job row after
        ``after_seq``, in seq and position order: what the live state is rebuilt from, streamed."""
        lim = "" if limit is None else f" LIMIT {int(limit)}"
        q = self._sql("SELECT j.seq, o.mode, o.model, j.job, j.log_ratio, j.slowdown, j.predicted FROM observation_jobs j "
                      f"JOIN observations o ON o.seq = j.seq WHERE j.seq > ? ORDER BY j.seq, j.position{lim}")
        with self._read_lock:
            cur = self._reader.cursor()
            cur.execute(q, (after_seq,))
            while True:
                chunk = cur.fetchmany(20_000)
                if not chunk:
                    break
                yield from chunk
            self._end_read()

    # ------------------------------------------------------------------ checkpoints of the observation state
    def write_checkpoint(self, head: int, sums: dict[str, dict[str, tuple[float, int]]]) -> None:
        """Each model's per-job (Σ log ratio, count) over the observations up to seq ``head``, in one transaction:
        a later start takes them and reads only the rows after ``head`` (the same sums, to the last bit: the floats
        are stored as they are)."""
        def tx(cur):
            at = now_utc()
            for model, jobs in sums.items():
                cur.execute(self._sql("SELECT 1 FROM checkpoints WHERE model = ? AND head = ?"), (model, head))
                if cur.fetchone() is not None:
                    continue
                cur.executemany(self._sql("INSERT INTO checkpoint_sums (model, head, job, sum_log_ratio, n) VALUES (?, ?, ?, ?, ?)"),
                                [(model, head, j, float(t), int(k)) for j, (t, k) in jobs.items()])
                cur.execute(self._sql("INSERT INTO checkpoints (model, head, created_at) VALUES (?, ?, ?)"), (model, head, at))
        self._write(tx)

    def latest_checkpoint(self, models: Sequence[str]) -> tuple[int, dict[str, dict[str, tuple[float, int]]]] | None:
        """The latest head every one of ``models`` has a checkpoint at, and their sums there (None: no such head)."""
        if not models:
            return None
        marks = ",".join("?" * len(models))
        rows = self._read(f"SELECT head FROM checkpoints WHERE model IN ({marks}) GROUP BY head HAVING COUNT(DISTINCT model) = ? "
                          "ORDER BY head DESC LIMIT 1", (*models, len(set(models))))
        if not rows:
            return None
        head = int(rows[0][0])
        sums: dict[str, dict[str, tuple[float, int]]] = {m: {} for m in models}
        for model, job, total, n in self._read(f"SELECT model, job, sum_log_ratio, n FROM checkpoint_sums WHERE head = ? "
                                               f"AND model IN ({marks})", (head, *models)):
            sums[model][job] = (float(total), int(n))
        return head, sums

    def observation_counts(self, head: int) -> dict[str, int]:
        """Observations per mode up to seq ``head``."""
        return {m: int(n) for m, n in self._read("SELECT mode, COUNT(*) FROM observations WHERE seq <= ? GROUP BY mode", (head,))}

    def last_job_rows(self, mode: str, head: int, limit: int) -> list[tuple[float, float]]:
        """(measured, predicted at the time) of the last ``limit`` job rows of ``mode`` up to seq ``head``, oldest first."""
        rows = self._read("SELECT j.slowdown, j.predicted FROM observation_jobs j JOIN observations o ON o.seq = j.seq "
                          "WHERE o.mode = ? AND j.seq <= ? ORDER BY j.seq DESC, j.position DESC LIMIT ?", (mode, head, limit))
        return [(float(a), float(b)) for a, b in reversed(rows)]

    def last_rows_per_job(self, head: int, limit: int) -> list[tuple[str, str, float, float]]:
        """(mode, job, measured, predicted at the time) of each job's last ``limit`` rows of each mode up to seq
        ``head``, each job's oldest first: what its rolling error holds after reading every row."""
        rows = self._read("SELECT mode, job, slowdown, predicted FROM (SELECT o.mode AS mode, j.job AS job, j.slowdown AS "
                          "slowdown, j.predicted AS predicted, j.seq AS seq, j.position AS position, ROW_NUMBER() OVER "
                          "(PARTITION BY o.mode, j.job ORDER BY j.seq DESC, j.position DESC) AS k FROM observation_jobs j "
                          "JOIN observations o ON o.seq = j.seq WHERE j.seq <= ?) t WHERE k <= ? ORDER BY seq, position",
                          (head, limit))
        return [(m, j, float(a), float(b)) for m, j, a, b in rows]

    def recent_observations(self, mode: str | None = None, limit: int = 500) -> list[ObservationRecord]:
        """The latest ``limit`` observations (of ``mode`` if given), newest first: what the status page plots."""
        if mode is None:
            return self._observations("1 = 1", (), order="o.seq DESC", limit=limit)
        return self._observations("o.mode = ?", (mode,), order="o.seq DESC", limit=limit)

    def observation_count(self) -> int:
        return int(self._read("SELECT COUNT(*) FROM observations")[0][0])

    def observations_between(self, mode: str | None = None, after_seq: int = 0, through_seq: int | None = None,
                             limit: int = 5_000) -> list[ObservationRecord]:
        """Observations (of ``mode`` if given) with ``after_seq`` < seq <= ``through_seq``, oldest first, at most
        ``limit`` (page on with the last one's seq): what a retraining reads."""
        where, args = "o.seq > ?", [after_seq]
        if through_seq is not None:
            where += " AND o.seq <= ?"
            args.append(through_seq)
        if mode is not None:
            where += " AND o.mode = ?"
            args.append(mode)
        return self._observations(where, args, limit=limit)

    # ------------------------------------------------------------------ quarantine
    def _key_free_of(self, cur: Any, table: str, key: str) -> None:
        """Inside a write: refuse ``key`` if ``table`` (the other of observations and quarantine) already holds it."""
        cur.execute(self._sql(f"SELECT seq FROM {table} WHERE idempotency_key = ?"), (key,))
        row = cur.fetchone()
        if row is not None:
            raise IdempotencyConflict(key, int(row[0]), quarantined=table == "quarantine")

    def add_quarantined(self, record: QuarantineRecord) -> tuple[QuarantineRecord, bool]:
        """Keep an implausible observation (its ``seq`` is ignored), in one transaction; returns it as stored and
        whether it is new. An idempotency key already stored here with the same ``request_sha256`` gives the stored
        record; with another body, or a key an accepted observation holds, :class:`IdempotencyConflict`."""
        def tx(cur):
            r = record
            if r.idempotency_key is not None:
                cur.execute(self._sql("SELECT seq, request_sha256 FROM quarantine WHERE idempotency_key = ?"), (r.idempotency_key,))
                row = cur.fetchone()
                if row is not None:
                    if row[1] != r.request_sha256:
                        raise IdempotencyConflict(r.idempotency_key, int(row[0]), quarantined=True)
                    return int(row[0]), False
                self._key_free_of(cur, "observations", r.idempotency_key)
            cur.execute(self._sql("INSERT INTO quarantine (idempotency_key, request_sha256, mode, kind, field, reason, received_at, "
                                  "body) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq"),
                        (r.idempotency_key, r.request_sha256, r.mode, r.kind, r.field, r.reason, r.received_at,
                         json.dumps(r.body, separators=(",", ":"))))  # the body as posted: NaN kept as NaN
            seq = int(cur.fetchone()[0])
            cur.executemany(self._sql("INSERT INTO quarantine_jobs (seq, position, job) VALUES (?, ?, ?)"),
                            [(seq, i, j) for i, j in enumerate(r.jobs)])
            return seq, True
        seq, new = self._write(tx)
        return self.quarantine_records("q.seq = ?", (seq,))[0], new

    def quarantine_records(self, where: str = "1 = 1", args: Sequence[Any] = (), limit: int | None = None) -> list[QuarantineRecord]:
        lim = "" if limit is None else f" LIMIT {int(limit)}"
        heads = self._read(f"SELECT q.seq, q.kind, q.field, q.reason, q.received_at, q.mode, q.body, q.idempotency_key, "
                           f"q.request_sha256 FROM quarantine q WHERE {where} ORDER BY q.seq DESC{lim}", args)
        out = []
        for h in heads:
            jobs = [r[0] for r in self._read("SELECT job FROM quarantine_jobs WHERE seq = ? ORDER BY position", (h[0],))]
            out.append(QuarantineRecord(int(h[0]), h[1], h[2], h[3], h[4], h[5], tuple(jobs), json.loads(h[6]), h[7], h[8]))
        return out

    def quarantined(self, job: str | None = None, kind: str | None = None, before: int | None = None,
                    limit: int = 100) -> list[QuarantineRecord]:
        """Quarantined observations, newest first: those naming ``job`` and of ``kind`` if given, below seq ``before``."""
        where, args = "1 = 1", []
        if job is not None:
            where += " AND q.seq IN (SELECT seq FROM quarantine_jobs WHERE job = ?)"
            args.append(job)
        if kind is not None:
            where += " AND q.kind = ?"
            args.append(kind)
        if before is not None:
            where += " AND q.seq < ?"
            args.append(before)
        return self.quarantine_records(where, args, limit)

    def quarantined_by_key(self, key: str) -> QuarantineRecord | None:
        found = self.quarantine_records("q.idempotency_key = ?", (key,))
        return found[0] if found else None

    def quarantine_counts(self) -> dict[str, int]:
        """Quarantined observations per kind."""
        return {k: int(n) for k, n in self._read("SELECT kind, COUNT(*) FROM quarantine GROUP BY kind")}

    # ------------------------------------------------------------------ model versions and events
    _VERSION_COLUMNS = "seq, name, version, model_id, sha256, path, mode, profile_source, created_at, detail"

    def add_model_version(self, name: str, model_id: str, sha256: str, path: str, mode: str, profile_source: str,
                          detail: dict[str, Any], promote: str | None = None) -> tuple[ModelVersion, ModelEvent | None]:
        """Record a trained version of ``name`` (its files already written and fsynced under ``path``), numbered one
        above the last, and with ``promote`` (the reason) its promotion, in one transaction: a server applies both or
        neither."""
        def tx(cur):
            cur.execute(self._sql("SELECT COALESCE(MAX(version), 0) FROM model_versions WHERE name = ?"), (name,))
            version = int(cur.fetchone()[0]) + 1
            at = now_utc()
            cur.execute(self._sql(f"INSERT INTO model_versions ({self._VERSION_COLUMNS[5:]}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                                  "RETURNING seq"),
                        (name, version, model_id, sha256, path, mode, profile_source, at,
                         json.dumps(detail, separators=(",", ":"), allow_nan=False)))
            seq = int(cur.fetchone()[0])
            mv = ModelVersion(seq, name, version, model_id, sha256, path, mode, profile_source, at, detail)
            ev = None
            if promote is not None:
                ev = self._event(cur, name, "promote", version, model_id, promote, {})
            return mv, ev
        return self._write(tx)

    def _event(self, cur: Any, name: str, action: str, version: int, model_id: str | None, reason: str,
               detail: dict[str, Any]) -> ModelEvent:
        at = now_utc()
        cur.execute(self._sql("INSERT INTO model_events (name, action, version, model_id, at, reason, detail) "
                              "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING seq"),
                    (name, action, version, model_id, at, reason, json.dumps(detail, separators=(",", ":"), allow_nan=False)))
        return ModelEvent(int(cur.fetchone()[0]), name, action, version, model_id, at, reason, detail)

    def add_model_event(self, name: str, action: str, version: int, reason: str, detail: dict[str, Any] | None = None) -> ModelEvent:
        """Make ``version`` of ``name`` the one served (``action`` promote or rollback; version 0: each server's start-up
        model). A version that was never recorded is refused (:class:`StoreError`)."""
        if action not in MODEL_ACTIONS:
            raise ValueError(f"action must be one of {', '.join(MODEL_ACTIONS)}, not {action!r}")

        def tx(cur):
            model_id = None
            if version != 0:
                cur.execute(self._sql("SELECT model_id FROM model_versions WHERE name = ? AND version = ?"), (name, version))
                row = cur.fetchone()
                if row is None:
                    raise StoreError(f"model {name!r} has no version {version}")
                model_id = row[0]
            return self._event(cur, name, action, version, model_id, reason, detail or {})
        return self._write(tx)

    def _versions_where(self, where: str, args: Sequence[Any]) -> list[ModelVersion]:
        rows = self._read(f"SELECT {self._VERSION_COLUMNS} FROM model_versions WHERE {where} ORDER BY seq", args)
        return [ModelVersion(int(r[0]), r[1], int(r[2]), r[3], r[4], r[5], r[6], r[7], r[8], json.loads(r[9])) for r in rows]

    def model_versions(self, name: str | None = None) -> list[ModelVersion]:
        """Every recorded version (of ``name``), oldest first."""
        return self._versions_where("1 = 1", ()) if name is None else self._versions_where("name = ?", (name,))

    def model_version(self, name: str, version: int) -> ModelVersion | None:
        found = self._versions_where("name = ? AND version = ?", (name, version))
        return found[0] if found else None

    def model_version_by_id(self, model_id: str) -> ModelVersion | None:
        """The version an answer or an observation record names (``NAME@SHA256[:12]``; None: a start-up model)."""
        found = self._versions_where("model_id = ?", (model_id,))
        return found[0] if found else None

    def model_events(self, name: str | None = None, after_seq: int = 0, limit: int = 10_000) -> list[ModelEvent]:
        """Promotions and rollbacks (of ``name``) after ``after_seq``, oldest first."""
        where, args = "seq > ?", [after_seq]
        if name is not None:
            where += " AND name = ?"
            args.append(name)
        rows = self._read(f"SELECT seq, name, action, version, model_id, at, reason, detail FROM model_events WHERE {where} "
                          f"ORDER BY seq LIMIT {int(limit)}", args)
        return [ModelEvent(int(r[0]), r[1], r[2], int(r[3]), r[4], r[5], r[6], json.loads(r[7])) for r in rows]

    def active_versions(self) -> dict[str, ModelEvent]:
        """The latest event of each model name: the version serving it (a name without events serves version 0)."""
        rows = self._read("SELECT e.seq, e.name, e.action, e.version, e.model_id, e.at, e.reason, e.detail FROM model_events e "
                          "JOIN (SELECT name, MAX(seq) AS s FROM model_events GROUP BY name) m ON e.seq = m.s ORDER BY e.name")
        return {r[1]: ModelEvent(int(r[0]), r[1], r[2], int(r[3]), r[4], r[5], r[6], json.loads(r[7])) for r in rows}


def _version(name: str, row: tuple) -> VersionRecord:
    seq, version, document, sha256, created_at = row
    return VersionRecord(int(seq), name, int(version), None if document is None else json.loads(document), sha256, created_at)
