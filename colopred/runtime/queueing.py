"""Time-slicing contention as a closed queueing network: the time-slicing baseline's contention load.

Each job of a set is one customer that cycles between the host (a delay station: Z_j = (1 − b_j) · t_j of its solo
iteration t_j, b_j = min(1, busy_j)) and the GPU (a processor-sharing station: D_j = b_j · t_j of kernel time).
Approximate mean value analysis (Schweitzer's approximation of the arrival theorem, one customer per class: a job
arriving at the GPU finds every other job's mean queue presence Q_m, its own none) gives the fixed point

  R_j = D_j · (1 + Σ_{m≠j} Q_m),   Q_m = R_m / (Z_m + R_m),

R_j the GPU residence of job j per iteration beside the others. Its slowdown is (Z_j + R_j) / t_j, so the load the
baseline scales is

  queue_load_j = (Z_j + R_j) / t_j − 1 = b_j · Σ_{m≠j} Q_m.

Two saturating jobs give 1 each (equal turns), three give 2; a host-bound co-runner counts by its presence at the
GPU *under contention* (Q_m ≥ b_m: it is slowed too, and holds its turn longer), which the sum of solo busy
fractions, b_j · Σ_{m≠j} b_m, undercounts more the more jobs share the GPU. A set of n jobs is the same
computation as a pair. Source: Schweitzer, "Approximate analysis of multiclass closed networks of queues" (1979);
Lazowska et al., *Quantitative System Performance* (1984), ch. 7. Chosen over the exact recursion (2^n subsets) and
over a kernel-level time-slicing simulator on the development rows of the locked split (``docs/model.md``).
"""

from __future__ import annotations

import numpy as np

from ..constants import QUEUE_ITERATIONS


def co_runner_presence(busy: np.ndarray, iteration_ms: np.ndarray) -> np.ndarray:
    """Σ_{m≠j} Q_m of each slot: ``busy`` and ``iteration_ms`` are slots x sets (the first axis the members of each
    set); a slot with busy 0 (an empty slot) takes no GPU time and adds nothing. The fixed point is iterated at
    most ``constants.QUEUE_ITERATIONS`` times and stops early only once no value changes any more (then every
    further iteration would return the same values), so a set gives the same numbers in any batch."""
    b = np.clip(np.nan_to_num(np.asarray(busy, dtype=np.float64)), 0.0, 1.0)
    t = np.asarray(iteration_ms, dtype=np.float64)
    t = np.where(np.isfinite(t) & (t > 0), t, 1.0)
    D, Z = b * t, (1.0 - b) * t
    Z = np.where(D + Z > 0, Z, 1.0)  # never 0/0
    R = D.copy()
    Q = _presence(R, Z)
    for _ in range(QUEUE_ITERATIONS):
        R_new = D * (1.0 + (Q.sum(axis=0) - Q))
        if np.array_equal(R_new, R):
            break
        R = R_new
        Q = _presence(R, Z)
    return Q.sum(axis=0) - Q


def _presence(R: np.ndarray, Z: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(R > 0, R / (Z + R), 0.0)


def queue_load(busy: np.ndarray, iteration_ms: np.ndarray) -> np.ndarray:
    """b_j · Σ_{m≠j} Q_m of each slot (slots x sets, as :func:`co_runner_presence`)."""
    b = np.clip(np.nan_to_num(np.asarray(busy, dtype=np.float64)), 0.0, 1.0)
    return b * co_runner_presence(busy, iteration_ms)
