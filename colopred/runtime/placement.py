"""Placing jobs on GPUs to maximise total predicted normalised throughput (``Predictor.pack``).

Value of a placement: Σ over GPUs of the predicted normalised throughput of its jobs
(:func:`colopred.runtime.outcome.normalised_throughput`; a job alone counts 1, an empty GPU 0). A GPU's set
is allowed if it fits in memory, holds at most ``max_per_gpu`` jobs and no job's predicted slowdown
exceeds ``max_slowdown``.

Strategy: a greedy start (one job per GPU, largest GPU time per iteration first, then each remaining job
where its predicted gain is largest), then local search: the best move of one job or swap of two jobs
between GPUs, taken while it raises the total by more than ``MIN_GAIN``, for at most
``MAX_LOCAL_SEARCH_ROUNDS`` rounds. Each distinct set is predicted once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from ..profile import JobProfile

if TYPE_CHECKING:  # pragma: no cover
    from .predictor import Predictor

MAX_LOCAL_SEARCH_ROUNDS = 100
"""Rounds of best-improvement local search; each round scans every move and swap (a bound on the time taken)."""

MIN_GAIN = 1e-9
"""A move or swap must raise the total predicted throughput by more than this (float noise never loops)."""


def pack(predictor: "Predictor", jobs: Sequence[JobProfile], n_gpus: int, max_per_gpu: int = 3,
         max_slowdown: float | None = None) -> list[list[str]]:
    """Names of the jobs on each of ``n_gpus`` GPUs (see module doc). A job that fits on no GPU under the
    limits raises ``ValueError``."""
    cache: dict[tuple[str, ...], float | None] = {}

    def value(g: list[JobProfile]) -> float | None:
        """Predicted throughput of one GPU's jobs, or None where the limits forbid them."""
        if len(g) <= 1:
            return float(len(g))
        if len(g) > max_per_gpu:
            return None
        key = tuple(sorted(p.name for p in g))
        if key not in cache:
            pred = predictor.predict(g)
            ok = pred.fits_memory and (max_slowdown is None or max(pred.slowdown) <= max_slowdown)
            cache[key] = pred.throughput if ok else None
        return cache[key]

    order = sorted(jobs, key=lambda p: -p.gpu_busy_ms)
    gpus: list[list[JobProfile]] = [[p] for p in order[:n_gpus]]
    gpus += [[] for _ in range(n_gpus - len(gpus))]
    for p in order[n_gpus:]:
        best, best_gain = None, float("-inf")
        for g in gpus:
            new, old = value(g + [p]), value(g)
            if new is not None and new - old > best_gain:
                best, best_gain = g, new - old
        if best is None:
            raise ValueError(f"job {p.name} fits on no GPU under the limits given")
        best.append(p)
    for _ in range(MAX_LOCAL_SEARCH_ROUNDS):
        best_step, best_gain = None, MIN_GAIN
        for i in range(n_gpus):
            for k in range(n_gpus):
                if i == k:
                    continue
                gi, gk = gpus[i], gpus[k]
                before = value(gi) + value(gk)
                for a in gi:
                    for b in [None, *gk]:
                        if b is not None and k < i:
                            continue  # each swap once
                        ni = [p for p in gi if p is not a] + ([b] if b is not None else [])
                        nk = [p for p in gk if p is not b] + [a]
                        vi, vk = value(ni), value(nk)
                        if vi is not None and vk is not None and vi + vk - before > best_gain:
                            best_step, best_gain = (i, k, ni, nk), vi + vk - before
        if best_step is None:
            break
        i, k, gpus[i], gpus[k] = best_step
    return [[p.name for p in g] for g in gpus]
