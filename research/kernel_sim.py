"""A collocation simulator driven by each job's own kernel sequence (a research prototype; ``reports/h100/kernel_sim/``,
``docs/history.md``).

Each job is its solo ncu kernel sequence (order, duration, waves, DRAM share) plus the host time its iteration needs
beyond the kernels. Consecutive kernels are merged into at most ``segments`` *segments* per iteration (durations
summed, fill and DRAM share duration-weighted) so that a set costs a bounded number of events.

**Host model.** The job's CPU issues segment k of an iteration at ``start + k·g``; a segment runs once it is issued
and the segment before it is done; the iteration ends when its last segment is done (the loop synchronises once per
iteration). The cadence g is solved so that the simulated solo iteration time equals the measured one: a host-bound
job (busy 0.3) issues slowly and absorbs contention in its own idle time; a GPU-bound one (g = 0) does not. A job
whose kernel time exceeds its iteration time (kernels on several streams) has its segments scaled to fit, g = 0.

**MPS.** Segments of different jobs run at once. Each launch of job j waits Σ_k w_k behind the co-runners k
whose segments run (w_k their segment's ``mps_wait_us``), and the wait stalls j's CPU too. Segment k asks for a share fₖ = min(1, waves) of the SMs (time-
weighted); when Σf > 1 each runs at 1/Σf of its solo speed. DRAM: a segment moving dₖ of peak bandwidth at solo
speed spends a share dₖ of its time on memory; with D = Σ dₖ·rₖ > 1 that part slows by D:
rₖ = r_smₖ / ((1 − dₖ) + dₖ·max(1, D)).

**Time-slicing.** One context runs at a time, at full speed, for up to ``slice_us``; at the end of a slice, or when
the running job has nothing issued, the GPU switches to the next job (round-robin) with issued work, paying
``switch_us`` of idle GPU. With nothing issued anywhere the GPU idles; resuming a different job than the last one
run costs a switch.

A set of n jobs is the same loop as a pair. Each job's slowdown is its mean iteration time over the iterations it
completes while every job completes at least ``min_iterations`` (the first dropped as warm-up), over its solo time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

DEFAULT_SEGMENTS = 48
"""Segments per iteration: events per set stay bounded (a set of four simulates in well under a second)."""

SLICE_US = 1000.0
"""Time slice of the time-slicing simulator. Chosen with ``SWITCH_US`` over 1, 2 and 4 ms × 25, 50 and 100 µs by the
least mean development MAPE of the simulator × trees over its three splits (``research/sim_study.py``,
``reports/h100/kernel_sim/``)."""

SWITCH_US = 25.0
"""GPU idle per context switch of the time-slicing simulator; chosen with ``SLICE_US``."""

MPS_WAIT_SCALE = 1.0
"""Multiplier of the MPS launch waits (``JobProfile.mps_wait_us`` per segment). 0.3, 0.5 and 1 tried on the
development architectures: 1 the least bad (the MPS simulator is not yet a usable core: reports/h100/kernel_sim)."""


@dataclass(frozen=True)
class KernelTrace:
    """One job's solo kernel sequence for one iteration, as segments."""

    name: str
    work_us: np.ndarray  # solo run time of each segment
    fill: np.ndarray  # share of the SMs each segment's grids ask for, min(1, waves), time-weighted
    dram: np.ndarray  # share of peak DRAM bandwidth at solo speed, time-weighted
    iteration_us: float  # measured solo iteration time
    launches: np.ndarray | None = None  # kernel launches in each segment
    wait_us: np.ndarray | None = None  # MPS wait a launch of another process meets while the segment runs

    @property
    def kernel_us(self) -> float:
        return float(self.work_us.sum())

    def retimed(self, iteration_ms: float) -> "KernelTrace":
        return KernelTrace(self.name, self.work_us, self.fill, self.dram, iteration_ms * 1e3, self.launches,
                           self.wait_us)


