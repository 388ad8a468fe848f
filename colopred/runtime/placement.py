"""The placement engine: jobs onto GPUs, maximising total predicted normalised throughput (``Predictor.pack``).

Objective, lexicographic: place as much job weight as the limits allow (every job weighs 1 unless ``weights`` says
otherwise, so by default: as many jobs as possible, a heavier job before lighter ones), then maximise Σ over GPUs of
the set's predicted weighted throughput Σ_j w_j / s_j (unweighted: the normalised throughput of
:func:`colopred.runtime.outcome.normalised_throughput`; a job alone counts w_j). A set is allowed on a GPU if it fits
in the GPU's free memory, holds at most ``max_per_gpu`` jobs (those already running there included), no job's
predicted slowdown exceeds the slowdown bound, and, for two jobs or more, its predicted normalised throughput exceeds
``min_throughput``. The slowdown bound is ``max_slowdown``: a number, ``"fair"`` (the default: k ×
``constants.FAIR_SLOWDOWN_PER_JOB`` for a set of k jobs, the fair share of time-slicing) or None (no bound);
``min_throughput`` defaults to ``constants.DEFAULT_MIN_THROUGHPUT`` (1: every set pays off; None: no floor).

Jobs that no allowed set can take come back queued, each with its reason: the limits that keep it off each GPU beside
the jobs placed there (only those that bind). A GPU whose running jobs already break a limit is not an error: it keeps
them, takes no new job, and a ``UserWarning`` names the GPU and the limit (``colopred pack`` prints it as a
``colopred: warning:`` line).

Two strategies, both scoring candidate sets in batches through ``Scorer`` (``Predictor.slowdown_index``):

``exact``      every allowed set of at most ``max_per_gpu`` jobs is scored and a set-packing integer program
               (HiGHS through ``scipy.optimize.milp``) picks the optimum; identical empty GPUs are one class.
               Used up to ``EXACT_MAX_JOBS`` jobs.
``heuristic``  jobs are paired by a greedy matching on the predicted pair throughput, then further jobs are added to
               the groups one layer at a time on the predicted gain, then a local search tries moves, swaps and
               ejection chains between groups, scored in batches, and queued jobs fill any GPU that can take them.
               Up to ``DENSE_MAX_JOBS`` jobs every pair is scored (an optimal assignment per layer, restarts up to
               ``RESTARTS_MAX_JOBS``). Beyond, the cost grows near-linearly: jobs are clustered on their profile
               features (near-identical jobs, re-timed runs and a sweep's copies, fall together), one representative
               pair per two clusters is predicted, and each job's candidate partners are drawn from the clusters whose
               representatives pair best (plus a few at random): ``SHORTLIST_PARTNERS`` predicted pairs per job, not
               all n²/2. Layers, moves and swaps then only try groups holding a job's shortlisted partners.
               ``time_budget_s`` stops the local search (the result stays valid: every limit holds).

``tests/test_placement_engine.py`` and ``scripts/bench_pack.py`` measure the heuristic against ``exact`` on small
instances and against the all-pairs engine on large ones.
"""

from __future__ import annotations

import itertools
import math
import numbers
import time
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from ..constants import DEFAULT_MIN_THROUGHPUT, FAIR_SLOWDOWN_PER_JOB, MAX_GPU_MEMORY_GIB, PACK_PROGRESS_AFTER_S
from ..profile import JobProfile, name_problem
from . import outcome
from .features import padded, profile_matrix

FAIR = "fair"
"""``max_slowdown="fair"``: the default slowdown bound, k × ``FAIR_SLOWDOWN_PER_JOB`` for a set of k jobs."""

EXACT_MAX_JOBS = 16
"""Largest number of jobs to place for which the exact solver is used by default: with three jobs per GPU its
integer program has at most C(16,1) + C(16,2) + C(16,3) = 696 candidate sets per GPU class."""

LOCAL_SEARCH_ROUNDS = 8
"""Rounds of batch local search in the heuristic (each scores its moves, swaps and ejection chains in one batch and
applies the improving ones that touch different groups). On 1,000 jobs on 500 GPUs the predicted total was 702.3 after
the construction, 746.7 after 4 rounds, 748.9 after 8 and 750.0 after 16 (all-pairs engine)."""

SWAPS_PER_ROUND = 20_000
"""Moves and swaps scored per local-search round: all of them when there are fewer, else a sample of this many (or
of ``SWAPS_PER_JOB`` per job where that is more): a bound on the time a round takes."""

SWAPS_PER_JOB = 3
"""Targeted moves and swaps per job and round on large instances (partners from the shortlist)."""

RANDOM_SWAPS_PER_JOB = 1
"""Swaps of two jobs drawn at random per job and round on large instances, beside the targeted ones."""

LOCAL_SEARCH_STOP_SHARE = 0.001
"""On large instances the local search stops once a round raises the predicted throughput by less than this share
(0.1%) and places less than this share of the job weight: on 10,000 jobs on 5,000 GPUs rounds 7 to 12 gained 0.3% in
all, for half the time."""

CHAINS_PER_QUEUED = 64
"""Ejection chains drawn at random per queued job and round on large instances, beside the targeted ones."""

SPARSE_ROUNDS = 10
"""Most rounds of local search on large instances (fewer where ``LOCAL_SEARCH_STOP_SHARE`` stops it): on 10,000 jobs on
3,400 GPUs of 3, rounds 11 and 12 added 0.4% to the predicted throughput for a fifth of the time."""

HEURISTIC_RESTARTS = 8
RESTARTS_MAX_JOBS = 200
"""Up to this many jobs to place, the heuristic runs from ``HEURISTIC_RESTARTS`` pairings (scarcest jobs first, ties
broken at random) and keeps the best; tight limits (``max_slowdown``) otherwise leave it a job short of the optimum
on some small instances (``scripts/bench_pack.py``)."""

DENSE_MAX_JOBS = 300
"""Up to this many jobs, the heuristic scores every pair (45,000 pairs: well under a second); beyond, candidate
partners come from the shortlist."""

SHORTLIST_CLUSTERS = 96
"""Clusters of profile features on large instances (k-means on standardised ``features.BASE``): the shipped profiles
are 73 jobs, and a cluster's representatives stand for jobs whose features differ by re-timing alone."""

SHORTLIST_CLUSTER_CHOICES = 8
SHORTLIST_PER_CLUSTER = 2
SHORTLIST_RANDOM = 16
SHORTLIST_PARTNERS = SHORTLIST_CLUSTER_CHOICES * SHORTLIST_PER_CLUSTER + SHORTLIST_RANDOM
"""Candidate partners predicted per job on large instances: 2 jobs from each of the 8 clusters whose representatives
pair best with the job's, and 16 at random (on 1,000 jobs on 500 GPUs, 3 and 8 left the total 1.2% below the all-pairs
engine's, 3 and 24 0.2%; with ``RANDOM_SWAPS_PER_JOB`` 2 and 16: 0.1%) (a job no shortlisted partner can take gets a second, random draw)."""

PARTNERS_KEPT = 32
"""Best allowed partners kept per job on large instances: the groups holding them are those layers, moves and swaps
try for the job."""

LAYER_RANDOM_GROUPS = 8
"""Groups with room tried at random per job and layer on large instances, beside those holding its partners."""

LAYER_PARTNERS = 16
"""Best partners whose groups a layer tries per job on large instances."""

DENSE_LAYER_SETS = 20_000
"""A layer scores every (job, group) set up to this many; beyond, the shortlist's (the groups holding a job's partners
and ``LAYER_RANDOM_GROUPS`` at random)."""

