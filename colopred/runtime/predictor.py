"""The scheduler-facing API: ``Predictor`` (one model of one sharing mode) and its ``Prediction``.

  pred = Predictor.default("mps")            # the shipped H100 model, or Predictor.load("my-mps.json")
  p = pred.predict([a, b])                   # Prediction: slowdown, interval, delta, throughput, fits_memory
  pred.predict_many([[a, b], [a, b, c]])     # tidy DataFrame, one row per job of each set
  pred.rank_partners(a, candidates, k=3)     # best partners for a job
  pred.pack(jobs, n_gpus=4)                  # jobs placed on GPUs

δ, throughput and the memory rule come from :mod:`colopred.runtime.outcome`; the model from
:mod:`colopred.runtime.estimator`; its files from :mod:`colopred.runtime.manifest`.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..constants import MODES
from ..errors import InputError
from ..profile import JobProfile
from . import outcome
from .checks import check_pack, check_predict, check_predict_many, check_rank_partners
from .estimator import SlowdownModel
from .features import feature_matrix, profile_matrix
from .manifest import default_model_path, load_model, save_model


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
        return {
            "mode": self.mode,
            "jobs": [{"name": n, "slowdown": s, "interval": list(i), "solo_iteration_ms": t, "collocated_iteration_ms": t * s}
                     for n, s, i, t in zip(self.jobs, self.slowdown, self.interval, self.solo_iteration_ms)],
            "delta": self.delta,
            "throughput": self.throughput,
            "fits_memory": self.fits_memory,
            "memory_gib": self.memory_gib,
            "pays_off": self.pays_off,
        }

    def summary(self) -> str:
        lines = [f"mode {self.mode}: {len(self.jobs)} jobs"]
        for n, s, (lo, hi), t in zip(self.jobs, self.slowdown, self.interval, self.solo_iteration_ms):
            lines.append(f"  {n:<32} slowdown {s:5.2f}  [{lo:.2f}, {hi:.2f}]  {t:7.2f} ms -> {t * s:7.2f} ms")
        verdict = "pays off" if self.pays_off else ("does not fit in memory" if not self.fits_memory else "does not pay off")
        lines.append(f"  delta {self.delta:.2f}   normalised throughput {self.throughput:.2f}   ({verdict})")
        return "\n".join(lines)


PREDICT_MANY_COLUMNS = ("set_id", "job", "n_jobs", "slowdown", "solo_iteration_ms", "collocated_iteration_ms", "delta",
                        "throughput", "memory_gib", "fits_memory")


@dataclass
class Predictor:
    """Predicts slowdowns for sets of :class:`JobProfile` in one sharing mode."""

    model: SlowdownModel
    mode: str
    manifest: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ loading
    @classmethod
    def default(cls, mode: str = "mps") -> "Predictor":
        """The shipped H100 model of ``mode``."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r} (one of {', '.join(MODES)})")
        path = default_model_path(mode)
        if not path.exists():
            raise InputError(path, f"no shipped default model for mode {mode!r}")
        return cls.load(path)

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

    # --------------------------------------------------------------- predicting
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
        if self.mode != "mps":
            return
        for p in profiles:
            if p.source == "ncu" and p.mps_wait_us is None:
                warnings.warn(f"profile {p.name} has no mps_wait_us (made by an older colopred): its MPS wait counts as 0; "
                              "rebuild it from its ncu report (colopred profile ncu) for full accuracy", stacklevel=3)
                return

    def predict(self, profiles: Sequence[JobProfile]) -> Prediction:
        """Slowdown of each job when ``profiles`` run together."""
        profiles = check_predict(self, profiles)
        if len(profiles) < 2:
            raise ValueError("a collocation needs at least two jobs")
        self._check_gpu(profiles)
        self._check_wait(profiles)
        P = profile_matrix(list(profiles))
        X, _, pos = feature_matrix(P, np.arange(len(profiles))[None, :])
        s = np.empty(len(profiles))
        iv = np.empty((len(profiles), 2))
        s[pos], iv[pos] = self.model.predict_with_interval(X)
        need = outcome.memory_need_gib([p.peak_memory_gib for p in profiles])
        gpu_mem = max(p.gpu.memory_gib for p in profiles)
        return Prediction(self.mode, tuple(p.name for p in profiles), tuple(map(float, s)),
                          tuple((float(a), float(b)) for a, b in iv), tuple(p.iteration_ms for p in profiles),
                          fits_memory=outcome.fits_memory(need, gpu_mem), memory_gib=need)

    def predict_many(self, sets: Sequence[Sequence[JobProfile]]) -> pd.DataFrame:
        """Vectorised prediction of many sets: a tidy DataFrame with one row per job of each set, in the order
        given (columns ``PREDICT_MANY_COLUMNS``; ``delta``, ``throughput``, ``memory_gib`` and ``fits_memory``
        are the set's, repeated on each of its rows)."""
        sets = check_predict_many(self, sets)
        profiles: list[JobProfile] = []
        index: dict[int, int] = {}
        for s in sets:
            for p in s:
                if id(p) not in index:
                    index[id(p)] = len(profiles)
                    profiles.append(p)
        k = max(len(s) for s in sets)
        idx = np.full((len(sets), k), -1, dtype=np.int64)
        for i, s in enumerate(sets):
            idx[i, : len(s)] = [index[id(p)] for p in s]
        self._check_wait(profiles)
        return self._predict_index(profiles, idx)

    def _predict_index(self, profiles: list[JobProfile], idx: np.ndarray) -> pd.DataFrame:
        P = profile_matrix(profiles)
        # Identical sets (the same members in any order) are predicted once: sort each set's
        # members, predict the distinct sorted sets, and put the slowdowns back in order.
        order = np.argsort(idx, axis=1, kind="stable")
        key = np.take_along_axis(idx, order, axis=1)
        uniq, inv = np.unique(key, axis=0, return_inverse=True)
        X, set_of, pos = feature_matrix(P, uniq)
        s_uniq = np.full(uniq.shape, np.nan)
        s_uniq[set_of, pos] = self.model.predict(X)
        s = np.empty(idx.shape)
        np.put_along_axis(s, order, s_uniq[inv.reshape(-1)], axis=1)
        present = idx >= 0
        safe = np.where(present, idx, 0)
        t = np.where(present, np.array([p.iteration_ms for p in profiles])[safe], np.nan)
        mem = np.where(present, np.array([np.nan if p.peak_memory_gib is None else p.peak_memory_gib for p in profiles])[safe], np.nan)
        need = outcome.memory_need_gib(mem, present)
        gpu_mem = max(p.gpu.memory_gib for p in profiles)
        delta = outcome.delta(t, t * s)
        thr = outcome.normalised_throughput(s)
        fits = outcome.fits_memory(need, gpu_mem)
        set_id, slot = np.nonzero(present)
        return pd.DataFrame({
            "set_id": set_id,
            "job": [profiles[i].name for i in idx[set_id, slot]],
            "n_jobs": present.sum(1)[set_id],
            "slowdown": s[set_id, slot],
            "solo_iteration_ms": t[set_id, slot],
            "collocated_iteration_ms": (t * s)[set_id, slot],
            "delta": delta[set_id],
            "throughput": thr[set_id],
            "memory_gib": need[set_id],
            "fits_memory": fits[set_id],
        }, columns=list(PREDICT_MANY_COLUMNS))

    def rank_partners(self, job: JobProfile, candidates: Sequence[JobProfile], k: int | None = None) -> pd.DataFrame:
        """Candidates ranked by the predicted normalised throughput of the pair, best first: one row per
        partner with ``partner``, ``job_slowdown``, ``partner_slowdown``, ``delta``, ``throughput``, ``fits_memory``."""
        check_rank_partners(self, job, candidates, k)
        rows = self.predict_many([[job, c] for c in candidates])
        first = rows[rows.groupby("set_id").cumcount() == 0].set_index("set_id")
        second = rows[rows.groupby("set_id").cumcount() == 1].set_index("set_id")
        res = pd.DataFrame({"partner": second["job"], "job_slowdown": first["slowdown"], "partner_slowdown": second["slowdown"],
                            "delta": first["delta"], "throughput": first["throughput"], "fits_memory": first["fits_memory"]})
        res = res.sort_values("throughput", ascending=False, kind="stable").reset_index(drop=True)
        return res.head(k) if k else res

    def pack(self, jobs: Sequence[JobProfile], n_gpus: int, max_per_gpu: int = 3,
             max_slowdown: float | None = None) -> list[list[str]]:
        """Place ``jobs`` on ``n_gpus`` GPUs to maximise total predicted normalised throughput, within GPU
        memory, ``max_per_gpu`` jobs per GPU and ``max_slowdown`` per job (:func:`colopred.runtime.placement.pack`).
        Returns the job names on each GPU."""
        check_pack(self, jobs, n_gpus, max_per_gpu, max_slowdown)
        from .placement import pack

        return pack(self, jobs, n_gpus, max_per_gpu=max_per_gpu, max_slowdown=max_slowdown)
