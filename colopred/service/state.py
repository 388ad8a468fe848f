"""What a server holds in memory, and how it is rebuilt from the store.

  models      the models served: each name's version the store's model events make active (version 0, the shipped
              model or the ``--model`` manifest the server started with; a trained version from the models folder,
              :mod:`.versions`); each is a :class:`~colopred.runtime.predictor.Predictor` whose ``offsets`` are
              the live job offsets, rebuilt from every stored observation when the version changes
  profiles    the latest version of every registered profile, as ``JobProfile`` (``meta`` left in the store)
  offsets     per model, each observed job's running sum of log(measured / predicted) and its count k; the
              predictor's ``JobOffset`` of a job is (k, sum / k), as ``Predictor.observe`` pools them
  nodes       the latest report of what runs on each node's GPUs (the scheduler extender's view)
  rolling     per mode, the errors of the last ``ROLLING_ERRORS`` observed jobs' predictions at the time
  job_rolling per (mode, job), the errors of that job's last ``ROLLING_JOB_ERRORS`` predictions at the time (drift)
  caches      answers keyed by what they depend on (:class:`AnswerCache`)

All of it is a function of the store's rows read in ``seq`` order (:meth:`ServiceState.catch_up`): a restarted
server, every worker process and every replica compute the same state, bit for bit. A process applies its own
writes the same way, after they are committed, so nothing is applied twice or out of order.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import OrderedDict, deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Hashable, Iterable, Sequence

import numpy as np

from ..constants import DRIFT_MIN_JOB_ROWS, DRIFT_STALE_FACTOR, MODES
from ..io import sha256_of
from ..profile import JobProfile
from ..runtime.manifest import default_model_path
from ..runtime.observed import JobOffset
from ..runtime.predictor import Predictor
from ..runtime.sources import PROFILE_SOURCES, source_of
from ..errors import ColopredError
from .config import Limits
from .store import ModelEvent, Store
from .versions import VersionError, load_version

log = logging.getLogger("colopred.service")

ROLLING_ERRORS = 200
"""Observed jobs (per mode) over which /metrics' rolling error of predictions is taken."""

ROLLING_JOB_ERRORS = 20
"""Observations of one job (per mode) over which its own rolling error is taken (``GET /v1/drift``, ``/status``)."""
DRIFT_JOBS_EXPORTED = 50
"""Jobs whose rolling error /metrics exports (the highest): a gauge per observed job would be unbounded."""

CHECKPOINT_EVERY_ROWS = 200_000
"""A start that read at least this many observation rows writes a checkpoint of the sums (``Store.write_checkpoint``)."""

ANSWER_CACHE_ENTRIES = 20_000
"""Answers kept (first in, first out): about 1 KB each with its key, 20 MB in all."""
VERDICT_EPOCHS = 64
"""The extender's verdicts kept: per pod and state (epoch), each candidate node's GPUs (the latest 64 pods)."""
SET_VALUE_ENTRIES = 50_000
"""The extender's per-GPU set values kept (first in, first out): about 300 bytes each."""


class ServiceError(Exception):
    """A request the service refuses: HTTP ``status``, the ``field`` it names, and a one-line message."""

    def __init__(self, status: int, field: str | None, message: str, headers: dict[str, str] | None = None):
        self.status, self.field, self.message, self.headers = status, field, message, headers
        super().__init__(message)


