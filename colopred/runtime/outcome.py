"""What a collocation yields: δ, normalised throughput and whether the set fits in GPU memory.

The one definition of each, used by predictions (:class:`colopred.runtime.predictor.Prediction`,
``Predictor.predict_many``), by the measurement reader (measured δ and throughput of a window) and by the
evaluation. Every function takes per-job values along the last axis; a set of fewer jobs than the
array is wide is padded with NaN (``None`` in a list), which every function skips.

  slowdown        s_j = t'_j / t_j                  (collocated over solo iteration time)
  δ               Σ_j t_j / max_j t'_j              (Tabrizian 2020, eq. 4.1: > 1 when running the set
                                                      together beats running its jobs one after another)
  throughput      Σ_j t_j / t'_j = Σ_j 1 / s_j      (normalised: 1 per job running alone at full speed;
                                                      > 1 when sharing the GPU does more work than one job)
  memory need     Σ_j (peak_j + CONTEXT_OVERHEAD_GIB)  (a missing peak counts 0); fits if ≤ the GPU's memory
"""

from __future__ import annotations

from typing import Sequence, overload

import numpy as np

from ..constants import CONTEXT_OVERHEAD_GIB

OneSet = Sequence[float | None]
"""The per-job values of one set (a list or tuple): every function gives a number for it."""
ArrayLike = OneSet | np.ndarray


def _array(values: ArrayLike) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=float) if isinstance(values, (list, tuple)) \
        else np.asarray(values, dtype=float)


@overload
def delta(solo_ms: OneSet, collocated_ms: OneSet) -> float: ...
@overload
def delta(solo_ms: ArrayLike, collocated_ms: ArrayLike) -> np.ndarray | float: ...
def delta(solo_ms: ArrayLike, collocated_ms: ArrayLike) -> np.ndarray | float:
    """Tabrizian's δ (eq. 4.1): Σ_j t_j / max_j t'_j over the last axis."""
    t, c = _array(solo_ms), _array(collocated_ms)
    out = np.nansum(t, axis=-1) / np.nanmax(c, axis=-1)
    return float(out) if np.ndim(out) == 0 else out


@overload
def normalised_throughput(slowdown: OneSet) -> float: ...
@overload
def normalised_throughput(slowdown: ArrayLike) -> np.ndarray | float: ...
def normalised_throughput(slowdown: ArrayLike) -> np.ndarray | float:
    """Σ_j 1 / s_j over the last axis: 1 for a job alone, > 1 where the collocation pays."""
    out = np.nansum(1.0 / _array(slowdown), axis=-1)
    return float(out) if np.ndim(out) == 0 else out


@overload
def memory_need_gib(peak_memory_gib: OneSet, present: None = None) -> float: ...
@overload
def memory_need_gib(peak_memory_gib: ArrayLike, present: np.ndarray | None = None) -> np.ndarray | float: ...
def memory_need_gib(peak_memory_gib: ArrayLike, present: np.ndarray | None = None) -> np.ndarray | float:
    """GPU memory a set needs: Σ_j (peak_j + CONTEXT_OVERHEAD_GIB) over the last axis. A missing peak (None/NaN)
    counts 0 beside its context; ``present`` (bool, same shape) marks the jobs of a padded array."""
    m = _array(peak_memory_gib)
    if present is None:
        present = np.ones(m.shape, dtype=bool)
    out = np.where(present, np.nan_to_num(m) + CONTEXT_OVERHEAD_GIB, 0.0).sum(axis=-1)
    return float(out) if np.ndim(out) == 0 else out


@overload
def fits_memory(need_gib: float, gpu_memory_gib: float) -> bool: ...
@overload
def fits_memory(need_gib: np.ndarray | float, gpu_memory_gib: float) -> np.ndarray | bool: ...
def fits_memory(need_gib: np.ndarray | float, gpu_memory_gib: float) -> np.ndarray | bool:
    """Whether a set needing ``need_gib`` (:func:`memory_need_gib`) fits on a GPU of ``gpu_memory_gib``."""
    out = np.asarray(need_gib) <= gpu_memory_gib
    return bool(out) if np.ndim(out) == 0 else out
