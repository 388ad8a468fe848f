"""Time-slicing contention as a closed queueing network: the time-slicing baseline's contention load.

Each job of a set is one customer that cycles between the host (a delay station: Z_j = (1 − b_j) · t_j of its solo
iteration t_j, b_j = min(1, busy_j)) and the GPU (a processor-sharing station: D_j = b_j · t_j of kernel time).
Approximate mean value analysis (Schweitzer's approximation of the arrival theorem, one customer per class: a job
arriving at the GPU finds every other job's mean queue presence Q_m, its own none) gives the fixed point

  R_j = D_j · (1 + Σ_{m≠j} Q_m),   Q_m = R_m / (Z_m + R_m),

R_j the GPU residence of job j per iteration beside the others. Its slowdown is (Z_j + R_j) / t_j, so the load the
baseline scales is

  queue_load_j = (Z_j + R_j) / t_j − 1 = b_j · Σ_{m≠j} Q_m.

Each job's time scale cancels from its presence (divide its R and Z by t_j: Q_j = (1 + P_j) / ((1 − b_j)/b_j + 1 +
P_j), P_j = Σ_{m≠j} Q_m), so the load is a function of the members' busy fractions alone; the exact network is too
(scaling one class's times scales its residence and its throughput inversely). A pair's fixed point is the root of
a quadratic (:func:`_pair_presence`); a larger set's is found by Newton's method on one scalar equation in
S = Σ_m Q_m (:func:`co_runner_presence`).

Two saturating jobs give 1 each (equal turns), three give 2; a host-bound co-runner counts by its presence at the
GPU *under contention* (Q_m ≥ b_m: it is slowed too, and holds its turn longer), which the sum of solo busy
fractions, b_j · Σ_{m≠j} b_m, undercounts more the more jobs share the GPU. Source: Schweitzer, "Approximate
analysis of multiclass closed networks of queues" (1979); Lazowska et al., *Quantitative System Performance*
(1984), ch. 7. Chosen over the exact recursion (2^n subsets) and over a kernel-level time-slicing simulator on the
development rows of the locked split (``docs/model.md``).
"""

from __future__ import annotations

import math

import numpy as np

from ..constants import QUEUE_MAX_STEPS, QUEUE_STEP_TOLERANCE


def co_runner_presence(busy: np.ndarray) -> np.ndarray:
    """P_j = Σ_{m≠j} Q_m of each slot: ``busy`` is slots x sets (the first axis the members of each set); a slot
    with busy 0 (an empty slot) takes no GPU time and adds nothing.

    A set with at most two busy members takes the pair's closed form (:func:`_pair_presence`), whatever its number
    of slots. Otherwise, given the set's total presence S, each Q_j solves b_j·Q² − (1 + b_j·(1 + S))·Q +
    b_j·(1 + S) = 0 (substitute R_j = D_j·(1 + S − Q_j) into Q_j = R_j / (Z_j + R_j), divided by t_j); its smaller
    root is the presence, in [0, 1]. S is then the root of the scalar equation g(S) = Σ_j Q_j(S) − S = 0, g concave,
    found by Newton's method from the right of the root, where its steps fall to it monotonically, each set until
    its own step is below ``constants.QUEUE_STEP_TOLERANCE`` (:func:`_network_presence`). A set's numbers depend
    on nothing but its own busy fractions in slot order: not on its batch, its padding or the path taken
    (:func:`_set_presence`, the same arithmetic one set at a time, where numpy's per-call cost would dominate)."""
    return _co_runner_presence(_busy(busy))


def _co_runner_presence(b: np.ndarray) -> np.ndarray:
    k, n = b.shape
    if k <= 2:
        return _pair_or_less(b)
    if n <= SCALAR_MAX_SETS:
        return np.array([_set_presence(b[:, i].tolist()) for i in range(n)]).reshape(n, k).T
    P = _network_presence(b)
    few = np.flatnonzero((b > 0).sum(axis=0) <= 2)
    if few.size:  # padded pairs (sets of mixed sizes in one batch): the pair's closed form, on its busy slots
        sub = b[:, few]
        slots = np.argsort(sub <= 0, axis=0, kind="stable")[:2]  # the busy slots first, in slot order
        P[:, few] = 0.0
        P[slots, few] = _pair_or_less(sub[slots, np.arange(few.size)])
        P[:, few] *= sub > 0  # a set of one busy job: its empty slots get nothing either
    return P


SCALAR_MAX_SETS = 2
"""Batches of at most this many sets of three or more slots are solved one set at a time in Python floats
(:func:`_set_presence`): a single prediction's triple then costs ~15 µs instead of ~80 µs of numpy calls."""


def _busy(busy: np.ndarray) -> np.ndarray:
    """b = min(1, busy), 0 where missing."""
    return np.fmin(np.fmax(np.asarray(busy, dtype=np.float64), 0.0), 1.0)  # fmax takes 0 over NaN


def _pair_or_less(b: np.ndarray) -> np.ndarray:
    """P of sets of one or two slots (1 x n or 2 x n)."""
    if b.shape[0] < 2:
        return np.zeros_like(b)
    return np.stack([_pair_presence(b[1], b[0]), _pair_presence(b[0], b[1])])


def _pair_presence(b_m, b_j):
    """Q_m of job m beside job j alone (arrays or floats), the positive root of b_j·(1 + b_m)·Q² + (1 − b_m·b_j)·Q −
    b_m·(1 + b_j) = 0 (Q_m = f_m(Q_j), Q_j = f_j(Q_m) with f(x) = b·(1 + x) / (1 + b·x), composed), written
    2·b_m·(1 + b_j) / ((1 − b_m·b_j) + √disc) so that b_j = 0 gives b_m and b_m = 0 gives 0 without division by 0."""
    c = 1.0 - b_m * b_j
    num = 2.0 * b_m * (1.0 + b_j)
    return num / (c + np.sqrt(c * c + 2.0 * num * b_j * (1.0 + b_m)))