LAYER_ASSIGNMENT_CELLS = 30_000_000
"""A layer assigns jobs to groups by an optimal assignment (``linear_sum_assignment``, 0.2 s for 3,200 jobs x 3,400
groups) up to this many cells of its job x GPU matrix (240 MB), beyond by a greedy one."""

MIN_GAIN = 1e-9
"""A move or swap must raise the total predicted throughput by more than this (float noise never loops)."""


class Scorer(Protocol):
    """What the engine needs of a predictor: per-slot slowdowns of sets given as index arrays."""

    def slowdown_index(self, profiles: Sequence[JobProfile], idx: np.ndarray) -> np.ndarray: ...


def _checked_name(what: str, v: Any) -> str:
    why = name_problem(v)
    if why is not None:
        raise (TypeError if not isinstance(v, str) else ValueError)(f"{what} {why}")
    return v


@dataclass(frozen=True)
class Gpu:
    """A GPU to place jobs on: its name, the memory its colopred jobs may use, running ones included (None: the
    jobs' GPU memory), and the jobs already running there (pinned: they stay, and count towards ``max_per_gpu``,
    memory and the slowdown bound; where they already break one, the GPU takes no new job and a warning says so).
    Checked when made: a name of one line (at most 200 characters), ``memory_gib`` None or a number of GiB above 0,
    ``running`` a sequence of distinct job names (a list is kept as a tuple; one name alone is refused, not split)."""

    name: str
    memory_gib: float | None = None
    running: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _checked_name("Gpu name", self.name)
        label = f"Gpu {self.name}"
        m = self.memory_gib
        if m is not None:
            if isinstance(m, bool) or not isinstance(m, numbers.Real):
                raise TypeError(f"{label}: memory_gib must be a number of GiB or None, not {type(m).__name__} {m!r}")
            if not (math.isfinite(m) and 0 < m <= MAX_GPU_MEMORY_GIB):
                raise ValueError(f"{label}: memory_gib must be more than 0 and at most {MAX_GPU_MEMORY_GIB:g} GiB, not {m!r}")
            object.__setattr__(self, "memory_gib", float(m))
        r = self.running
        if isinstance(r, (str, bytes)):
            raise TypeError(f"{label}: running must be a sequence of job names, not one string (running=({r!r},) for one job)")
        if isinstance(r, Mapping) or not isinstance(r, Iterable):
            raise TypeError(f"{label}: running must be a sequence of job names, not {type(r).__name__}")
        names = tuple(r)
        for i, n in enumerate(names):
            _checked_name(f"{label}: running[{i}]", n)
        if len(set(names)) < len(names):
            dup = next(n for i, n in enumerate(names) if n in names[:i])
            raise ValueError(f"{label}: running names job {dup!r} twice")
        object.__setattr__(self, "running", names)


@dataclass(frozen=True)
class Placement:
    """Where each job goes. ``gpus`` lists the job names on each GPU (running ones first), ``queued`` the jobs
    left waiting with the reason, ``throughput`` the predicted total normalised throughput, ``solver`` the
    strategy that found it and ``optimal`` whether it is proven optimal under the model. ``gpu_memory_gib``: each
    GPU's ``memory_gib`` as given (for :meth:`running_gpus`)."""

    gpu_names: tuple[str, ...]
    gpus: tuple[tuple[str, ...], ...]
    gpu_throughput: tuple[float, ...]
    queued: dict[str, str] = field(default_factory=dict)
    solver: str = "exact"
    optimal: bool = True
    gpu_memory_gib: tuple[float | None, ...] = ()

    @property
    def throughput(self) -> float:
        return float(sum(self.gpu_throughput))

    @property
    def placed(self) -> int:
        return sum(len(g) for g in self.gpus)

    def running_gpus(self, departed: Iterable[str] = ()) -> list[Gpu]:
        """The GPUs with the jobs placed on them running, less ``departed``: the ``gpus`` of the next round, which
        places arrivals beside the running jobs (``pack(arrivals + running jobs, gpus=placement.running_gpus(gone))``)."""
        gone = set(departed)
        memory = self.gpu_memory_gib or (None,) * len(self.gpu_names)
        return [Gpu(n, m, tuple(j for j in g if j not in gone)) for n, m, g in zip(self.gpu_names, memory, self.gpus)]

    def to_dict(self) -> dict:
        return {"gpus": [{"name": n, "jobs": list(g), "throughput": t} for n, g, t in zip(self.gpu_names, self.gpus, self.gpu_throughput)],
                "queued": [{"job": j, "reason": r} for j, r in self.queued.items()], "throughput": self.throughput,
                "placed": self.placed, "solver": self.solver, "optimal": self.optimal}


KINDS = ("full", "memory", "slowdown", "throughput", "unpredictable", "allowed")
"""Why a queued job does not join a GPU's set, in the order a reason names them."""
OK, FULL, MEMORY, SLOWDOWN, THROUGHPUT, UNPREDICTABLE = 0, 1, 2, 3, 4, 5
_KIND_NAME = {FULL: "full", MEMORY: "memory", SLOWDOWN: "slowdown", THROUGHPUT: "throughput",
              UNPREDICTABLE: "unpredictable", OK: "allowed"}