@dataclass
class ServedModel:
    """One model the server answers with, and its live job offsets."""

    name: str
    sha256: str
    predictor: Predictor
    sums: dict[str, tuple[float, int]] = field(default_factory=dict)
    version: int = 0
    """0: the model the server started with; 1, 2, ...: a trained version (the store's ``model_versions``)."""

    def __post_init__(self) -> None:
        self.id = f"{self.name}@{self.sha256[:12]}"
        """``NAME@SHA256[:12]``: the model version an answer or an observation record names."""

    @property
    def mode(self) -> str:
        return self.predictor.mode

    @property
    def source(self) -> str:
        return self.predictor.profile_source

    def describe(self) -> dict[str, Any]:
        m = self.predictor.manifest
        return {"name": self.name, "id": self.id, "version": self.version, "mode": self.mode, "profile_source": self.source, "gpu": m.get("gpu"),
                "sha256": self.sha256, "n_sets": m.get("n_sets"), "jobs": len(m.get("jobs") or []),
                "max_set_size": m.get("max_set_size"), "metrics": m.get("metrics"),
                "observed_jobs": len(self.sums), "observations": sum(k for _, k in self.sums.values())}

    def add(self, job: str, log_ratio: float) -> None:
        total, k = self.sums.get(job, (0.0, 0))
        self.sums[job] = (total + log_ratio, k + 1)
        self.refresh((job,))

    def refresh(self, jobs: Iterable[str]) -> None:
        """The predictor's offsets of ``jobs`` from their sums: (k, Σ / k), as ``Predictor.observe`` pools them."""
        for job in jobs:
            total, k = self.sums[job]
            self.predictor.offsets[job] = JobOffset(k, total / k)

    def observed(self, job: str) -> int:
        entry = self.sums.get(job)
        return 0 if entry is None else entry[1]


def load_models(paths: Sequence[str] = ()) -> dict[str, ServedModel]:
    """The models to serve: the given manifests, or every shipped model (each mode, ncu and GPM profiles)."""
    if not paths:
        paths = [str(default_model_path(m, s)) for m in MODES for s in PROFILE_SOURCES if default_model_path(m, s).exists()]
    out: dict[str, ServedModel] = {}
    for p in paths:
        path = Path(p)
        pred = Predictor.load(path)
        name = path.name[:-5] if path.name.endswith(".json") else path.name
        if name in out:
            raise ValueError(f"two models named {name!r} (--model): give each manifest its own file name")
        out[name] = ServedModel(name, sha256_of(path), replace(pred, offsets={}))
    return out


class AnswerCache:
    """A bounded map of answers (first in, first out): a key names everything an answer depends on (model version,
    each member's profile version and observation count), so an entry never goes stale; it is only evicted."""

    def __init__(self, size: int = ANSWER_CACHE_ENTRIES):
        self.size = size
        self._d: OrderedDict[Hashable, Any] = OrderedDict()
        self.hits = self.misses = 0

    def get(self, key: Hashable) -> Any:
        v = self._d.get(key)
        if v is None:
            self.misses += 1
        else:
            self.hits += 1
        return v

    def peek(self, key: Hashable) -> Any:
        """The entry, or None, without counting a hit or a miss (the caller counts a batch at once)."""
        return self._d.get(key)

    def put(self, key: Hashable, value: Any) -> None:
        self._d[key] = value
        if len(self._d) > self.size:
            try:
                self._d.popitem(last=False)
            except KeyError:  # emptied by another thread meanwhile
                pass