def _network_presence(b: np.ndarray) -> np.ndarray:
    """P of sets of three or more slots (k x n), by Newton's method on S per set (:func:`co_runner_presence`)."""
    n = b.shape[1]
    bb4 = 4.0 * b * b  # fixed over the steps
    # start right of the root: one step from S = Σ b (the presences at solo speed, left of the root) where g falls
    # there (the concave g's tangent then meets 0 right of the root), else the number of busy members (Q ≤ 1)
    S0 = _slot_sum(b)
    Q, dQ = _presence(b, bb4, 1.0 + S0)
    slope = _slot_sum(dQ) - 1.0
    falling = slope < 0
    S = np.where(falling, S0 - (_slot_sum(Q) - S0) / np.where(falling, slope, -1.0), (b > 0).sum(axis=0))
    todo = np.arange(n)
    Q_end = np.empty_like(b)
    for _ in range(QUEUE_MAX_STEPS):
        whole = todo.size == n
        bt, bb4t, St = (b, bb4, S) if whole else (b[:, todo], bb4[:, todo], S[todo])
        Q, dQ = _presence(bt, bb4t, 1.0 + St)
        step = (_slot_sum(Q) - St) / np.minimum(_slot_sum(dQ) - 1.0, -1e-12)
        St = St - step
        Q -= dQ * step  # Q at the new S, to first order (its error is of the order of the step squared)
        if whole:
            Q_end, S = Q, St
        else:  # the sets still iterating: their latest presences
            Q_end[:, todo], S[todo] = Q, St
        todo = todo[np.abs(step) > QUEUE_STEP_TOLERANCE * (1.0 + St)]
        if not todo.size:
            return _slot_sum(Q_end) - Q_end
    # QUEUE_MAX_STEPS reached: the presences at the last S
    Q_end[:, todo] = _presence(b[:, todo], bb4[:, todo], 1.0 + S[todo])[0]
    return _slot_sum(Q_end) - Q_end


def _presence(b: np.ndarray, bb4: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(Q, dQ/dS) of each slot given a = 1 + S: the smaller root of b·Q² − B·Q + b·a = 0 with B = 1 + b·a, written
    2·b·a / (B + √disc) so that b = 0 gives 0 without cancellation, and its derivative b·(1 − Q) / √disc
    (disc = B² − 4·b²·a > 0 unless b = 1 and S = 0)."""
    ba = b * a
    B = ba + 1.0
    root = np.sqrt(np.maximum(B * B - bb4 * a, 0.0))
    Q = 2.0 * ba / (B + root)
    dQ = (1.0 - Q) * b / np.maximum(root, 1e-300)
    return Q, dQ


def _set_presence(b: list[float]) -> list[float]:
    """:func:`_co_runner_presence` of one set of three or more slots, in Python floats: the same operations in the
    same order (IEEE arithmetic and a correctly rounded square root give the same bits), so that a set predicted
    alone and in a batch agree bit for bit."""
    busy = [x for x in b if x > 0]
    if len(busy) <= 2:  # the pair's closed form on the busy slots (an absent partner: busy 0), as the batch path
        x, y = (busy + [0.0, 0.0])[:2]
        it = iter((float(_pair_presence(y, x)), float(_pair_presence(x, y))))
        return [next(it) if v > 0 else 0.0 for v in b]
    bb4 = [4.0 * x * x for x in b]

    def presence(a: float) -> tuple[list[float], list[float]]:
        Q, dQ = [], []
        for x, y in zip(b, bb4):
            ba = x * a
            B = ba + 1.0
            root = math.sqrt(max(B * B - y * a, 0.0))
            q = 2.0 * ba / (B + root)
            Q.append(q)
            dQ.append((1.0 - q) * x / max(root, 1e-300))
        return Q, dQ

    S0 = _seq_sum(b)
    Q, dQ = presence(1.0 + S0)
    slope = _seq_sum(dQ) - 1.0
    S = S0 - (_seq_sum(Q) - S0) / slope if slope < 0 else float(len(busy))
    for _ in range(QUEUE_MAX_STEPS):
        Q, dQ = presence(1.0 + S)
        step = (_seq_sum(Q) - S) / min(_seq_sum(dQ) - 1.0, -1e-12)
        S = S - step
        Q = [q - d * step for q, d in zip(Q, dQ)]
        if abs(step) <= QUEUE_STEP_TOLERANCE * (1.0 + S):
            break
    else:
        Q, _ = presence(1.0 + S)
    total = _seq_sum(Q)
    return [total - q for q in Q]


def _seq_sum(values: list[float]) -> float:
    """Σ in slot order, as :func:`_slot_sum`."""
    total = values[0]
    for v in values[1:]:
        total += v
    return total


def _slot_sum(A: np.ndarray) -> np.ndarray:
    """Σ over the slots (first axis) in slot order, whatever the number of sets: numpy's own sum of a single set's
    column of 8 or more slots adds pairwise, in another order."""
    total = A[0].copy()
    for row in A[1:]:
        total += row
    return total


def queue_load(busy: np.ndarray) -> np.ndarray:
    """b_j · Σ_{m≠j} Q_m of each slot (slots x sets, as :func:`co_runner_presence`)."""
    b = _busy(busy)
    return b * _co_runner_presence(b)
