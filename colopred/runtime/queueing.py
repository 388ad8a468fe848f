"""Time-slicing contention as a closed queueing network: the time-slicing baseline's contention load.

Each job of a set is one customer that cycles between the host (a delay station: Z_j = (1 − b_j) · t_j of its solo
iteration t_j, b_j = min(1, busy_j)) and the GPU (a processor-sharing station: D_j = b_j · t_j of kernel time).
Approximate mean value analysis (Schweitzer's approximation of the arrival theorem, one customer per class: a job
arriving at the GPU finds every other job's mean queue presence Q_m, its own none) gives the fixed point

  R_j = D_j · (1 + Σ_{m≠j} Q_m),   Q_m = R_m / (Z_m + R_m),

R_j the GPU residence of job j per iteration beside the others (solved per set as one scalar equation in
S = Σ_m Q_m: :func:`co_runner_presence`). Its slowdown is (Z_j + R_j) / t_j, so the load the
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
    set); a slot with busy 0 (an empty slot) takes no GPU time and adds nothing.

    Given the set's total presence S = Σ_m Q_m, each Q_j solves D_j·Q² − (Z_j + D_j·(2 + S))·Q + D_j·(1 + S) = 0
    (substitute R_j = D_j·(1 + S − Q_j) into Q_j = R_j / (Z_j + R_j)); its smaller root is the presence, in [0, 1].
    S is then the root of the scalar equation Σ_j Q_j(S) = S, found by Newton's method from S = Σ_j b_j (the
    presences at solo speed, below the root; Σ Q_j(S) − S is concave, so the steps rise to it without overshoot) in
    ``constants.QUEUE_ITERATIONS`` steps, a fixed count so that a set gives the same numbers in any batch."""
    return _co_runner_presence(_busy(busy), iteration_ms)


def _busy(busy: np.ndarray) -> np.ndarray:
    """b = min(1, busy), 0 where missing."""
    return np.clip(np.nan_to_num(np.asarray(busy, dtype=np.float64)), 0.0, 1.0)


def _co_runner_presence(b: np.ndarray, iteration_ms: np.ndarray) -> np.ndarray:
    t = np.asarray(iteration_ms, dtype=np.float64)
    t = np.where(np.isfinite(t) & (t > 0), t, 1.0)
    D = b * t
    ZD, DD4 = (1.0 - b) * t + D, 4.0 * D * D  # Z + D and 4·D², fixed over the steps
    S = b.sum(axis=0)
    for _ in range(QUEUE_ITERATIONS):
        Q, dQ = _presence(D, ZD, DD4, 1.0 + S)
        S = S - (Q.sum(axis=0) - S) / np.minimum(dQ.sum(axis=0) - 1.0, -1e-12)
    Q, _ = _presence(D, ZD, DD4, 1.0 + S)
    return Q.sum(axis=0) - Q


def _presence(D: np.ndarray, ZD: np.ndarray, DD4: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(Q, dQ/dS) of each slot given a = 1 + S: the smaller root of D·Q² − B·Q + D·a = 0 with B = Z + D·(1 + a),
    written 2·D·a / (B + √disc) so that D = 0 gives 0 without cancellation (B = Z > 0 then), and its derivative
    D·(1 − Q) / √disc (disc > 0 unless every job of the set is idle, S = 0)."""
    B = ZD + D * a
    root = np.sqrt(np.maximum(B * B - DD4 * a, 0.0))
    Q = 2.0 * D * a / (B + root)
    dQ = D * (1.0 - Q) / np.maximum(root, 1e-300)
    return Q, dQ


def queue_load(busy: np.ndarray, iteration_ms: np.ndarray) -> np.ndarray:
    """b_j · Σ_{m≠j} Q_m of each slot (slots x sets, as :func:`co_runner_presence`)."""
    b = _busy(busy)
    return b * _co_runner_presence(b, iteration_ms)
