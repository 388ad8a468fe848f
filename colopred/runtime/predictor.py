"""The scheduler-facing API: ``Predictor`` (one model of one sharing mode) and its ``Prediction``.

  pred = Predictor.default("mps")            # the shipped H100 model, or Predictor.load("my-mps.json")
  pred = Predictor.for_profiles("mps", jobs) # the shipped model for the jobs' profiles (ncu or GPM)
  p = pred.predict([a, b])                   # Prediction: slowdown, interval, delta, throughput, fits_memory
  pred.predict_many([[a, b], [a, b, c]])     # tidy DataFrame, one row per job of each set
  pred.rank_partners(a, candidates, k=3)     # best partners for a job
  pred.pack(jobs, n_gpus=4)                  # jobs placed on GPUs
  pred.predict([a, a, b])                    # two copies of a beside b: jobs named a#1, a#2, b

A job given several times is that many copies of it (a hyperparameter sweep's runs side by side): the same profile,
the same solo time and the same observed offset (``colopred.profile.job_of``), the features those of a partner with
the same profile; results name the copies ``JOB#1``, ``JOB#2``, ... in the order given
(``colopred.profile.instance_names``).
  pred = pred.observe([Observation((a, b), (1.42, 1.17))])  # measured collocations shift a's and b's predictions

δ, throughput and the memory rule come from :mod:`colopred.runtime.outcome`; the model from
:mod:`colopred.runtime.estimator`; its files from :mod:`colopred.runtime.manifest`.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from ..constants import DEFAULT_MIN_THROUGHPUT, MODES
from ..errors import InputError
from ..profile import JobProfile, as_instances, instance_name, instance_names, job_of
from . import outcome
from .checks import check_pack, check_predict, check_predict_many, check_rank_partners
from .estimator import SlowdownModel
from .explain import Explanation, JobExplanation, explain_rows
from .baseline import baseline_columns
from .features import FEATURES, feature_columns, feature_matrix, index_sets, profile_matrix  # noqa: F401 (index_sets: the benchmark's)
from .manifest import default_model_path, load_model, save_model
from .observed import (
    JobOffset,
    Observation,
    corrected,
    corrected_interval,
    factors,
    job_offsets,
    offset_share_of,
    prior_weight_of,
    width_factors,
)
from .placement import FAIR, Gpu, Placement, place
from .sources import PROFILE_SOURCES, source_of

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # imported by the calls that answer with a frame: loading a model and predicting do without it


@dataclass(frozen=True)
class Prediction:
    """Predicted outcome of running ``jobs`` together in ``mode`` (per-job tuples in the order given)."""

    mode: str
    jobs: tuple[str, ...]
    slowdown: tuple[float, ...]
    interval: tuple[tuple[float, float], ...]
    solo_iteration_ms: tuple[float, ...]
    fits_memory: bool
    memory_gib: float | None = None
    observations: tuple[int, ...] | None = None
    """Per job, how many measured collocations shifted its prediction (:meth:`Predictor.observe`); None: none."""
    _explainer: Callable[[], list[list[Any]]] | None = field(default=None, repr=False, compare=False)
    """Each job's contributions, computed when :meth:`explain` asks (a prediction does not pay for them)."""

    def explain(self, k: int = 3) -> Explanation:
        """Why each job's slowdown is what it is: its ``k`` largest contributions (the trees' features through
        XGBoost's own per-feature contributions, the contention baseline's terms, the offsets), each in words and
        in slowdown units, with what the rest add up to; 1 and all of a job's contributions add up to its slowdown
        (:mod:`colopred.runtime.explain`). ``.text()`` reads them, ``.to_dict()`` gives them as data."""
        if self._explainer is None:
            raise ValueError("this prediction holds no model to explain it (Predictor.predict makes ones that do)")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive number of contributions, not {k!r}")
        rows = self._explainer()
        return Explanation(self.mode, tuple(JobExplanation(n, s, tuple(c)) for n, s, c in zip(self.jobs, self.slowdown, rows)), k)

    @property
    def collocated_iteration_ms(self) -> tuple[float, ...]:
        """t'_j = t_j · s_j."""
        return tuple(t * s for t, s in zip(self.solo_iteration_ms, self.slowdown))

    @property
    def delta(self) -> float:
        """Tabrizian's δ (eq. 4.1): Σ t_j / max t'_j."""
        return outcome.delta(self.solo_iteration_ms, self.collocated_iteration_ms)

    @property
    def throughput(self) -> float:
        """Normalised throughput Σ 1 / s_j (> 1: the collocation pays)."""
        return outcome.normalised_throughput(self.slowdown)

    @property
    def pays_off(self) -> bool:
        return self.fits_memory and self.throughput > 1.0

    def to_dict(self) -> dict[str, Any]:
        observed = self.observations or (0,) * len(self.jobs)
        return {
            "mode": self.mode,
            "jobs": [{"name": n, "slowdown": s, "interval": list(i), "solo_iteration_ms": t, "collocated_iteration_ms": t * s,
                      **({"observations": k} if self.observations is not None else {})}
                     for n, s, i, t, k in zip(self.jobs, self.slowdown, self.interval, self.solo_iteration_ms, observed)],
            "delta": self.delta,
            "throughput": self.throughput,
            "fits_memory": self.fits_memory,
            "memory_gib": self.memory_gib,
            "pays_off": self.pays_off,
        }

    def summary(self) -> str:
        lines = [f"mode {self.mode}: {len(self.jobs)} jobs"]
        observed = self.observations or (0,) * len(self.jobs)
        for n, s, (lo, hi), t, k in zip(self.jobs, self.slowdown, self.interval, self.solo_iteration_ms, observed):
            seen = f"  (shifted by {k} measured collocation{'s' if k > 1 else ''})" if k else ""
            lines.append(f"  {n:<32} slowdown {s:5.2f}  [{lo:.2f}, {hi:.2f}]  {t:7.2f} ms -> {t * s:7.2f} ms{seen}")
        verdict = "pays off" if self.pays_off else ("does not fit in memory" if not self.fits_memory else "does not pay off")
        lines.append(f"  delta {self.delta:.2f}   normalised throughput {self.throughput:.2f}   ({verdict})")
        return "\n".join(lines)