def trace_from_kernels(name: str, duration_ns, waves, dram_pct, iteration_ms: float, iterations: int = 1,
                       segments: int = DEFAULT_SEGMENTS, occupancy_pct=None) -> KernelTrace:
    """A :class:`KernelTrace` from ncu's per-kernel columns (one or more profiled iterations, in launch order)."""
    t = np.asarray(duration_ns, float) / 1e3
    n = len(t) // max(1, iterations)
    t = np.nan_to_num(t[:n] if iterations > 1 else t)
    w = np.nan_to_num(np.minimum(1.0, np.asarray(waves, float)[: len(t)]), nan=1.0)
    d = np.clip(np.nan_to_num(np.asarray(dram_pct, float)[: len(t)]) / 100.0, 0.0, 1.0)
    # merge consecutive kernels into segments of about equal run time
    edges = np.searchsorted(np.cumsum(t), np.linspace(0, t.sum(), segments + 1)[1:-1], side="right")
    parts = np.split(np.arange(len(t)), edges)
    parts = [p for p in parts if len(p)]
    work = np.array([t[p].sum() for p in parts])
    safe = np.where(work > 0, work, 1.0)
    fill = np.array([(t[p] * w[p]).sum() for p in parts]) / safe
    dram = np.array([(t[p] * d[p]).sum() for p in parts]) / safe
    launches = np.array([len(p) for p in parts], float)
    wait = None
    if occupancy_pct is not None:  # JobProfile.mps_wait_us of each segment's kernels (docs/model.md)
        from colopred.measurement.profiling.ncu_profile import mps_wait_us

        wv = np.asarray(waves, float)[: len(t)]
        occ = np.asarray(occupancy_pct, float)[: len(t)]
        wait = np.array([mps_wait_us(t[p] * 1e3, wv[p], occ[p]) or 0.0 for p in parts])
    keep = work > 0
    return KernelTrace(name, work[keep], fill[keep], dram[keep], iteration_ms * 1e3, launches[keep],
                       None if wait is None else wait[keep])


def solo_iteration_us(work: np.ndarray, cadence_us: float) -> float:
    """Solo iteration time with issue times k·g: end_k = S_k + max_{i≤k}(i·g − S_{i−1}) (a max-plus recurrence)."""
    S = np.cumsum(work)
    prev = np.concatenate(([0.0], S[:-1]))
    return float(S[-1] + np.max(np.arange(len(work)) * cadence_us - prev))


def host_cadence(trace: KernelTrace) -> tuple[np.ndarray, float]:
    """(segment work, issue cadence g) reproducing the measured solo iteration time."""
    work, target = trace.work_us, trace.iteration_us
    if work.sum() >= target:
        return work * (target / work.sum()), 0.0
    lo, hi = 0.0, target / max(1, len(work) - 1)
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if solo_iteration_us(work, mid) < target else (lo, mid)
    g = (lo + hi) / 2
    # the last segment's gap after it (host work after the last kernel) is not in the recurrence
    return work, g


@dataclass
class _Job:
    work: np.ndarray
    fill: np.ndarray
    dram: np.ndarray
    g: float  # issue cadence
    per_us: np.ndarray  # launches per µs of work, per segment
    wait: np.ndarray  # MPS wait a co-runner's launch meets behind each segment
    k: int = 0  # current segment
    left: float = 0.0  # work left of the current segment
    iter_start: float = 0.0
    ends: list = field(default_factory=list)  # when each iteration ended

    def issued_at(self) -> float:
        return self.iter_start + self.k * self.g