class _Problem:
    """Jobs, GPUs and limits, with every set value asked of the scorer cached by (GPU memory, members)."""

    def __init__(self, scorer: Scorer, jobs: Sequence[JobProfile], gpus: Sequence[Gpu], max_per_gpu: int,
                 max_slowdown: float | str | None, min_throughput: float | None = None,
                 weights: np.ndarray | None = None, deadline: float = math.inf,
                 progress: Callable[[str], None] | None = None):
        self.started = time.perf_counter()
        self.scorer = scorer
        self.jobs = list(jobs)
        self.index = {p.name: i for i, p in enumerate(self.jobs)}
        self.gpus = list(gpus)
        self.max_per_gpu = max_per_gpu
        self.max_slowdown = max_slowdown
        self.min_throughput = min_throughput
        self.w = np.ones(len(self.jobs)) if weights is None else np.asarray(weights, dtype=float)
        self.deadline = deadline
        self.progress = progress
        self.default_memory = max(p.gpu.memory_gib for p in self.jobs) if self.jobs else 0.0
        self.peak = np.array([p.peak_memory_gib if p.peak_memory_gib is not None else np.nan for p in self.jobs])
        self.running = [tuple(self.index[n] for n in g.running) for g in self.gpus]
        pinned = {i for r in self.running for i in r}
        self.free = [i for i in range(len(self.jobs)) if i not in pinned]
        self.memory = np.array([g.memory_gib if g.memory_gib is not None else self.default_memory for g in self.gpus])
        self.cache: dict[tuple[float, tuple[int, ...]], float] = {}
        self.info: dict[tuple[float, tuple[int, ...]], tuple[float, float, int]] = {}  # throughput, worst slowdown, kind
        # a placed unit of weight outweighs any difference in throughput
        self.weight = 2.0 * (float(self.w.sum()) + 1) / (float(self.w.min()) if len(self.w) else 1.0)
        self.closed = self._closed()
        self.open = [g for g in range(len(self.gpus)) if g not in self.closed]

    # ------------------------------------------------------------------ limits in words
    def bound_text(self) -> str:
        if self.max_slowdown == FAIR:
            k = "k" if FAIR_SLOWDOWN_PER_JOB == 1 else f"{FAIR_SLOWDOWN_PER_JOB:g}k"
            return f'max_slowdown "fair" ({k} for k jobs on a GPU)'
        return f"max_slowdown {self.max_slowdown:g}"

    def report(self, stage: str) -> None:
        elapsed = time.perf_counter() - self.started
        if self.progress is not None and elapsed >= _progress_after():
            self.progress(f"{stage} ({elapsed:.1f} s)")

    def out_of_time(self) -> bool:
        return time.perf_counter() > self.deadline

    def _closed(self) -> dict[int, str]:
        """The GPUs whose running jobs already break a limit, each with the warning that says which: they keep
        their running jobs and take no new job."""
        pinned = [g for g, r in enumerate(self.running) if r]
        if not pinned:
            return {}
        values = self.values([self.running[g] for g in pinned], np.array(pinned, dtype=np.int64))
        out = {}
        for g, v in zip(pinned, values):
            if np.isfinite(v):
                continue
            run = self.running[g]
            thr, worst, kind = self.info[self._key(run, g)]
            need = outcome.memory_need_gib(self.peak[list(run)])
            if kind == FULL:
                why = f"its {len(run)} running jobs already exceed max_per_gpu {self.max_per_gpu}"
            elif kind == MEMORY:
                why = (f"its running jobs need {need:.1f} GiB, more than its "
                       f"{'memory_gib' if self.gpus[g].memory_gib is not None else 'memory'} ({self.memory[g]:.1f} GiB)")
            elif kind == UNPREDICTABLE:
                why = "the model cannot predict its running jobs together"
            elif kind == SLOWDOWN:
                why = f"its running jobs are predicted to slow down to {worst:.2f}, above {self.bound_text()}"
            else:
                why = f"its running jobs are predicted at throughput {thr:.2f}, not above min_throughput {self.min_throughput:g}"
            out[g] = f"GPU {self.gpus[g].name}: {why}; it keeps them and takes no new job"
        return out

    def _slowdowns(self, groups: list[tuple[int, ...]]) -> list[np.ndarray]:
        """The predicted slowdown of each member of each group (1 for a job alone), limits aside."""
        out: list[np.ndarray] = [np.ones(len(g)) for g in groups]
        multi = [k for k, g in enumerate(groups) if len(g) >= 2]
        if multi:
            sizes = np.array([len(groups[k]) for k in multi], dtype=np.int64)
            flat = np.fromiter((j for k in multi for j in groups[k]), dtype=np.int64, count=int(sizes.sum()))
            s = self.scorer.slowdown_index(self.jobs, padded(flat, sizes, width=int(sizes.max())))
            for row, k in enumerate(multi):
                out[k] = s[row, : len(groups[k])]
        return out

    def objective(self, groups: Sequence[Sequence[int]]) -> float:
        """The lexicographic value of a placement over the GPUs that can take jobs: ``weight`` per unit of job weight
        placed plus the predicted weighted throughput (-inf where a set breaks a limit)."""
        g = np.array(self.open, dtype=np.int64)
        values = self.values([tuple(groups[k]) for k in self.open], g)
        return float(np.sum(values + self.weight * np.array([self.w[list(groups[k])].sum() for k in self.open])))

    def _key(self, members: Sequence[int], gpu: int) -> tuple[float, tuple[int, ...]]:
        return float(self.memory[gpu]), tuple(sorted(members))

    def values(self, groups: list[tuple[int, ...]], gpu: np.ndarray) -> np.ndarray:
        """Predicted weighted throughput of each group (job indices) on GPU ``gpu[i]``, -inf where a limit forbids it.
        Each distinct (GPU memory, members) is scored once per placement."""
        memory = self.memory[gpu].tolist()
        keys = [(m, tuple(sorted(g))) for m, g in zip(memory, groups)]
        cache = self.cache
        get = cache.get
        out = [get(k) for k in keys]
        miss = [i for i, v in enumerate(out) if v is None]
        if miss:
            todo = list(dict.fromkeys([keys[i] for i in miss]))
            mem = np.array([k[0] for k in todo])
            value, thr, worst, kind = self._score([k[1] for k in todo], mem)
            info = self.info
            for k, v, t, s, c in zip(todo, value.tolist(), thr.tolist(), worst.tolist(), kind.tolist()):
                cache[k] = v
                info[k] = (t, s, c)
            for i in miss:
                out[i] = cache[keys[i]]
        return np.array(out, dtype=float)

    def score(self, pairs: np.ndarray, gpu: int) -> np.ndarray:
        """:meth:`values` of many pairs (n x 2 job indices) on GPU ``gpu``, without the cache (a shortlist's pairs are
        asked once)."""
        if not len(pairs):
            return np.zeros(0)
        return self._score(list(map(tuple, pairs.tolist())), np.full(len(pairs), self.memory[gpu]))[0]

    def _score(self, groups: list[tuple[int, ...]], memory: np.ndarray) -> tuple[np.ndarray, ...]:
        n = len(groups)
        value = np.full(n, -np.inf)
        thr = np.zeros(n)
        worst = np.ones(n)
        sizes = np.fromiter(map(len, groups), dtype=np.int64, count=n)
        flat = np.fromiter((j for g in groups for j in g), dtype=np.int64, count=int(sizes.sum()))
        idx = padded(flat, sizes, width=max(int(sizes.max(initial=0)), 1))
        present = idx >= 0
        safe = np.where(present, idx, 0)
        need = outcome.memory_need_gib(np.where(present, self.peak[safe], np.nan), present)
        kind = np.full(n, OK, dtype=np.int64)
        kind[sizes > self.max_per_gpu] = FULL
        kind[(kind == OK) & (need > memory)] = MEMORY
        single = (kind == OK) & (sizes <= 1)
        value[single] = np.where(sizes[single] == 1, self.w[safe[single, 0]], 0.0)
        thr[single] = sizes[single]
        multi = np.flatnonzero((kind == OK) & (sizes >= 2))
        if len(multi):
            s = self.scorer.slowdown_index(self.jobs, idx[multi])
            here = present[multi]
            inv = np.where(here, 1.0 / np.where(here, s, 1.0), 0.0)
            unpredictable = np.isnan(inv).any(axis=1)
            inv = np.nan_to_num(inv)
            t = inv.sum(axis=1)
            v = (inv * np.where(here, self.w[safe[multi]], 0.0)).sum(axis=1)
            top = np.max(np.where(here & ~np.isnan(s), s, -np.inf), axis=1)
            k = np.full(len(multi), OK, dtype=np.int64)
            if self.max_slowdown == FAIR:
                bound = FAIR_SLOWDOWN_PER_JOB * sizes[multi]
            elif self.max_slowdown is None:
                bound = np.full(len(multi), np.inf)
            else:
                bound = np.full(len(multi), float(self.max_slowdown))
            if self.min_throughput is not None:
                k[t <= self.min_throughput] = THROUGHPUT
            k[top > bound] = SLOWDOWN
            k[unpredictable] = UNPREDICTABLE
            value[multi] = np.where(k == OK, v, -np.inf)
            thr[multi], worst[multi], kind[multi] = t, top, k
        return value, thr, worst, kind

    def result(self, groups: list[tuple[int, ...]], solver: str, optimal: bool) -> Placement:
        self.values(groups, np.arange(len(groups)))
        thr = np.array([self.info[self._key(g, k)][0] for k, g in enumerate(groups)])
        for g in self.closed:  # its running jobs as they run, limits aside
            thr[g] = float(outcome.normalised_throughput(self._slowdowns([groups[g]])[0]))
        placed = {i for g in groups for i in g}
        self.report("reasons of the queued jobs")
        queued = self.queue_reasons(groups, [i for i in self.free if i not in placed])
        return Placement(tuple(g.name for g in self.gpus), tuple(tuple(self.jobs[i].name for i in g) for g in groups),
                         tuple(float(v) for v in thr), {self.jobs[i].name: r for i, r in queued.items()}, solver, optimal,
                         tuple(g.memory_gib for g in self.gpus))

    def queue_reasons(self, groups: list[tuple[int, ...]], queued: list[int]) -> dict[int, str]:
        """Why each queued job joins no GPU beside the jobs placed there: per GPU the first limit it would break
        (``max_per_gpu``, then memory, then the slowdown bound, then ``min_throughput``), summed up over the GPUs;
        only limits that bind."""
        if not queued:
            return {}
        need_job = np.asarray(outcome.memory_need_gib(self.peak[queued][:, None]))
        used = np.array([outcome.memory_need_gib(self.peak[list(g)]) if g else 0.0 for g in groups])
        full = np.array([len(g) >= self.max_per_gpu for g in groups])
        short = used[None, :] + need_job[:, None] > self.memory[None, :]  # queued job x GPU
        kind = np.where(full[None, :], FULL, np.where(short, MEMORY, -1))
        worst = np.full(kind.shape, np.inf)
        best_thr = np.full(kind.shape, -np.inf)
        rr, gg = np.nonzero(kind < 0)
        if len(rr):
            sets = [groups[g] + (queued[r],) for r, g in zip(rr.tolist(), gg.tolist())]
            self.values(sets, gg)
            info = [self.info[self._key(s, g)] for s, g in zip(sets, gg.tolist())]
            kind[rr, gg] = [c for _, _, c in info]
            worst[rr, gg] = [s for _, s, _ in info]
            best_thr[rr, gg] = [t for t, _, _ in info]
        out = {}
        names = [g.name for g in self.gpus]
        for r, i in enumerate(queued):
            row = kind[r]
            present = set(np.unique(row).tolist())
            need = float(need_job[r])
            mem = row == MEMORY
            free = max(float(np.max(self.memory[mem] - used[mem])), 0.0) if mem.any() else 0.0
            if need > self.memory.max():
                out[i] = f"needs {need:.1f} GiB, more than any GPU has ({self.memory.max():.1f} GiB at most)"
                continue
            if present == {FULL}:
                out[i] = f"no room: every GPU is at max_per_gpu ({self.max_per_gpu} jobs)"
                continue
            if present == {MEMORY}:
                out[i] = f"fits in no GPU's free memory beside the jobs placed there (needs {need:.1f} GiB, at most {free:.1f} GiB free)"
                continue
            if present == {SLOWDOWN}:
                out[i] = (f"any placement would break {self.bound_text()} (beside the jobs placed on each GPU, "
                          f"a predicted slowdown of {float(worst[r].min()):.2f} at best)")
                continue
            if present == {THROUGHPUT}:
                out[i] = (f"no placement pays off: beside the jobs placed on each GPU the set's predicted throughput is "
                          f"{float(best_thr[r].max()):.2f} at best, not above min_throughput {self.min_throughput:g}")
                continue
            parts = []
            for k in sorted(present, key=lambda c: KINDS.index(_KIND_NAME[c])):
                gs = np.flatnonzero(row == k)
                who = ", ".join(names[g] for g in gs) if len(gs) <= 3 else f"{len(gs)} GPUs"
                if k == FULL:
                    parts.append(f"{who} at max_per_gpu ({self.max_per_gpu} jobs)")
                elif k == MEMORY:
                    parts.append(f"{who} short of memory (needs {need:.1f} GiB, at most {free:.1f} GiB free)")
                elif k == SLOWDOWN:
                    parts.append(f"{who} over {self.bound_text()} with it (predicted slowdown {float(worst[r, gs].min()):.2f} at best)")
                elif k == THROUGHPUT:
                    parts.append(f"{who} not above min_throughput {self.min_throughput:g} with it (predicted throughput "
                                 f"{float(best_thr[r, gs].max()):.2f} at best)")
                elif k == UNPREDICTABLE:
                    parts.append(f"{who} with jobs the model cannot predict it beside")
                else:  # pragma: no cover - the solvers leave no job queued beside a GPU that can take it
                    parts.append(f"{who} could take it, but the solver left it queued")
            out[i] = "no GPU can take it beside the jobs placed there: " + "; ".join(parts)
        return out