class ServiceState:
    """The server's memory (module doc). ``sync()`` before answering brings it up to the store's last commit."""

    def __init__(self, store: Store, models: dict[str, ServedModel], limits: Limits | None = None,
                 max_per_gpu: int = 3, max_slowdown: float | None = None, models_dir: Path | None = None):
        self.store = store
        self.models = models
        self.base = {name: (m.sha256, m.predictor) for name, m in models.items()}
        """Each name's version 0: the model the server started with."""
        self.models_dir = models_dir
        self.version_errors: dict[str, str] = {}
        """Per name, why the version the store makes active could not be loaded (the previous one keeps serving)."""
        self.limits = limits or Limits()
        self.defaults: dict[str, Any] = {"max_per_gpu": max_per_gpu, "max_slowdown": max_slowdown}
        """The extender's limits where a pod's annotations set none."""
        self.profiles: dict[str, tuple[int, JobProfile]] = {}
        self.nodes: dict[str, tuple[int, dict[str, Any]]] = {}
        self.heads = {"profiles": 0, "observations": 0, "nodes": 0, "models": 0}
        self.rolling = {m: deque(maxlen=ROLLING_ERRORS) for m in MODES}
        self.job_rolling: dict[tuple[str, str], deque] = {}
        self.observation_counts = dict.fromkeys(MODES, 0)
        self.lock = threading.RLock()
        self.replayed = 0
        """Observation rows this process has read from the store and applied (not counting a checkpoint's)."""
        self.predictions = AnswerCache()
        self.set_values = AnswerCache(SET_VALUE_ENTRIES)
        self.verdicts = AnswerCache(VERDICT_EPOCHS)
        self._apply_model_events()
        self.restore_checkpoint()
        self.catch_up()
        if self.replayed >= CHECKPOINT_EVERY_ROWS:
            self.checkpoint()

    # ------------------------------------------------------------------ checkpoints
    def restore_checkpoint(self) -> bool:
        """Start from the store's latest checkpoint of every served model's sums (module doc: the same state as
        reading every row, in a fraction of the time); False where there is none."""
        found = self.store.latest_checkpoint(sorted(m.id for m in self.models.values()))
        if found is None:
            return False
        head, sums = found
        by_id = {m.id: m for m in self.models.values()}
        for model_id, jobs in sums.items():
            m = by_id[model_id]
            m.sums = dict(jobs)
            m.refresh(list(jobs))
        self.observation_counts.update(self.store.observation_counts(head))
        for mode in list(self.rolling):
            d = self.rolling[mode]
            for slowdown, predicted in self.store.last_job_rows(mode, head, ROLLING_ERRORS):
                d.append(100.0 * abs(predicted - slowdown) / slowdown)
        for mode, job, slowdown, predicted in self.store.last_rows_per_job(head, ROLLING_JOB_ERRORS):
            self._job_window(mode, job).append(100.0 * abs(predicted - slowdown) / slowdown)
        self.heads["observations"] = head
        return True

    def checkpoint(self) -> None:
        """Write every served model's sums at the last applied observation (a later start reads only what follows)."""
        with self.lock:
            self.store.write_checkpoint(self.heads["observations"], {m.id: dict(m.sums) for m in self.models.values()})

    # ------------------------------------------------------------------ models
    def model_for(self, mode: str, profiles: Sequence[JobProfile], name: str | None = None) -> ServedModel:
        """The served model named ``name`` (of ``mode``), or the one of ``mode`` for the profiles' source, as
        ``Predictor.for_profiles`` picks among the shipped models."""
        if name is not None:
            m = self.models.get(name)
            if m is None:
                raise ServiceError(404, "model", f"model: no model named {name!r} is served (GET /v1/models lists them)")
            if m.mode != mode:
                raise ServiceError(422, "model", f"model: {name!r} is a {m.mode} model, not {mode}")
            return m
        try:
            source = source_of(profiles) if profiles else "ncu"
        except ValueError as e:
            raise ServiceError(422, "jobs", f"jobs: {e}") from None
        for m in self.models.values():
            if m.mode == mode and m.source == source:
                return m
        raise ServiceError(422, "mode", f"mode: no {mode} model for {source} profiles is served")

    # ------------------------------------------------------------------ profiles
    def profile(self, name: str, where: str) -> tuple[int, JobProfile]:
        hit = self.profiles.get(name)
        if hit is None:
            raise ServiceError(404, where, f"{where}: no profile named {_show(name)} is registered")
        return hit

    # ------------------------------------------------------------------ catching up with the store
    def sync(self) -> None:
        """Apply whatever was committed to the store since the last look (cheap when nothing was)."""
        if self.store.changed():
            self.catch_up()

    def catch_up(self) -> None:
        with self.lock:
            self._apply_model_events()
            for rec in _drain(self.store.profile_changes, self.heads["profiles"]):
                if rec.document is None:
                    self.profiles.pop(rec.name, None)
                else:
                    # provenance (meta) stays in the store: GET /v1/profiles/{name} answers from there
                    p = JobProfile.from_dict({**rec.document, "meta": {}}, f"store profile {rec.name} v{rec.version}")
                    self.profiles[rec.name] = (rec.version, p)
                self.heads["profiles"] = rec.seq
            for rec in _drain(self.store.node_changes, self.heads["nodes"]):
                if rec.document is None:
                    self.nodes.pop(rec.name, None)
                else:
                    self.nodes[rec.name] = (rec.version, rec.document)
                self.heads["nodes"] = rec.seq
            self._apply_observations()

    def _apply_observations(self) -> None:
        """The observation rows after the last applied, in seq order: each job's Σ log ratio and count, summed in
        that order (so a rebuild from the store and a server that took them one by one hold the same floats)."""
        by_id = {m.id: m for m in self.models.values()}
        foreign: list[int] = []
        touched: dict[str, set[str]] = {}
        counts, rolling, job_rolling = self.observation_counts, self.rolling, self.job_rolling
        last = prev = self.heads["observations"]
        for seq, mode, model_id, job, log_ratio, slowdown, predicted in self.store.observation_rows(self.heads["observations"]):
            m = by_id.get(model_id)
            if m is None:
                if seq != prev:
                    foreign.append(seq)
            else:
                sums = m.sums
                total, k = sums.get(job, (0.0, 0))
                sums[job] = (total + log_ratio, k + 1)
                touched.setdefault(m.name, set()).add(job)
            if seq != prev:
                counts[mode] = counts.get(mode, 0) + 1
                prev = seq
            d = rolling.get(mode)
            if d is None:
                d = rolling[mode] = deque(maxlen=ROLLING_ERRORS)
            err = 100.0 * abs(predicted - slowdown) / slowdown
            d.append(err)
            w = job_rolling.get((mode, job))
            if w is None:
                w = job_rolling[(mode, job)] = deque(maxlen=ROLLING_JOB_ERRORS)
            w.append(err)
            last = seq
            self.replayed += 1
        for name, jobs in touched.items():
            self.models[name].refresh(jobs)
        if foreign:
            self._apply_foreign(foreign)
        self.heads["observations"] = last

    def _apply_foreign(self, seqs: list[int], only: str | None = None) -> None:
        """Observations predicted by a model this server does not serve (another replica's, or before a model
        change): the served model of their mode and profile source predicts them again, from the profile versions
        they were taken with, and takes their log ratios from that (``only``: that served model's alone)."""
        known: dict[tuple[str, Any], JobProfile | None] = {}

        def profile_of(job: str, version: Any) -> JobProfile | None:
            if (job, version) not in known:
                rec = self.store.profile(job, version)
                known[(job, version)] = (None if rec is None or rec.document is None
                                         else JobProfile.from_dict({**rec.document, "meta": {}}))
            return known[(job, version)]

        for lo in range(0, len(seqs), 5_000):
            records = self.store.observations_by_seq(seqs[lo:lo + 5_000])
            groups: dict[str, list[tuple[Any, list[JobProfile]]]] = {}
            for r in records:
                versions = r.detail.get("profile_versions") or [None] * len(r.jobs)
                profiles = []
                for j, v in zip(r.jobs, versions):
                    p = profile_of(j.job, v)
                    if p is None:
                        break
                    profiles.append(p)
                else:
                    try:
                        m = self.model_for(r.mode, profiles)
                    except ServiceError:
                        continue
                    if only is not None and m.name != only:
                        continue
                    groups.setdefault(m.name, []).append((r, profiles))
            for name, items in groups.items():
                m = self.models[name]
                raw = Predictor(m.predictor.model, m.mode, m.predictor.manifest)
                s_hat = raw.predict_many([ps for _, ps in items])["slowdown"].to_numpy()
                measured = np.array([j.slowdown for r, _ in items for j in r.jobs])
                names = [j.job for r, _ in items for j in r.jobs]
                for job, lr in zip(names, np.log(measured / s_hat)):
                    m.add(job, float(lr))

    # ------------------------------------------------------------------ model versions
    def _apply_model_events(self) -> None:
        """Serve, for each name, the version of its latest model event after the last applied (module doc). A
        version that cannot be loaded leaves the one serving in place, and says why in ``version_errors``."""
        latest: dict[str, ModelEvent] = {}
        head = self.heads["models"]
        while True:
            events = self.store.model_events(after_seq=head)
            if not events:
                break
            for ev in events:
                latest[ev.name] = ev
            head = events[-1].seq
        switched = False
        for name, ev in latest.items():
            m = self.models.get(name)
            if m is None:  # a model this server does not serve
                continue
            if ev.version == m.version and (ev.version == 0 or m.id == ev.model_id):
                self.version_errors.pop(name, None)
                continue
            try:
                new = self._served_version(name, ev)
                self.version_errors.pop(name, None)
            except (VersionError, ColopredError, OSError, ValueError) as e:
                self.version_errors[name] = f"version {ev.version}: {e}"
                new = self._last_good(name, ev)
                log.error("model %s: cannot serve version %d (%s); version %d serves", name, ev.version, e, new.version)
                if new.version == m.version and new.id == m.id:
                    continue
            self.models[name] = new
            self._rebuild(new)
            log.info("model %s: version %d (%s) serves, after a %s", name, new.version, new.id, ev.action)
            switched = True
        self.heads["models"] = head
        if switched:  # every cached answer names its model's id, but the extender's verdicts do not: start afresh
            self.predictions, self.set_values, self.verdicts = AnswerCache(), AnswerCache(SET_VALUE_ENTRIES), AnswerCache(VERDICT_EPOCHS)

    def _last_good(self, name: str, failed: ModelEvent) -> ServedModel:
        """The version of the newest event before ``failed`` that loads (version 0 at worst): what every server of the
        store serves, a running one and a restarted one alike, while the newest event's version cannot be loaded."""
        for ev in reversed([e for e in self.store.model_events(name) if e.seq < failed.seq]):
            if ev.version == failed.version:
                continue
            try:
                return self._served_version(name, ev)
            except (VersionError, ColopredError, OSError, ValueError):
                continue
        return self._served_version(name, ModelEvent(0, name, "rollback", 0, None, "", ""))

    def _served_version(self, name: str, ev: ModelEvent) -> ServedModel:
        sha, base = self.base[name]
        if ev.version == 0:
            return ServedModel(name, sha, replace(base, offsets={}), version=0)
        mv = self.store.model_version(name, ev.version)
        if mv is None:
            raise VersionError(f"the store records no version {ev.version} of {name}")
        pred = load_version(self.models_dir, mv.path, mv.sha256)
        if pred.mode != base.mode or pred.profile_source != base.profile_source:
            raise VersionError(f"{mv.path}: a {pred.mode} model of {pred.profile_source} profiles cannot serve {name} "
                               f"({base.mode}, {base.profile_source})")
        return ServedModel(name, mv.sha256, replace(pred, offsets={}), version=ev.version)

    def _rebuild(self, m: ServedModel) -> None:
        """``m``'s sums from every observation applied so far: its own rows as stored, the others of its mode
        predicted again by it (as :meth:`_apply_foreign` takes another model's)."""
        m.sums = {}
        m.predictor.offsets = {}
        head = self.heads["observations"]
        if head == 0:
            return
        foreign: list[int] = []
        prev = 0
        for seq, mode, model_id, job, log_ratio, _, _ in self.store.observation_rows(0):
            if seq > head:  # read to the end: the generator holds the store's read lock until it is exhausted
                continue
            if model_id == m.id:
                total, k = m.sums.get(job, (0.0, 0))
                m.sums[job] = (total + log_ratio, k + 1)
            elif mode == m.mode and seq != prev:
                foreign.append(seq)
            prev = seq
        if m.sums:
            m.refresh(list(m.sums))
        if foreign:
            self._apply_foreign(foreign, only=m.name)

    # ------------------------------------------------------------------ figures
    def rolling_error_pct(self, mode: str) -> float:
        d = self.rolling.get(mode)
        return float(sum(d) / len(d)) if d else math.nan

    def _job_window(self, mode: str, job: str) -> deque:
        w = self.job_rolling.get((mode, job))
        if w is None:
            w = self.job_rolling[(mode, job)] = deque(maxlen=ROLLING_JOB_ERRORS)
        return w

    def stale_threshold_pct(self, mode: str) -> float:
        """``DRIFT_STALE_FACTOR`` times the leave-architecture cross-validated MAPE of the served models of ``mode``
        (the largest, where several serve it: ncu and GPM profiles), from their manifests; NaN where none says."""
        cv = []
        with self.lock:
            for m in self.models.values():
                if m.mode == mode:
                    value = ((m.predictor.manifest.get("metrics") or {}).get("leave-arch") or {}).get("slowdown_mape_pct")
                    if isinstance(value, (int, float)) and value > 0:
                        cv.append(float(value))
        return DRIFT_STALE_FACTOR * max(cv) if cv else math.nan

    def drift(self) -> dict[str, Any]:
        """Per mode: the rolling error, how many job rows it is over, the stale threshold and whether the model of the
        mode is stale (the rolling error over at least ``DRIFT_MIN_JOB_ROWS`` rows above the threshold)."""
        out = {}
        for mode in sorted(self.rolling):
            rows = len(self.rolling[mode])
            err, limit = self.rolling_error_pct(mode), self.stale_threshold_pct(mode)
            out[mode] = {"rolling_error_pct": None if err != err else round(err, 4), "rows": rows,
                         "threshold_pct": None if limit != limit else round(limit, 4),
                         "stale": bool(rows >= DRIFT_MIN_JOB_ROWS and err == err and limit == limit and err > limit)}
        return out

    def job_drift(self, mode: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Each observed job's rolling error (its last ``ROLLING_JOB_ERRORS`` observations), highest first."""
        with self.lock:
            rows = [{"mode": md, "job": job, "rows": len(w), "rolling_error_pct": round(float(sum(w) / len(w)), 4)}
                    for (md, job), w in self.job_rolling.items() if w and (mode is None or md == mode)]
        rows.sort(key=lambda r: (-r["rolling_error_pct"], r["mode"], r["job"]))
        return rows if limit is None else rows[:limit]

    def fingerprint(self) -> dict[str, Any]:
        """Everything observable of the state, for tests that compare a rebuilt state with the one before."""
        return {"heads": dict(self.heads), "profiles": {n: v for n, (v, _) in sorted(self.profiles.items())},
                "nodes": {n: v for n, (v, _) in sorted(self.nodes.items())},
                "sums": {m.name: dict(sorted(m.sums.items())) for m in self.models.values()},
                "versions": {m.name: (m.version, m.id) for m in self.models.values()},
                "rolling": {k: list(v) for k, v in self.rolling.items()}, "counts": dict(self.observation_counts),
                "job_rolling": {f"{m}:{j}": list(v) for (m, j), v in sorted(self.job_rolling.items())}}


def _drain(fetch, after: int) -> Iterable[Any]:
    while True:
        batch = fetch(after)
        if not batch:
            return
        yield from batch
        after = batch[-1].seq


def _show(name: str, limit: int = 60) -> str:
    """A name as an error quotes it: repr, cut to ``limit`` characters."""
    text = repr(name)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


__all__ = ["AnswerCache", "ServedModel", "ServiceError", "ServiceState", "load_models"]