PREDICT_CHUNK_SETS = 65_536
"""Sets whose features are built and predicted at once by ``predict_many``: memory stays near 60 MB of features
per chunk whatever the number of sets, and larger chunks were no faster on a 2-core machine."""

PREDICT_MANY_COLUMNS = ("set_id", "job", "n_jobs", "slowdown", "solo_iteration_ms", "collocated_iteration_ms", "delta",
                        "throughput", "memory_gib", "fits_memory")


@dataclass
class Predictor:
    """Predicts slowdowns for sets of :class:`JobProfile` in one sharing mode."""

    model: SlowdownModel
    mode: str
    manifest: dict[str, Any] = field(default_factory=dict)
    offsets: dict[str, JobOffset] = field(default_factory=dict)
    """Each observed job's offset (:meth:`observe`; :mod:`colopred.runtime.observed`), by job name (a copy's, ``JOB#2``,
    is its job's: ``colopred.profile.job_of``)."""
    prior_weight: float | None = None
    """n₀ of the offsets' weight k / (k + n₀); None: ``constants.OBSERVED_PRIOR_WEIGHT`` of the mode."""

    def __repr__(self) -> str:
        """One line: mode, profile source, GPU and training data (the manifest and trees are attributes)."""
        m = self.manifest
        trained = f", {m['n_sets']} sets of {len(m.get('jobs') or [])} jobs" if "n_sets" in m else ""
        seen = f", {len(self.offsets)} observed jobs" if self.offsets else ""
        return (f"Predictor(mode={self.mode!r}, profile_source={m.get('profile_source', 'ncu')!r}, "
                f"gpu={m.get('gpu')!r}{trained}{seen})")

    # ------------------------------------------------------------------ loading
    @classmethod
    def default(cls, mode: str = "mps", source: str = "ncu") -> "Predictor":
        """The shipped H100 model of ``mode`` for ``source`` profiles (``ncu``, or ``nvml``: GPM profiles)."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r} (one of {', '.join(MODES)})")
        if source not in PROFILE_SOURCES:
            raise ValueError(f"unknown profile source {source!r} (one of {', '.join(PROFILE_SOURCES)})")
        path = default_model_path(mode, source)
        if not path.exists():
            raise InputError(path, f"no shipped default model for mode {mode!r} and {source} profiles")
        return cls.load(path)

    @classmethod
    def for_profiles(cls, mode: str, profiles: Sequence[JobProfile]) -> "Predictor":
        """The shipped model of ``mode`` that reads ``profiles``: the GPM model for GPM profiles, the ncu model for ncu
        profiles; a mix of both is refused (``ValueError``; ``colopred.runtime.sources.source_of``)."""
        return cls.default(mode, source_of(profiles))

    @property
    def profile_source(self) -> str:
        """The profiles the model was trained on and reads: ``ncu`` or ``nvml`` (GPM)."""
        return self.manifest.get("profile_source", "ncu")

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Predictor":
        """Load a manifest and its XGBoost files, checking schema, features and checksums."""
        model, man = load_model(path)
        return cls(model=model, mode=man["mode"], manifest=man)

    def save(self, path: str | os.PathLike, **manifest_extra: Any) -> Path:
        """Write the model's files (``colopred.runtime.manifest.save_model``); returns the manifest's path."""
        path = save_model(path, self.model, self.mode, **{**self.manifest, **manifest_extra})
        self.manifest = load_model(path)[1]
        return path

    # ------------------------------------------------------------ observations
    def observe(self, observations: Sequence[Observation], prior_weight: float | None = None) -> "Predictor":
        """A copy of this predictor whose predictions of every observed job (and their intervals) are shifted toward
        what was measured of it: k observations with mean log(measured / predicted) r multiply its slowdowns by
        exp(k / (k + n₀) · r) (:mod:`colopred.runtime.observed`). Observations pool with those this predictor already
        holds; ``prior_weight`` sets n₀ (default: ``constants.OBSERVED_PRIOR_WEIGHT`` of the mode; ``math.inf``: none)."""
        n0 = self._prior_weight if prior_weight is None else float(prior_weight)
        if not n0 >= 0:
            raise ValueError(f"prior_weight must be >= 0, not {prior_weight!r}")
        if not all(isinstance(o, Observation) for o in observations):
            raise ValueError("observations must be colopred Observation records")
        raw = replace(self, offsets={})
        return replace(self, offsets=job_offsets(raw, observations, self.offsets), prior_weight=n0)

    @property
    def _prior_weight(self) -> float:
        """n₀ in use: ``prior_weight``, else the mode's constant."""
        return prior_weight_of(self.mode) if self.prior_weight is None else self.prior_weight

    # --------------------------------------------------------------- predicting
    @property
    def _reads_queue_load(self) -> bool:
        """Whether the model's trees or baseline read ``queue_load`` (else a prediction skips its fixed point)."""
        return "queue_load" in self.model.features_ or "queue_load" in baseline_columns(self.model.load_)

    def _check_gpu(self, profiles: Sequence[JobProfile]) -> None:
        gpu = self.manifest.get("gpu")
        if not gpu:
            return
        for p in profiles:
            if p.gpu.name != gpu:
                warnings.warn(f"profile {p.name} was measured on {p.gpu.name}, the model on {gpu}: predictions may be off",
                              stacklevel=3)
                return

    def _check_wait(self, profiles: Sequence[JobProfile]) -> None:
        if self.mode != "mps" or self.profile_source == "nvml":  # a GPM model reads no wait
            return
        for p in profiles:
            if p.source == "ncu" and p.mps_wait_us is None:
                warnings.warn(f"profile {p.name} has no mps_wait_us (made by an older colopred): its MPS wait counts as 0; "
                              "rebuild it from its ncu report (colopred profile ncu) for full accuracy", stacklevel=3)
                return

    def predict(self, profiles: Sequence[JobProfile]) -> Prediction:
        """Slowdown of each job when ``profiles`` (two or more jobs) run together; a job given n > 1 times is n copies,
        named ``JOB#1`` .. ``JOB#n`` in ``Prediction.jobs``. A job alone runs at slowdown 1: :meth:`predict_many`
        accepts such one-job sets so that a placement's GPUs holding one job can be scored beside the others; here one
        job is refused as a likely mistake."""
        profiles = check_predict(self, profiles)
        if len(profiles) < 2:
            raise ValueError("a collocation needs at least two jobs")
        self._check_gpu(profiles)
        self._check_wait(profiles)
        P = profile_matrix(list(profiles))
        X, _, pos = feature_matrix(P, np.arange(len(profiles))[None, :], queue=self._reads_queue_load)
        s = np.empty(len(profiles))
        iv = np.empty((len(profiles), 2))
        jobs = [job_of(p.name) for p in profiles]  # a copy's offsets are its job's
        names = instance_names([p.name for p in profiles])
        s[pos], iv[pos] = self.model.predict_with_interval(X, jobs=[jobs[i] for i in pos])
        observed = None
        f = None
        if self.offsets:
            f = factors(self.offsets, jobs, self._prior_weight)
            rho = width_factors(self.offsets, jobs, self._prior_weight, offset_share_of(self.mode))
            s, iv = corrected(s, f), corrected_interval(s, iv, f, rho)
            observed = tuple(self.offsets[n].observations if n in self.offsets else 0 for n in jobs)
        order = np.empty(len(pos), dtype=np.intp)
        order[pos] = np.arange(len(pos))  # the feature row of each job, in the order given
        explainer = partial(explain_rows, self.model, X[order], list(jobs),
                            None if f is None else np.asarray(f, np.float64))
        need = outcome.memory_need_gib([p.peak_memory_gib for p in profiles])
        gpu_mem = max(p.gpu.memory_gib for p in profiles)
        return Prediction(self.mode, tuple(names), tuple(map(float, s)),
                          tuple((float(a), float(b)) for a, b in iv), tuple(p.iteration_ms for p in profiles),
                          fits_memory=outcome.fits_memory(need, gpu_mem), memory_gib=need, observations=observed,
                          _explainer=explainer)

    def predict_many(self, sets: Sequence[Sequence[JobProfile]]) -> pd.DataFrame:
        """Vectorised prediction of many sets: a tidy DataFrame with one row per job of each set, in the order
        given (columns ``PREDICT_MANY_COLUMNS``; ``delta``, ``throughput``, ``memory_gib`` and ``fits_memory``
        are the set's, repeated on each of its rows; copies of a job in a set named ``JOB#1``, ``JOB#2``, ...).
        Point predictions only (no interval)."""
        profiles, idx = check_predict_many(self, sets)
        self._check_wait(profiles)
        return self.predict_index(profiles, idx)

    def predict_index(self, profiles: Sequence[JobProfile], idx: np.ndarray) -> pd.DataFrame:
        """:meth:`predict_many` for sets given as an n_sets x k array of indices into ``profiles`` (-1 = no job in
        that slot): the fast path for schedulers scoring many candidate sets of the same jobs."""
        import pandas as pd

        profiles = list(profiles)
        idx = np.asarray(idx, dtype=np.int64)
        s = self.slowdown_index(profiles, idx)
        present = idx >= 0
        safe = np.where(present, idx, 0)
        t = np.where(present, np.array([p.iteration_ms for p in profiles])[safe], np.nan)
        mem = np.where(present, np.array([np.nan if p.peak_memory_gib is None else p.peak_memory_gib for p in profiles])[safe], np.nan)
        need = outcome.memory_need_gib(mem, present)
        gpu_mem = max(p.gpu.memory_gib for p in profiles)
        colo = t * s
        delta = outcome.delta(t, colo)
        thr = outcome.normalised_throughput(s)
        fits = outcome.fits_memory(need, gpu_mem)
        n_jobs = present.sum(1)
        flat = present.ravel()  # the jobs, set by set in slot order (a boolean mask is cheaper than index pairs)
        names = np.array([p.name for p in profiles], dtype=object)
        set_of_row = np.repeat(np.arange(len(idx)), n_jobs)
        per_set = lambda v: np.take(v, set_of_row)  # noqa: E731 (a set's value on each of its rows; take: no fancy-index overhead)
        return pd.DataFrame({
            "set_id": set_of_row,
            "job": _row_names(names, idx, present, n_jobs, flat),
            "n_jobs": per_set(n_jobs),
            "slowdown": s.ravel()[flat],
            "solo_iteration_ms": t.ravel()[flat],
            "collocated_iteration_ms": colo.ravel()[flat],
            "delta": per_set(delta),
            "throughput": per_set(thr),
            "memory_gib": per_set(need),
            "fits_memory": per_set(fits),
        }, columns=list(PREDICT_MANY_COLUMNS), copy=False)  # the arrays are fresh: no need to copy them into blocks

    def slowdown_index(self, profiles: Sequence[JobProfile], idx: np.ndarray) -> np.ndarray:
        """Predicted slowdown of every slot of ``idx`` (n_sets x k indices into ``profiles``, -1 = empty; NaN there).
        Sets are taken by size, their members moved to the first slots in order (every slot then full, the
        features' fast path; a set's values do not depend on its slots), ``PREDICT_CHUNK_SETS`` at a time so that
        memory stays proportional to the chunk."""
        P = profile_matrix(list(profiles))
        idx = np.asarray(idx, dtype=np.int64)
        present = idx >= 0
        if (present[:, 1:] <= present[:, :-1]).all():  # filled slots already first (index_sets makes them so)
            order = np.broadcast_to(np.arange(idx.shape[1]), idx.shape)
        else:
            order = np.argsort(~present, axis=1, kind="stable")  # each row's filled slots first, in their order
        size = present.sum(axis=1)
        s = np.full(idx.shape, np.nan)
        groups = [(g, np.flatnonzero(size == g)) for g in np.unique(size) if g > 0]
        model = self.model
        # one buffer for every chunk: memory stays that of the largest chunk
        n_rows = max((g * min(len(r), PREDICT_CHUNK_SETS) for g, r in groups), default=0)
        tree_buf = np.empty(n_rows * len(model.features_), dtype=np.float32)
        X_buf = None
        exact = baseline_columns(model.load_)
        for g, rows_g in groups:
            for lo in range(0, len(rows_g), PREDICT_CHUNK_SETS):
                r = rows_g[lo : lo + PREDICT_CHUNK_SETS]
                slots = order[r, :g]
                members = np.take_along_axis(idx[r], slots, axis=1)
                built = feature_columns(P, members, model.features_, exact, out=tree_buf)
                if built is not None:  # rows slot by slot: every set's first member, then every set's second, ...
                    s[r[:, None], slots] = model._predict_columns(*built, n_jobs=g).reshape(g, len(r)).T
                    continue
                if X_buf is None:
                    X_buf = np.empty((n_rows, len(FEATURES)))
                X, set_of, pos = feature_matrix(P, members, out=X_buf)
                s[r[set_of], slots[set_of, pos]] = model._predict_rows(X, tree_buf.reshape(-1, len(model.features_)))
        names = [job_of(p.name) for p in profiles]  # a copy's offsets are its job's
        shared, slot_job = size[:, None] > 1, np.where(present, idx, 0)  # a job alone stays at exactly 1
        if getattr(model, "job_log_offsets_", None):  # jobs the model was trained on take their own offsets
            s = np.where(shared, corrected(s, model.job_factors(names)[slot_job]), s)
        if self.offsets:
            s = np.where(shared, corrected(s, factors(self.offsets, names, self._prior_weight)[slot_job]), s)
        return s

    def rank_partners(self, job: JobProfile, candidates: Sequence[JobProfile], k: int | None = None) -> pd.DataFrame:
        """Candidates ranked by the predicted normalised throughput of the pair, best first: one row per
        partner with ``partner``, ``job_slowdown``, ``partner_slowdown``, ``delta``, ``throughput``, ``fits_memory``.
        A candidate that is the job's own profile is a second copy of the job, its ``partner`` named ``JOB#2``."""
        import pandas as pd

        check_rank_partners(self, job, candidates, k)
        profiles = [job, *candidates]
        n = len(candidates)
        idx = np.column_stack([np.zeros(n, dtype=np.int64), np.arange(1, n + 1)])
        s = self.slowdown_index(profiles, idx)
        t = np.array([p.iteration_ms for p in profiles])[idx]
        mem = np.array([np.nan if p.peak_memory_gib is None else p.peak_memory_gib for p in profiles])[idx]
        gpu_mem = max(p.gpu.memory_gib for p in profiles)
        partners = [instance_name(c.name, 2) if c.name == job.name else c.name for c in candidates]
        res = pd.DataFrame({"partner": partners, "job_slowdown": s[:, 0], "partner_slowdown": s[:, 1],
                            "delta": outcome.delta(t, t * s), "throughput": outcome.normalised_throughput(s),
                            "fits_memory": outcome.fits_memory(outcome.memory_need_gib(mem), gpu_mem)})
        res = res.sort_values("throughput", ascending=False, kind="stable").reset_index(drop=True)
        return res.head(k) if k else res

    def pack(self, jobs: Sequence[JobProfile], n_gpus: int | None = None, max_per_gpu: int = 3,
             max_slowdown: float | str | None = FAIR, gpus: Sequence[Gpu] | None = None, solver: str = "auto",
             min_throughput: float | None = DEFAULT_MIN_THROUGHPUT, weights: Mapping[str, float] | None = None,
             time_budget_s: float | None = None, progress: Callable[[str], None] | None = None) -> Placement:
        """Place ``jobs`` on ``n_gpus`` identical GPUs (or on ``gpus``: names, memory, jobs already running) to place
        as much job weight as the limits allow (by default: as many jobs) and then maximise total predicted
        (weighted) normalised throughput (:mod:`colopred.runtime.placement`). Limits: GPU memory, ``max_per_gpu``
        jobs per GPU, no job's predicted slowdown above ``max_slowdown`` (``"fair"``, the default: k for k jobs on a
        GPU, ``constants.FAIR_SLOWDOWN_PER_JOB``; a number; None: no bound), and every set of two or more predicted
        above ``min_throughput`` (default 1: it pays off; None: no floor). ``weights`` (job name -> weight > 0, default
        1) makes a job count that many times, in what is placed first and in the throughput. ``time_budget_s`` bounds
        the heuristic's search; ``progress(line)`` hears of each stage of a long run. Jobs that fit nowhere come back
        in ``Placement.queued`` with the reason. A job given n > 1 times is n copies, placed as distinct jobs named
        ``JOB#1`` .. ``JOB#n`` (a GPU's ``running`` names them so)."""
        if gpus is None:
            if n_gpus is None:
                raise ValueError("give n_gpus or gpus")
            check_pack(self, jobs, n_gpus, max_per_gpu, max_slowdown, min_throughput, time_budget_s)
            gpus = [Gpu(f"gpu{i}") for i in range(n_gpus)]
        else:
            if isinstance(gpus, (str, bytes, dict)) or not isinstance(gpus, Sequence):
                raise TypeError(f"gpus must be a sequence of Gpu, not {type(gpus).__name__}")
            if n_gpus is not None and n_gpus != len(gpus):
                raise ValueError(f"n_gpus={n_gpus} but {len(gpus)} GPUs given")
            if not gpus:
                raise ValueError("no GPU to place jobs on")
            check_pack(self, jobs, len(gpus), max_per_gpu, max_slowdown, min_throughput, time_budget_s)
        return place(self, as_instances(list(jobs)), gpus, max_per_gpu=max_per_gpu, max_slowdown=max_slowdown, solver=solver,
                     min_throughput=min_throughput, weights=weights, time_budget_s=time_budget_s, progress=progress)


def _row_names(names: np.ndarray, idx: np.ndarray, present: np.ndarray, n_jobs: np.ndarray, flat: np.ndarray) -> np.ndarray:
    """The ``job`` column of :meth:`Predictor.predict_index`: each row's profile name, set by set in slot order, copies
    of one job in a set (one name in several slots) named ``JOB#1``, ``JOB#2``, ... in slot order."""
    out = names[idx.ravel()[flat]]
    if idx.shape[1] < 2:
        return out
    import pandas as pd

    codes = pd.factorize(names)[0]  # one code per name: two equal profiles of one name are one job
    named = np.where(present, codes[np.where(present, idx, 0)], -1)
    ordered = np.sort(named, axis=1)
    copies = np.flatnonzero(((ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)).any(axis=1))
    if len(copies):
        start = np.r_[0, np.cumsum(n_jobs)[:-1]]
        for r in copies:
            out[start[r]: start[r] + n_jobs[r]] = instance_names(list(out[start[r]: start[r] + n_jobs[r]]))
    return out