def _exact(pb: _Problem) -> list[tuple[int, ...]]:
    """The optimum by integer programming over every allowed set (see module doc)."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import lil_matrix

    n_free = len(pb.free)
    out: list[tuple[int, ...]] = list(pb.running)  # a GPU whose running jobs break a limit keeps them alone
    # GPU classes: each GPU with running jobs alone; empty GPUs of equal free memory together.
    classes: dict[tuple, list[int]] = {}
    for g in pb.open:
        run = pb.running[g]
        key = ("pinned", g) if run else ("empty", float(pb.memory[g]))
        classes.setdefault(key, []).append(g)
    cand_groups, cand_class, cand_gpu = [], [], []
    for c, members in enumerate(classes.values()):
        run = pb.running[members[0]]
        room = pb.max_per_gpu - len(run)
        for size in range(0 if run else 1, max(room, 0) + 1):
            for extra in itertools.combinations(pb.free, size):
                cand_groups.append(run + extra)
                cand_class.append(c)
                cand_gpu.append(members[0])
    values = pb.values(cand_groups, np.array(cand_gpu, dtype=np.int64))
    keep = np.flatnonzero(np.isfinite(values))
    if not len(keep):  # no job fits anywhere, and no GPU with running jobs to keep: nothing to choose
        return out
    groups = [cand_groups[i] for i in keep]
    cls = np.array(cand_class, dtype=np.int64)[keep]
    # place as much job weight as possible first: it is worth more than any difference in throughput
    weight = pb.weight
    free_pos = {j: r for r, j in enumerate(pb.free)}
    gain = np.array([values[i] + weight * sum(pb.w[j] for j in cand_groups[i] if j in free_pos) for i in keep])
    A = lil_matrix((n_free + len(classes), len(groups)))
    for v, group in enumerate(groups):
        for j in group:
            if j in free_pos:
                A[free_pos[j], v] = 1
        A[n_free + cls[v], v] = 1
    lower = np.zeros(n_free + len(classes))
    upper = np.ones(n_free + len(classes))
    for c, (key, members) in enumerate(classes.items()):
        upper[n_free + c] = len(members)
        if key[0] == "pinned":
            lower[n_free + c] = 1  # a GPU with running jobs keeps a set (its running jobs at least)
    res = milp(-gain, constraints=LinearConstraint(A.tocsr(), lower, upper), integrality=np.ones(len(groups)),
               bounds=Bounds(0, 1))
    if res.x is None:  # pragma: no cover - feasible: running sets alone (open GPUs' break no limit) and empty GPUs
        raise RuntimeError(f"the placement integer program failed: {res.message}")
    by_class = {c: list(members) for c, (_, members) in enumerate(classes.items())}
    for v in np.flatnonzero(res.x > 0.5).tolist():
        out[by_class[cls[v]].pop(0)] = groups[v]
    return out


class _Shortlist:
    """Candidate partners of every job on a large instance (see module doc): ``pairs`` (n_pairs x 2 job indices) and
    ``value`` (their predicted weighted throughput on the largest open GPU, -inf where not allowed), and per job its
    best allowed partners, ``partners[i]`` (job indices, best first, at most ``PARTNERS_KEPT``)."""

    def __init__(self, pb: _Problem, rng: np.random.Generator):
        jobs = np.arange(len(pb.jobs))
        n = len(jobs)
        X = profile_matrix(pb.jobs)
        X = np.where(np.isfinite(X), X, np.nan)
        mu, sd = np.nanmean(X, axis=0), np.nanstd(X, axis=0)
        X = np.nan_to_num((X - mu) / np.where(sd > 0, sd, 1.0))
        labels, reps = _clusters(X, min(SHORTLIST_CLUSTERS, n), rng)
        C = len(reps)
        gpu = pb.open[int(np.argmax(pb.memory[pb.open]))] if pb.open else 0
        order = np.argsort(labels, kind="stable")
        size = np.bincount(labels, minlength=C)
        start = np.r_[0, np.cumsum(size)[:-1]]
        # one representative pair per two clusters (a cluster with itself: its representative and another member)
        ca, cb = np.triu_indices(C)
        second = np.where(size > 1, order[np.minimum(start + 1, n - 1)], -1)
        second = np.where(second == reps, order[start], second)
        b_job = np.where(ca == cb, second[cb], reps[cb])
        ok = b_job >= 0
        V = np.full((C, C), -np.inf)
        if ok.any():
            v = pb.values(list(zip(reps[ca[ok]].tolist(), b_job[ok].tolist())), np.full(int(ok.sum()), gpu, dtype=np.int64))
            V[ca[ok], cb[ok]] = v
            V[cb[ok], ca[ok]] = v
        pb.report(f"shortlist: {C} clusters of {n} jobs")
        top = np.argsort(-V, axis=1, kind="stable")[:, :SHORTLIST_CLUSTER_CHOICES]  # C x T, best clusters first
        T = top.shape[1]
        chosen = top[labels]  # n x T
        draw = (rng.random((n, T, SHORTLIST_PER_CLUSTER)) * size[chosen][:, :, None]).astype(np.int64)
        partner = order[start[chosen][:, :, None] + draw].reshape(n, -1)
        partner = np.concatenate([partner, rng.integers(0, n, size=(n, SHORTLIST_RANDOM))], axis=1)
        pairs = self._pairs(jobs, partner, n)
        value = pb.score(pairs, gpu)
        # a job without an allowed partner among its draw: a second draw, at random
        has = np.zeros(n, dtype=bool)
        has[pairs[np.isfinite(value)].ravel()] = True
        lonely = np.flatnonzero(~has)
        if len(lonely):
            more = self._pairs(lonely, rng.integers(0, n, size=(len(lonely), SHORTLIST_PARTNERS)), n)
            known = set((pairs[:, 0] * n + pairs[:, 1]).tolist())
            fresh = np.array([c not in known for c in (more[:, 0] * n + more[:, 1]).tolist()], dtype=bool)
            more = more[fresh] if len(more) else more
            pairs = np.concatenate([pairs, more])
            value = np.concatenate([value, pb.score(more, gpu)])
        self.pairs, self.value, self.memory = pairs, value, float(pb.memory[gpu])
        keep = np.flatnonzero(np.isfinite(value))
        ends = np.concatenate([pairs[keep, 0], pairs[keep, 1]])
        others = np.concatenate([pairs[keep, 1], pairs[keep, 0]])
        vals = np.concatenate([value[keep], value[keep]])
        by = np.lexsort((-vals, ends))
        ends, others = ends[by], others[by]
        self.partners: list[list[int]] = [[] for _ in range(n)]
        cuts = np.flatnonzero(np.diff(ends)) + 1
        for e, chunk in zip(ends[np.r_[0, cuts]].tolist() if len(ends) else [], np.split(others, cuts) if len(ends) else []):
            self.partners[e] = chunk[:PARTNERS_KEPT].tolist()
        pb.report(f"shortlist: {len(pairs)} candidate pairs predicted, {len(keep)} allowed")

    @staticmethod
    def _pairs(jobs: np.ndarray, partner: np.ndarray, n: int) -> np.ndarray:
        a = np.repeat(jobs, partner.shape[1])
        b = partner.ravel()
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        code = np.unique((lo * n + hi)[lo != hi])
        return np.column_stack([code // n, code % n])



def _clusters(X: np.ndarray, k: int, rng: np.random.Generator, iterations: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """k-means of the rows of ``X`` (a few Lloyd rounds from k distinct rows): each row's cluster (0 .. C-1, no empty
    cluster) and each cluster's representative (the row nearest its centre)."""
    n = len(X)
    centres = X[rng.choice(n, size=k, replace=False)]
    sq = (X * X).sum(axis=1)
    labels = np.zeros(n, dtype=np.int64)
    for _ in range(iterations):
        d = sq[:, None] - 2 * X @ centres.T + (centres * centres).sum(axis=1)[None, :]
        labels = np.argmin(d, axis=1)
        counts = np.bincount(labels, minlength=k)
        sums = np.zeros_like(centres)
        np.add.at(sums, labels, X)
        filled = counts > 0
        centres[filled] = sums[filled] / counts[filled, None]
    used, labels = np.unique(labels, return_inverse=True)
    centres = centres[used]
    dist = ((X - centres[labels]) ** 2).sum(axis=1)
    first = np.lexsort((dist, labels))
    reps = first[np.r_[0, np.flatnonzero(np.diff(labels[first])) + 1]]
    return labels, reps