def simulate(traces: list[KernelTrace], mode: str, *, slice_us: float = SLICE_US, switch_us: float = SWITCH_US,
             wait_scale: float = MPS_WAIT_SCALE, min_iterations: int = 3, max_events: int = 2_000_000) -> np.ndarray:
    """Simulated slowdown of each job of the set under ``mode`` (``timeslice`` or ``mps``)."""
    if mode not in ("timeslice", "mps"):
        raise ValueError(f"mode must be timeslice or mps, not {mode!r}")
    jobs = []
    for tr in traces:
        work, g = host_cadence(tr)
        per_us = np.zeros(len(work)) if tr.launches is None else tr.launches / work  # launches per µs of work
        wait = np.zeros(len(work)) if tr.wait_us is None else tr.wait_us * wait_scale
        jobs.append(_Job(work, tr.fill, tr.dram, g, per_us, wait, left=float(work[0])))
    solo = np.array([tr.iteration_us for tr in traces])
    prev_end = [0.0] * len(jobs)  # when each job's previous segment finished
    now = 0.0
    current, slice_left, last_run = None, slice_us, None

    def ready(j: _Job, i: int) -> float:
        return max(j.issued_at(), prev_end[i])

    def finish_segment(i: int) -> None:
        j = jobs[i]
        prev_end[i] = now
        j.k += 1
        if j.k == len(j.work):
            j.ends.append(now)
            j.k, j.iter_start = 0, now
        j.left = float(j.work[j.k])

    for _ in range(max_events):
        if all(len(j.ends) >= min_iterations for j in jobs):
            break
        if mode == "mps":
            active = [i for i, j in enumerate(jobs) if ready(j, i) <= now + 1e-9]
            if not active:
                now = min(ready(j, i) for i, j in enumerate(jobs))
                continue
            f = np.array([jobs[i].fill[jobs[i].k] for i in active])
            d = np.array([jobs[i].dram[jobs[i].k] for i in active])
            r_sm = np.full(len(active), 1.0 / max(1.0, f.sum()))
            D = float(np.sum(d * r_sm))
            rate = r_sm / ((1 - d) + d * max(1.0, D))
            # launch waits: each launch of j waits Σ_k w_k behind the co-runners' kernels in flight; the wait stalls
            # j's whole pipeline (its CPU issues nothing new meanwhile), so it shifts j's issue times too
            w = np.array([jobs[i].wait[jobs[i].k] for i in active])
            per = np.array([jobs[i].per_us[jobs[i].k] for i in active])
            stall = per * (w.sum() - w)  # µs of waiting per µs of work
            rate = rate / (1.0 + rate * stall)
            stalled = rate * stall  # share of wall time spent waiting
            dt_done = np.array([jobs[i].left for i in active]) / rate
            waiting = [ready(j, i) - now for i, j in enumerate(jobs) if i not in active]
            dt = min(dt_done.min(), min(waiting) if waiting else math.inf)
            now += dt
            for n_, i in enumerate(active):
                jobs[i].left -= rate[n_] * dt
                jobs[i].iter_start += stalled[n_] * dt
            for i in active:
                if jobs[i].left <= 1e-9 * max(1.0, jobs[i].work[jobs[i].k]):
                    finish_segment(i)
        else:
            if current is None or ready(jobs[current], current) > now + 1e-9 or slice_left <= 1e-9:
                # the next job with issued work, round-robin after the current one (itself last)
                start = 0 if current is None else current + 1
                cand = [(start + m) % len(jobs) for m in range(len(jobs))]
                nxt = next((i for i in cand if ready(jobs[i], i) <= now + 1e-9), None)
                if nxt is None:  # nothing issued anywhere: the GPU idles until the next issue
                    now = min(ready(j, i) for i, j in enumerate(jobs))
                    current = None
                    continue
                if last_run is not None and nxt != last_run:
                    now += switch_us
                current, slice_left = nxt, slice_us
            j = jobs[current]
            dt = min(j.left, slice_left)
            now += dt
            j.left -= dt
            slice_left -= dt
            last_run = current
            if j.left <= 1e-9 * max(1.0, j.work[j.k]):
                finish_segment(current)
    else:
        raise RuntimeError(f"simulation did not converge in {max_events} events")
    out = np.empty(len(jobs))
    for i, j in enumerate(jobs):
        e = np.asarray(j.ends)
        out[i] = (e[-1] - e[0]) / (len(e) - 1) / solo[i] if len(e) > 1 else e[0] / solo[i]
    return out