def _heuristic(pb: _Problem, rounds: int = LOCAL_SEARCH_ROUNDS, seed: int = 0,
               short: _Shortlist | None = None) -> list[tuple[int, ...]]:
    """Matching, then layered assignment, then batch local search (see module doc); ``short``: the candidate
    partners of a large instance (else every pair is scored)."""
    from scipy.optimize import linear_sum_assignment

    m = len(pb.gpus)
    groups: list[list[int]] = [list(r) for r in pb.running]
    empty = sorted((g for g in range(m) if not groups[g]), key=lambda g: -pb.memory[g])
    free = sorted(pb.free, key=lambda i: -pb.jobs[i].gpu_busy_ms)
    extra = len(free) - len(empty)
    left = free
    if extra > 0 and pb.max_per_gpu >= 2 and empty:
        # Pairs among the free jobs, best predicted pair throughput first, as many as the empty GPUs need; jobs
        # with few allowed partners are paired first.
        n_pairs = min(extra, len(empty))
        fr = np.array(free)
        if short is None:
            a, b = np.triu_indices(len(free), 1)
            pairs: list[tuple[int, ...]] = list(zip(fr[a].tolist(), fr[b].tolist()))
            value = pb.values(pairs, np.full(len(pairs), empty[0], dtype=np.int64))
        else:  # the shortlist's pairs of two free jobs, by position in ``free``
            pos = np.full(len(pb.jobs), -1, dtype=np.int64)
            pos[fr] = np.arange(len(fr))
            both = (pos[short.pairs[:, 0]] >= 0) & (pos[short.pairs[:, 1]] >= 0)
            pa, pbb = pos[short.pairs[both, 0]], pos[short.pairs[both, 1]]
            a, b = np.minimum(pa, pbb), np.maximum(pa, pbb)
            pairs = list(zip(fr[a].tolist(), fr[b].tolist()))
            if float(pb.memory[empty[0]]) == short.memory:
                value = short.value[both]
            else:
                value = pb.values(pairs, np.full(len(pairs), empty[0], dtype=np.int64)) if pairs else np.zeros(0)
        allowed = np.isfinite(value)
        options = np.bincount(np.r_[a[allowed], b[allowed]], minlength=len(free))
        scarcity = np.minimum(options[a], options[b])
        jitter = np.random.default_rng(seed).random(len(pairs)) if seed else np.zeros(len(pairs))
        order = np.lexsort((-value, scarcity + jitter))  # scarce jobs first (ties broken at random on restarts), best pairs
        used: set[int] = set()
        chosen: list[tuple[int, ...]] = []
        for v in order.tolist():
            if len(chosen) == n_pairs:
                break
            if not allowed[v]:
                continue
            i, j = pairs[v]
            if i not in used and j not in used:
                used.update((i, j))
                chosen.append((i, j))
        rest = [i for i in free if i not in used]
        n_single = len(empty) - len(chosen)
        for g, members in zip(empty, chosen + [(i,) for i in rest[:n_single]]):
            groups[g] = list(members)
        left = rest[n_single:]
    else:
        for g, i in zip(empty, free):
            groups[g] = [i]
        left = free[len(empty):]
    pb.report(f"pairs: {sum(len(g) >= 2 for g in groups)} GPUs holding two jobs or more")
    # A set that breaks a limit on its GPU (a job too large for it alone, a pair chosen on the largest empty GPU
    # put on a smaller one) gives its jobs back to the layers, which place them only where they fit.
    current = pb.values([tuple(g) for g in groups], np.arange(m))
    back = {i for g in pb.open if not np.isfinite(current[g]) for i in groups[g] if i not in pb.running[g]}
    if back:
        for g in pb.open:
            groups[g] = [i for i in groups[g] if i not in back]
        back.update(left)
        left = [i for i in free if i in back]
    # Layers: each round gives every group at most one more job, by an assignment on the predicted gain.
    rng = np.random.default_rng(seed)
    while left:
        current = pb.values([tuple(g) for g in groups], np.arange(m))
        open_groups = [g for g in pb.open if len(groups[g]) < pb.max_per_gpu]
        if not open_groups:
            break
        dense = short is None or len(left) * len(open_groups) <= DENSE_LAYER_SETS
        if dense:
            cand = [(r, g) for r in range(len(left)) for g in open_groups]
        else:
            cand = _near_groups(pb, short, groups, left, open_groups, rng)  # type: ignore[arg-type]
        if not cand:
            break
        rr = np.array([r for r, _ in cand])
        gg = np.array([g for _, g in cand])
        value = pb.values([tuple(groups[g] + [left[r]]) for r, g in cand], gg.astype(np.int64))
        gain_v = value - current[gg]
        if not np.isfinite(gain_v).any():
            break
        if len(left) * m <= LAYER_ASSIGNMENT_CELLS:  # an optimal assignment: as many jobs placed as the candidates allow
            gain = np.full((len(left), m), -np.inf)
            gain[rr, gg] = gain_v
            rows, cols = linear_sum_assignment(np.where(np.isfinite(gain), -gain, 1e9))
            placed = [(r, g) for r, g in zip(rows, cols) if np.isfinite(gain[r, g])]
        else:  # greedy on the sparse gains: jobs with the fewest groups to go to first, then the best gains
            placed, took_r, took_g = [], set(), set()
            ok = np.isfinite(gain_v)
            options = np.bincount(rr[ok], minlength=len(left))
            for v in np.lexsort((-gain_v, np.where(ok, options[rr], len(cand) + 1))).tolist():
                if not np.isfinite(gain_v[v]):
                    break
                r, g = int(rr[v]), int(gg[v])
                if r not in took_r and g not in took_g:
                    placed.append((r, g))
                    took_r.add(r)
                    took_g.add(g)
        if not placed:
            break
        for r, g in placed:
            groups[g].append(left[r])
        took = {r for r, _ in placed}
        left = [j for r, j in enumerate(left) if r not in took]
        pb.report(f"layers: {len(left)} jobs left to place")
    out = _local_search(pb, groups, left, rounds, rng, short)
    pb.report("filling GPUs with room")
    return _fill(pb, out)


def _near_groups(pb: _Problem, short: _Shortlist, groups: list[list[int]], left: list[int], open_groups: list[int],
                 rng: np.random.Generator) -> list[tuple[int, int]]:
    """(position in ``left``, group) candidates of a layer on a large instance: the groups with room holding one of
    the job's shortlisted partners, and ``LAYER_RANDOM_GROUPS`` groups with room at random."""
    group_of = np.full(len(pb.jobs), -1, dtype=np.int64)
    for g, members in enumerate(groups):
        group_of[members] = g
    room = np.zeros(len(groups), dtype=bool)
    room[open_groups] = True
    og = np.array(open_groups)
    out: set[tuple[int, int]] = set()
    for r, j in enumerate(left):
        for p in short.partners[j][:LAYER_PARTNERS]:
            g = int(group_of[p])
            if g >= 0 and room[g]:
                out.add((r, g))
        for g in og[rng.integers(0, len(og), size=min(LAYER_RANDOM_GROUPS, len(og)))].tolist():
            out.add((r, g))
    return sorted(out)


def _fill(pb: _Problem, groups: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """Queued jobs into GPUs that can still take them, best gain first (one job per GPU and pass), until none can:
    the local search samples its moves on large instances, and no job may stay queued beside a GPU that takes it."""
    out = [list(g) for g in groups]
    placed = {i for g in out for i in g}
    queue = [i for i in pb.free if i not in placed]
    while queue:
        room = [g for g in pb.open if len(out[g]) < pb.max_per_gpu]
        if not room:
            break
        current = pb.values([tuple(out[g]) for g in room], np.array(room, dtype=np.int64))
        cand = [(q, k) for q in queue for k in range(len(room))]
        gpu = np.array([room[k] for _, k in cand], dtype=np.int64)
        gain = pb.values([tuple(out[room[k]] + [q]) for q, k in cand], gpu) - current[[k for _, k in cand]]
        took: set[int] = set()
        used: set[int] = set()
        for v in np.argsort(-gain, kind="stable").tolist():
            if not np.isfinite(gain[v]):
                break
            q, k = cand[v]
            if q not in took and k not in used:
                out[room[k]].append(q)
                took.add(q)
                used.add(k)
        if not took:
            break
        queue = [q for q in queue if q not in took]
    return [tuple(g) for g in out]


def _local_search(pb: _Problem, groups: list[list[int]], queue: list[int], rounds: int, rng,
                  short: _Shortlist | None = None) -> list[tuple[int, ...]]:
    """Batch best-improvement over moves (a free or queued job into another group with room) and swaps (two jobs
    of two groups, the queue counting as a group), on the lexicographic value: placed job weight outweighs any change
    in throughput. Each round scores its candidates in one batch (all of them up to ``SWAPS_PER_ROUND``, else a
    sample: at random, or on a large instance targeted at the groups holding a job's shortlisted partners) and
    applies the improving ones best first, at most one per group."""
    m = len(groups)
    Q = m  # the queue's group number
    movable = set(pb.free)
    weight = pb.weight
    counted = np.zeros(m + 1, dtype=bool)  # the queue and GPUs that keep their running jobs alone count 0
    counted[pb.open] = True
    wl = pb.w.tolist()
    unweighted = bool((pb.w == 1).all())
    if short is not None:
        rounds = max(rounds, SPARSE_ROUNDS)

    def members(g: int) -> list[int]:
        return queue if g == Q else groups[g]

    def value(gs: list[tuple[int, ...]], where: np.ndarray) -> np.ndarray:
        out = np.zeros(len(gs))
        real = counted[where]
        if real.any():
            sub = [gs[i] for i in np.flatnonzero(real)]
            held = [len(t) for t in sub] if unweighted else [sum(wl[j] for j in t) for t in sub]
            out[real] = pb.values(sub, where[real]) + weight * np.array(held, dtype=float)
        return out

    before = (-np.inf, -np.inf)  # the predicted throughput and the job weight placed, a round ago
    all_weight = sum(wl[j] for j in pb.free)
    improved = 0
    for done in range(rounds):
        if pb.out_of_time():
            pb.report(f"local search: time budget spent after {done} rounds")
            break
        current = value([tuple(members(g)) for g in range(m + 1)], np.arange(m + 1))
        total = float(current[counted].sum())
        waiting = set(queue)
        held = sum(wl[j] for j in pb.free if j not in waiting)
        thr = total - weight * held
        if done:
            pb.report(f"local search: round {done}, {improved} improving changes, predicted (weighted) throughput {thr:.1f}")
        if short is not None and thr - before[0] < LOCAL_SEARCH_STOP_SHARE * thr and \
                held - before[1] < LOCAL_SEARCH_STOP_SHARE * all_weight:
            break  # the last round gained too little to pay for another
        before = (thr, held)
        room = [g for g in pb.open if len(groups[g]) < pb.max_per_gpu]
        jobs = [(a, g) for g in range(m + 1) for a in members(g) if a in movable]
        n_moves, n_swaps = len(jobs) * len(room), len(jobs) * (len(jobs) - 1) // 2
        chains: list[tuple[int, int, int, int]]
        if n_moves + n_swaps <= SWAPS_PER_ROUND:
            moves = [(a, ga, None, gb) for a, ga in jobs for gb in room if gb != ga]
            swaps = [(a, ga, b, gb) for x, (a, ga) in enumerate(jobs) for b, gb in jobs[x + 1:] if ga != gb]
            chains = [(q, a, ga, gb) for q in queue for a, ga in jobs if ga != Q for gb in room if gb != ga]
            if len(chains) > SWAPS_PER_ROUND:
                chains = [chains[i] for i in rng.choice(len(chains), SWAPS_PER_ROUND, replace=False)]
        elif short is None:
            share = SWAPS_PER_ROUND // 2
            pick = rng.integers(0, len(jobs), size=(share, 2))
            swaps = [(jobs[i][0], jobs[i][1], jobs[j][0], jobs[j][1]) for i, j in pick if jobs[i][1] != jobs[j][1]]
            moves = []
            if room:
                mv = rng.integers(0, len(jobs), size=share)
                dest = rng.integers(0, len(room), size=share)
                moves = [(jobs[i][0], jobs[i][1], None, room[d]) for i, d in zip(mv, dest) if room[d] != jobs[i][1]]
            chains = _random_chains(queue, jobs, room, Q, rng)
        else:
            moves, swaps, chains = _targeted(pb, short, groups, queue, jobs, room, movable, counted, Q, rng)
        cands = moves + swaps
        if not cands and not chains:
            break
        # a change of the queue is (job out, job in or None), applied once chosen: the queue may be long
        new_a = [() if ga == Q else tuple([j for j in groups[ga] if j != a] + ([b] if b is not None else []))
                 for a, ga, b, gb in cands]
        new_b = [() if gb == Q else tuple([j for j in groups[gb] if j != b] + [a]) for a, ga, b, gb in cands]
        ga_arr = np.array([c[1] for c in cands], dtype=np.int64)
        gb_arr = np.array([c[3] for c in cands], dtype=np.int64)
        gain = value(new_a, ga_arr) + value(new_b, gb_arr) - current[ga_arr] - current[gb_arr]
        changes: list[list[tuple[int, Any]]] = [[(ga, (a, b) if ga == Q else new_a[v]), (gb, (b, a) if gb == Q else new_b[v])]
                                                 for v, (a, ga, b, gb) in enumerate(cands)]
        if chains:
            seat = [tuple([j for j in groups[ga] if j != a] + [q]) for q, a, ga, gb in chains]
            moved = [tuple(groups[gb] + [a]) for q, a, ga, gb in chains]
            ga_c = np.array([c[2] for c in chains], dtype=np.int64)
            gb_c = np.array([c[3] for c in chains], dtype=np.int64)
            gain = np.r_[gain, value(seat, ga_c) + value(moved, gb_c) - current[ga_c] - current[gb_c]]
            changes += [[(ga, seat[v]), (gb, moved[v]), (Q, (q, None))] for v, (q, a, ga, gb) in enumerate(chains)]
        touched: set[int] = set()
        improved = 0
        for v in np.argsort(-gain, kind="stable").tolist():
            if not gain[v] > MIN_GAIN:
                break
            if any(g in touched for g, _ in changes[v]):
                continue
            for g, new in changes[v]:
                if g == Q:
                    out, enter = new
                    queue = [j for j in queue if j != out] + ([enter] if enter is not None else [])
                else:
                    groups[g] = list(new)
            touched.update(g for g, _ in changes[v])
            improved += 1
        if not improved:
            break
    else:
        pb.report(f"local search: {rounds} rounds, {improved} improving changes in the last")
    return [tuple(g) for g in groups]


def _random_chains(queue: list[int], jobs: list[tuple[int, int]], room: list[int], Q: int,
                   rng: np.random.Generator) -> list[tuple[int, int, int, int]]:
    """Ejection chains drawn at random (a queued job takes a placed job's seat, which moves to a group with room)."""
    placed = [(a, g) for a, g in jobs if g != Q]
    if not queue or not placed or not room:
        return []
    n = SWAPS_PER_ROUND
    q = rng.integers(0, len(queue), size=n)
    a = rng.integers(0, len(placed), size=n)
    d = rng.integers(0, len(room), size=n)
    out = {(queue[i], placed[j][0], placed[j][1], room[k]) for i, j, k in zip(q.tolist(), a.tolist(), d.tolist())
           if room[k] != placed[j][1]}
    return sorted(out)


def _targeted(pb: _Problem, short: _Shortlist, groups: list[list[int]], queue: list[int], jobs: list[tuple[int, int]],
              room: list[int], movable: set[int], counted: np.ndarray, Q: int, rng: np.random.Generator):
    """A large instance's moves, swaps and chains toward the groups that hold a job's shortlisted partners: job a
    into partner p's group (if it has room), a swapped with another member of p's group, a queued job into a seat
    beside its partner whose holder moves to a group with room."""
    group_of = np.full(len(pb.jobs), Q, dtype=np.int64)
    for g, ms in enumerate(groups):
        group_of[ms] = g
    has_room = np.zeros(Q + 1, dtype=bool)
    has_room[room] = True
    n = SWAPS_PER_JOB * len(jobs)
    pick = rng.integers(0, len(jobs), size=n).tolist()
    slot = rng.random(n).tolist()
    other = rng.random(n).tolist()
    moves, swaps, chains = [], [], []
    for t in range(n):
        a, ga = jobs[pick[t]]
        plist = short.partners[a]
        if not plist:
            continue
        p = plist[int(slot[t] * slot[t] * len(plist))]  # the best partners more often
        gb = int(group_of[p])
        if gb == ga or gb == Q or not counted[gb]:
            continue
        if has_room[gb]:
            moves.append((a, ga, None, gb))
        mates = [j for j in groups[gb] if j != p and j in movable]
        if mates:
            b = mates[int(other[t] * len(mates))]
            if ga == Q:  # a queued job takes b's seat; b moves to a group with room (beside a partner, if one has room)
                dest = [int(group_of[x]) for x in short.partners[b] if has_room[int(group_of[x])] and int(group_of[x]) != gb]
                if dest:
                    chains.append((a, b, gb, dest[0]))
                elif room:
                    d = room[int(other[t] * len(room))]
                    if d != gb:
                        chains.append((a, b, gb, d))
            else:
                swaps.append((a, ga, b, gb))
    placed = [(a, g) for a, g in jobs if g != Q]
    if queue and placed and room:  # and chains at random for each queued job: a seat anywhere, a move to any room
        k = CHAINS_PER_QUEUED * len(queue)
        qs = rng.integers(0, len(queue), size=k).tolist()
        ps = rng.integers(0, len(placed), size=k).tolist()
        ds = rng.integers(0, len(room), size=k).tolist()
        chains += [(queue[i], placed[j][0], placed[j][1], room[d]) for i, j, d in zip(qs, ps, ds) if room[d] != placed[j][1]]
    if RANDOM_SWAPS_PER_JOB:  # and a few swaps at random, as the all-pairs engine tries them
        k = RANDOM_SWAPS_PER_JOB * len(jobs)
        for i, j in rng.integers(0, len(jobs), size=(k, 2)).tolist():
            (a, ga), (b, gb) = jobs[i], jobs[j]
            if ga != gb:
                swaps.append((a, ga, b, gb))
    return list(dict.fromkeys(moves)), list(dict.fromkeys(swaps)), list(dict.fromkeys(chains))


def _weights(weights: Mapping[str, float] | None, jobs: Sequence[JobProfile]) -> np.ndarray | None:
    """Each job's weight (``weights`` by job name; a job given as copies, ``JOB#1`` .., may be weighted by its job's
    name), checked: a mapping of names among the jobs to finite numbers above 0."""
    if weights is None:
        return None
    from ..profile import job_of

    if not isinstance(weights, Mapping):
        raise TypeError(f"weights must be a mapping of job names to numbers, not {type(weights).__name__}")
    names = {p.name for p in jobs} | {job_of(p.name) for p in jobs}
    for k, v in weights.items():
        if not isinstance(k, str):
            raise TypeError(f"weights: a key must be a job name, not {type(k).__name__} {k!r}")
        if k not in names:
            raise ValueError(f"weights: no job named {k!r} among the jobs")
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not (math.isfinite(v) and v > 0):
            raise ValueError(f"weights[{k!r}] must be a finite number above 0, not {v!r}")
    return np.array([float(weights.get(p.name, weights.get(job_of(p.name), 1.0))) for p in jobs])


def check_limits(max_per_gpu: Any, max_slowdown: Any, min_throughput: Any, time_budget_s: Any = None) -> None:
    """The limits' types and values (``TypeError``/``ValueError`` naming the argument)."""
    if isinstance(max_per_gpu, bool) or not isinstance(max_per_gpu, numbers.Integral):
        raise TypeError(f"max_per_gpu must be an integer, not {type(max_per_gpu).__name__} {max_per_gpu!r}")
    if max_per_gpu < 1:
        raise ValueError(f"max_per_gpu must be at least 1, not {max_per_gpu}")
    if isinstance(max_slowdown, str):
        if max_slowdown != FAIR:
            raise ValueError(f'max_slowdown must be a number of at least 1, "fair" or None, not {max_slowdown!r}')
    elif max_slowdown is not None:
        if isinstance(max_slowdown, bool) or not isinstance(max_slowdown, numbers.Real):
            raise TypeError(f'max_slowdown must be a number, "fair" or None, not {type(max_slowdown).__name__} {max_slowdown!r}')
        if not math.isfinite(max_slowdown):
            raise ValueError(f"max_slowdown must be a finite number of at least 1, not {max_slowdown!r}")
        if float(max_slowdown) < 1:
            raise ValueError(f"max_slowdown must be at least 1 (a job alone runs at slowdown 1), not {max_slowdown!r}")
    if min_throughput is not None:
        if isinstance(min_throughput, bool) or not isinstance(min_throughput, numbers.Real):
            raise TypeError(f"min_throughput must be a number or None, not {type(min_throughput).__name__} {min_throughput!r}")
        if not (math.isfinite(min_throughput) and float(min_throughput) >= 0):
            raise ValueError(f"min_throughput must be a finite number of at least 0, not {min_throughput!r}")
    if time_budget_s is not None:
        if isinstance(time_budget_s, bool) or not isinstance(time_budget_s, numbers.Real):
            raise TypeError(f"time_budget_s must be a number of seconds or None, not {type(time_budget_s).__name__} {time_budget_s!r}")
        if not (math.isfinite(time_budget_s) and float(time_budget_s) > 0):
            raise ValueError(f"time_budget_s must be a finite number of seconds above 0, not {time_budget_s!r}")


def place(scorer: Scorer, jobs: Sequence[JobProfile], gpus: Sequence[Gpu], max_per_gpu: int = 3,
          max_slowdown: float | str | None = FAIR, solver: str = "auto",
          min_throughput: float | None = DEFAULT_MIN_THROUGHPUT, weights: Mapping[str, float] | None = None,
          time_budget_s: float | None = None, progress: Callable[[str], None] | None = None) -> Placement:
    """Place ``jobs`` on ``gpus`` (see module doc). ``solver``: ``auto`` (exact up to ``EXACT_MAX_JOBS`` jobs to
    place, else heuristic), ``exact`` or ``heuristic``. Jobs named in a GPU's ``running`` must be among ``jobs``.
    ``progress(line)`` hears of each stage of a run past ``constants.PACK_PROGRESS_AFTER_S``."""
    names = [p.name for p in jobs]
    if len(set(names)) != len(names):
        raise ValueError("two jobs have the same name; give each job once")
    if isinstance(gpus, (str, bytes, Mapping)) or not isinstance(gpus, Sequence):
        raise TypeError(f"gpus must be a sequence of Gpu, not {type(gpus).__name__}")
    wrong = next((i for i, g in enumerate(gpus) if not isinstance(g, Gpu)), None)
    if wrong is not None:
        raise TypeError(f"gpus[{wrong}] must be a Gpu (colopred.Gpu(name, memory_gib, running)), not {type(gpus[wrong]).__name__}")
    gnames = [g.name for g in gpus]
    if len(set(gnames)) != len(gnames):
        raise ValueError(f"two GPUs are named {next(n for i, n in enumerate(gnames) if n in gnames[:i])!r}: give each GPU its own name")
    known = set(names)
    for g in gpus:
        unknown = [n for n in g.running if n not in known]
        if unknown:
            raise ValueError(f"GPU {g.name}: running job(s) {', '.join(unknown)} are not among the jobs given")
    seen: set[str] = set()
    for g in gpus:
        if seen & set(g.running):
            raise ValueError(f"job {sorted(seen & set(g.running))[0]} is running on two GPUs")
        seen |= set(g.running)
    if not gpus:
        raise ValueError("no GPU to place jobs on")
    check_limits(max_per_gpu, max_slowdown, min_throughput, time_budget_s)
    if solver not in ("auto", "exact", "heuristic"):
        raise ValueError(f"unknown solver {solver!r} (auto, exact or heuristic)")
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be a callable taking one line of text, not {type(progress).__name__}")
    w = _weights(weights, jobs)
    deadline = math.inf if time_budget_s is None else time.perf_counter() + float(time_budget_s)
    ms = max_slowdown if max_slowdown is None or max_slowdown == FAIR else float(max_slowdown)
    pb = _Problem(scorer, jobs, gpus, int(max_per_gpu), ms, None if min_throughput is None else float(min_throughput),
                  w, deadline, progress)
    for message in pb.closed.values():
        warnings.warn(message, UserWarning, stacklevel=3)  # to Predictor.pack's caller
    exact = solver == "exact" or (solver == "auto" and len(pb.free) <= EXACT_MAX_JOBS)
    if exact:
        groups = _exact(pb)
    elif len(pb.free) > DENSE_MAX_JOBS:
        short = _Shortlist(pb, np.random.default_rng(0))
        groups = _heuristic(pb, seed=0, short=short)
    else:
        starts = HEURISTIC_RESTARTS if len(pb.free) <= RESTARTS_MAX_JOBS else 1
        groups, best_value = _heuristic(pb, seed=0), -np.inf
        for seed in range(starts):
            if seed and pb.out_of_time():
                break
            tried = groups if seed == 0 else _heuristic(pb, seed=seed)
            v = pb.objective(tried)
            if v > best_value + MIN_GAIN:
                groups, best_value = tried, v
    return pb.result(groups, "exact" if exact else "heuristic", exact)


def _progress_after() -> float:
    return PACK_PROGRESS_AFTER_S
