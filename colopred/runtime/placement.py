"""The placement engine: jobs onto GPUs, maximising total predicted normalised throughput (``Predictor.pack``).

Objective, lexicographic: place as many jobs as the limits allow, then maximise Σ over GPUs of the predicted
normalised throughput of each GPU's set (:func:`colopred.runtime.outcome.normalised_throughput`; a job alone
counts 1). A set is allowed on a GPU if it fits in the GPU's free memory, holds at most ``max_per_gpu`` jobs
(those already running there included) and no job's predicted slowdown exceeds ``max_slowdown``. Jobs that no
allowed set can take come back queued, each with its reason: the limits that keep it off each GPU beside the
jobs placed there (``max_per_gpu``, memory, ``max_slowdown``; only those that bind). A GPU whose running jobs
already break a limit (more than ``max_per_gpu``, more memory than it has, a predicted slowdown above
``max_slowdown``) is not an error: it keeps them, takes no new job, and a ``UserWarning`` names the GPU and the
limit (``colopred pack`` prints it as a ``colopred: warning:`` line).

Two strategies, both scoring candidate sets in batches through ``Scorer`` (``Predictor.slowdown_index``):

``exact``      every allowed set of at most ``max_per_gpu`` jobs is scored and a set-packing integer program
               (HiGHS through ``scipy.optimize.milp``) picks the optimum; identical empty GPUs are one class.
               Used up to ``EXACT_MAX_JOBS`` jobs.
``heuristic``  jobs are first paired by a greedy matching on the predicted pair throughput (all pairs scored at
               once), then further jobs are added to the groups one layer at a time by an optimal assignment
               (``scipy.optimize.linear_sum_assignment``) of job to group on the predicted gain, then a local
               search tries moves and swaps of jobs between groups, scored in batches, for a bounded number of
               rounds. Used above ``EXACT_MAX_JOBS`` jobs, and measured against ``exact`` below it
               (``tests/test_placement_engine.py``, ``scripts/bench_pack.py``).
"""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass, field
from typing import Protocol, Sequence

import numpy as np

from ..profile import JobProfile
from . import outcome
from .features import padded

EXACT_MAX_JOBS = 16
"""Largest number of jobs to place for which the exact solver is used by default: with three jobs per GPU its
integer program has at most C(16,1) + C(16,2) + C(16,3) = 696 candidate sets per GPU class."""

LOCAL_SEARCH_ROUNDS = 8
"""Rounds of batch local search in the heuristic (each scores its moves, swaps and ejection chains in one batch and
applies the improving ones that touch different groups). On 1,000 jobs on 500 GPUs (``scripts/bench_pack.py``) the
predicted total was 702.3 after the construction, 746.7 after 4 rounds, 748.9 after 8 and 750.0 after 16: 8 keep
that instance under its 5-second target."""

SWAPS_PER_ROUND = 20_000
"""Moves and swaps scored per local-search round: all of them when there are fewer, else a random sample of this
many (a bound on the time a round takes: 20,000 candidate pairs of sets score in about 0.1 s)."""

HEURISTIC_RESTARTS = 8
RESTARTS_MAX_JOBS = 200
"""Up to this many jobs to place, the heuristic runs from ``HEURISTIC_RESTARTS`` pairings (scarcest jobs first, ties
broken at random) and keeps the best; tight limits (``max_slowdown``) otherwise leave it a job short of the optimum
on some small instances (``scripts/bench_pack.py``)."""

MIN_GAIN = 1e-9
"""A move or swap must raise the total predicted throughput by more than this (float noise never loops)."""


class Scorer(Protocol):
    """What the engine needs of a predictor: per-slot slowdowns of sets given as index arrays."""

    def slowdown_index(self, profiles: Sequence[JobProfile], idx: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class Gpu:
    """A GPU to place jobs on: its name, the memory its colopred jobs may use, running ones included (None: the
    jobs' GPU memory), and the jobs already running there (pinned: they stay, and count towards ``max_per_gpu``,
    memory and ``max_slowdown``; where they already break one, the GPU takes no new job and a warning says so)."""

    name: str
    memory_gib: float | None = None
    running: tuple[str, ...] = ()


@dataclass(frozen=True)
class Placement:
    """Where each job goes. ``gpus`` lists the job names on each GPU (running ones first), ``queued`` the jobs
    left waiting with the reason, ``throughput`` the predicted total normalised throughput, ``solver`` the
    strategy that found it and ``optimal`` whether it is proven optimal under the model."""

    gpu_names: tuple[str, ...]
    gpus: tuple[tuple[str, ...], ...]
    gpu_throughput: tuple[float, ...]
    queued: dict[str, str] = field(default_factory=dict)
    solver: str = "exact"
    optimal: bool = True

    @property
    def throughput(self) -> float:
        return float(sum(self.gpu_throughput))

    @property
    def placed(self) -> int:
        return sum(len(g) for g in self.gpus)

    def to_dict(self) -> dict:
        return {"gpus": [{"name": n, "jobs": list(g), "throughput": t} for n, g, t in zip(self.gpu_names, self.gpus, self.gpu_throughput)],
                "queued": [{"job": j, "reason": r} for j, r in self.queued.items()], "throughput": self.throughput,
                "placed": self.placed, "solver": self.solver, "optimal": self.optimal}


KINDS = ("full", "memory", "slowdown", "unpredictable", "allowed")
"""Why a queued job does not join a GPU's set, in the order a reason names them."""


class _Problem:
    """Jobs, GPUs and limits, with every set value asked of the scorer cached by (GPU class, members)."""

    def __init__(self, scorer: Scorer, jobs: Sequence[JobProfile], gpus: Sequence[Gpu], max_per_gpu: int,
                 max_slowdown: float | None):
        self.scorer = scorer
        self.jobs = list(jobs)
        self.index = {p.name: i for i, p in enumerate(self.jobs)}
        self.gpus = list(gpus)
        self.max_per_gpu = max_per_gpu
        self.max_slowdown = max_slowdown
        self.default_memory = max(p.gpu.memory_gib for p in self.jobs) if self.jobs else 0.0
        self.peak = np.array([p.peak_memory_gib if p.peak_memory_gib is not None else np.nan for p in self.jobs])
        self.running = [tuple(self.index[n] for n in g.running) for g in self.gpus]
        pinned = {i for r in self.running for i in r}
        self.free = [i for i in range(len(self.jobs)) if i not in pinned]
        self.memory = np.array([g.memory_gib if g.memory_gib is not None else self.default_memory for g in self.gpus])
        self.cache: dict[tuple[float, tuple[int, ...]], float] = {}
        self.weight = 2.0 * (len(self.jobs) + 1)  # a placed job outweighs any difference in throughput
        self.closed = self._closed()
        self.open = [g for g in range(len(self.gpus)) if g not in self.closed]

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
            need = outcome.memory_need_gib(self.peak[list(run)])
            s = self._slowdowns([run])[0]
            if len(run) > self.max_per_gpu:
                why = f"its {len(run)} running jobs already exceed max_per_gpu {self.max_per_gpu}"
            elif need > self.memory[g]:
                why = (f"its running jobs need {need:.1f} GiB, more than its "
                       f"{'memory_gib' if self.gpus[g].memory_gib is not None else 'memory'} ({self.memory[g]:.1f} GiB)")
            elif np.isnan(s).any():
                why = "the model cannot predict its running jobs together"
            else:
                why = f"its running jobs are predicted to slow down to {np.max(s):.2f}, above max_slowdown {self.max_slowdown:g}"
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
        """The lexicographic value of a placement over the GPUs that can take jobs: ``weight`` per job placed plus
        the predicted throughput (-inf where a set breaks a limit)."""
        g = np.array(self.open, dtype=np.int64)
        values = self.values([tuple(groups[k]) for k in self.open], g)
        return float(np.sum(values + self.weight * np.array([len(groups[k]) for k in self.open])))

    def values(self, groups: list[tuple[int, ...]], gpu: np.ndarray) -> np.ndarray:
        """Predicted throughput of each group (job indices) on GPU ``gpu[i]``, -inf where a limit forbids it. Each
        distinct (GPU memory, members) is scored once per placement."""
        keys = [(float(self.memory[g]), tuple(sorted(m))) for m, g in zip(groups, gpu)]
        todo = list(dict.fromkeys(k for k in keys if k not in self.cache))
        if todo:
            mem = np.array([k[0] for k in todo])
            for k, v in zip(todo, self._score([k[1] for k in todo], mem)):
                self.cache[k] = v
        return np.array([self.cache[k] for k in keys], dtype=float)

    def _score(self, groups: list[tuple[int, ...]], memory: np.ndarray) -> np.ndarray:
        out = np.full(len(groups), -np.inf)
        sizes = np.fromiter(map(len, groups), dtype=np.int64, count=len(groups))
        flat = np.fromiter((j for g in groups for j in g), dtype=np.int64, count=int(sizes.sum()))
        idx = padded(flat, sizes, width=max(int(sizes.max(initial=0)), 1))
        present = idx >= 0
        need = outcome.memory_need_gib(np.where(present, self.peak[np.where(present, idx, 0)], np.nan), present)
        ok = (sizes <= self.max_per_gpu) & (need <= memory)
        single = ok & (sizes <= 1)
        out[single] = sizes[single].astype(float)
        multi = np.flatnonzero(ok & (sizes >= 2))
        if len(multi):
            s = self.scorer.slowdown_index(self.jobs, idx[multi])
            value = np.asarray(outcome.normalised_throughput(s))
            value[np.isnan(np.where(idx[multi] >= 0, s, 0.0)).any(axis=1)] = -np.inf  # a set the scorer cannot predict
            if self.max_slowdown is not None:
                value = np.where(np.nanmax(s, axis=1) <= self.max_slowdown, value, -np.inf)
            out[multi] = value
        return out

    def result(self, groups: list[tuple[int, ...]], solver: str, optimal: bool) -> Placement:
        values = self.values(groups, np.arange(len(groups)))
        for g in self.closed:  # its running jobs as they run, limits aside
            values[g] = float(outcome.normalised_throughput(self._slowdowns([groups[g]])[0]))
        placed = {i for g in groups for i in g}
        queued = self.queue_reasons(groups, [i for i in self.free if i not in placed])
        return Placement(tuple(g.name for g in self.gpus), tuple(tuple(self.jobs[i].name for i in g) for g in groups),
                         tuple(float(v) for v in values), {self.jobs[i].name: r for i, r in queued.items()}, solver, optimal)

    def queue_reasons(self, groups: list[tuple[int, ...]], queued: list[int]) -> dict[int, str]:
        """Why each queued job joins no GPU beside the jobs placed there: per GPU the first limit it would break
        (``max_per_gpu``, then memory, then ``max_slowdown``), summed up over the GPUs; only limits that bind."""
        if not queued:
            return {}
        m = len(self.gpus)
        need_job = np.asarray(outcome.memory_need_gib(self.peak[queued][:, None]))
        used = np.array([outcome.memory_need_gib(self.peak[list(g)]) if g else 0.0 for g in groups])
        full = np.array([len(g) >= self.max_per_gpu for g in groups])
        short = used[None, :] + need_job[:, None] > self.memory[None, :]  # queued job x GPU
        # per (job, GPU): "full", "memory", "slowdown" (with the worst predicted slowdown), "unpredictable", "allowed"
        kind: dict[tuple[int, int], str] = {}
        worst: dict[tuple[int, int], float] = {}
        for r in range(len(queued)):
            for g in range(m):
                if full[g]:
                    kind[r, g] = "full"
                elif short[r, g]:
                    kind[r, g] = "memory"
        check = [(r, g) for r in range(len(queued)) for g in range(m) if (r, g) not in kind]
        for (r, g), s in zip(check, self._slowdowns([groups[g] + (queued[r],) for r, g in check])):
            if np.isnan(s).any():
                kind[r, g] = "unpredictable"
            elif self.max_slowdown is not None and np.max(s) > self.max_slowdown:
                kind[r, g], worst[r, g] = "slowdown", float(np.max(s))
            else:
                kind[r, g] = "allowed"
        out = {}
        for r, i in enumerate(queued):
            by: dict[str, list[int]] = {}
            for g in range(m):
                by.setdefault(kind[r, g], []).append(g)
            need = float(need_job[r])
            free = max(float(np.max(self.memory[by["memory"]] - used[by["memory"]])), 0.0) if "memory" in by else 0.0
            if need > self.memory.max():
                out[i] = f"needs {need:.1f} GiB, more than any GPU has ({self.memory.max():.1f} GiB at most)"
                continue
            if set(by) == {"full"}:
                out[i] = f"no room: every GPU is at max_per_gpu ({self.max_per_gpu} jobs)"
                continue
            if set(by) == {"memory"}:
                out[i] = f"fits in no GPU's free memory beside the jobs placed there (needs {need:.1f} GiB, at most {free:.1f} GiB free)"
                continue
            if set(by) == {"slowdown"}:
                best = min(worst[r, g] for g in by["slowdown"])
                out[i] = (f"any placement would break max_slowdown {self.max_slowdown:g} (beside the jobs placed on each GPU, "
                          f"a predicted slowdown of {best:.2f} at best)")
                continue
            parts = []
            for k, gs in sorted(by.items(), key=lambda kv: KINDS.index(kv[0])):
                who = ", ".join(self.gpus[g].name for g in gs) if len(gs) <= 3 else f"{len(gs)} GPUs"
                if k == "full":
                    parts.append(f"{who} at max_per_gpu ({self.max_per_gpu} jobs)")
                elif k == "memory":
                    parts.append(f"{who} short of memory (needs {need:.1f} GiB, at most {free:.1f} GiB free)")
                elif k == "slowdown":
                    best = min(worst[r, g] for g in gs)
                    parts.append(f"{who} over max_slowdown {self.max_slowdown:g} with it (predicted slowdown {best:.2f} at best)")
                elif k == "unpredictable":
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
    # place as many jobs as possible first: each placed job is worth more than any difference in throughput
    weight = pb.weight
    free_pos = {j: r for r, j in enumerate(pb.free)}
    gain = np.array([values[i] + weight * sum(1 for j in cand_groups[i] if j in free_pos) for i in keep])
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


def _heuristic(pb: _Problem, rounds: int = LOCAL_SEARCH_ROUNDS, seed: int = 0) -> list[tuple[int, ...]]:
    """Matching, then layered assignment, then batch local search (see module doc)."""
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
        a, b = np.triu_indices(len(free), 1)
        fr = np.array(free)
        pairs: list[tuple[int, ...]] = list(zip(fr[a].tolist(), fr[b].tolist()))
        value = pb.values(pairs, np.full(len(pairs), empty[0], dtype=np.int64))
        allowed = np.isfinite(value)
        options = np.bincount(np.r_[a[allowed], b[allowed]], minlength=len(free))
        scarcity = np.minimum(options[a], options[b])
        jitter = np.random.default_rng(seed).random(len(pairs)) if seed else np.zeros(len(pairs))
        order = np.lexsort((-value, scarcity + jitter))  # scarce jobs first (ties broken at random on restarts), best pairs
        used: set[int] = set()
        chosen: list[tuple[int, ...]] = []
        for v in order:
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
    # A set that breaks a limit on its GPU (a job too large for it alone, a pair chosen on the largest empty GPU
    # put on a smaller one) gives its jobs back to the layers, which place them only where they fit.
    current = pb.values([tuple(g) for g in groups], np.arange(m))
    back = {i for g in pb.open if not np.isfinite(current[g]) for i in groups[g] if i not in pb.running[g]}
    if back:
        for g in pb.open:
            groups[g] = [i for i in groups[g] if i not in back]
        back.update(left)
        left = [i for i in free if i in back]
    # Layers: each round gives every group at most one more job, by an optimal assignment on the predicted gain.
    while left:
        current = pb.values([tuple(g) for g in groups], np.arange(m))
        open_groups = [g for g in pb.open if len(groups[g]) < pb.max_per_gpu]
        if not open_groups:
            break
        cand = [(r, g) for r in range(len(left)) for g in open_groups]
        value = pb.values([tuple(groups[g] + [left[r]]) for r, g in cand], np.array([g for _, g in cand], dtype=np.int64))
        gain = np.full((len(left), m), -np.inf)
        rr = np.array([r for r, _ in cand])
        gg = np.array([g for _, g in cand])
        gain[rr, gg] = value - current[gg]
        if not np.isfinite(gain).any():
            break
        rows, cols = linear_sum_assignment(np.where(np.isfinite(gain), -gain, 1e9))
        placed = [(r, g) for r, g in zip(rows, cols) if np.isfinite(gain[r, g])]
        if not placed:
            break
        for r, g in placed:
            groups[g].append(left[r])
        took = {r for r, _ in placed}
        left = [j for r, j in enumerate(left) if r not in took]
    return _fill(pb, _local_search(pb, groups, left, rounds, np.random.default_rng(seed)))


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
        for v in np.argsort(-gain, kind="stable"):
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


def _local_search(pb: _Problem, groups: list[list[int]], queue: list[int], rounds: int, rng) -> list[tuple[int, ...]]:
    """Batch best-improvement over moves (a free or queued job into another group with room) and swaps (two jobs
    of two groups, the queue counting as a group), on the lexicographic value: a placed job outweighs any change in
    throughput. Each round scores its candidates in one batch (all of them up to ``SWAPS_PER_ROUND``, else a random
    sample) and applies the improving ones best first, at most one per group."""
    m = len(groups)
    Q = m  # the queue's group number
    movable = set(pb.free)
    weight = pb.weight
    counted = np.zeros(m + 1, dtype=bool)  # the queue and GPUs that keep their running jobs alone count 0
    counted[pb.open] = True

    def members(g: int) -> list[int]:
        return queue if g == Q else groups[g]

    def value(gs: list[tuple[int, ...]], where: np.ndarray) -> np.ndarray:
        out = np.zeros(len(gs))
        real = counted[where]
        if real.any():
            sub = [gs[i] for i in np.flatnonzero(real)]
            out[real] = pb.values(sub, where[real]) + weight * np.array([len(t) for t in sub])
        return out

    for _ in range(rounds):
        current = value([tuple(members(g)) for g in range(m + 1)], np.arange(m + 1))
        room = [g for g in pb.open if len(groups[g]) < pb.max_per_gpu]
        jobs = [(a, g) for g in range(m + 1) for a in members(g) if a in movable]
        n_moves, n_swaps = len(jobs) * len(room), len(jobs) * (len(jobs) - 1) // 2
        if n_moves + n_swaps <= SWAPS_PER_ROUND:
            moves = [(a, ga, None, gb) for a, ga in jobs for gb in room if gb != ga]
            swaps = [(a, ga, b, gb) for x, (a, ga) in enumerate(jobs) for b, gb in jobs[x + 1:] if ga != gb]
        else:
            share = SWAPS_PER_ROUND // 2
            pick = rng.integers(0, len(jobs), size=(share, 2))
            swaps = [(jobs[i][0], jobs[i][1], jobs[j][0], jobs[j][1]) for i, j in pick if jobs[i][1] != jobs[j][1]]
            moves = []
            if room:
                mv = rng.integers(0, len(jobs), size=share)
                dest = rng.integers(0, len(room), size=share)
                moves = [(jobs[i][0], jobs[i][1], None, room[d]) for i, d in zip(mv, dest) if room[d] != jobs[i][1]]
        cands = moves + swaps
        # ejection chains: a queued job takes a placed job's seat, which moves to a group with room
        chains = [(q, a, ga, gb) for q in queue for a, ga in jobs if ga != Q for gb in room if gb != ga]
        if len(chains) > SWAPS_PER_ROUND:
            chains = [chains[i] for i in rng.choice(len(chains), SWAPS_PER_ROUND, replace=False)]
        if not cands and not chains:
            break
        new_a = [tuple([j for j in members(ga) if j != a] + ([b] if b is not None else [])) for a, ga, b, gb in cands]
        new_b = [tuple([j for j in members(gb) if j != b] + [a]) for a, ga, b, gb in cands]
        ga_arr = np.array([c[1] for c in cands], dtype=np.int64)
        gb_arr = np.array([c[3] for c in cands], dtype=np.int64)
        gain = value(new_a, ga_arr) + value(new_b, gb_arr) - current[ga_arr] - current[gb_arr]
        changes = [[(ga, new_a[v]), (gb, new_b[v])] for v, (a, ga, b, gb) in enumerate(cands)]
        if chains:
            seat = [tuple([j for j in groups[ga] if j != a] + [q]) for q, a, ga, gb in chains]
            moved = [tuple(groups[gb] + [a]) for q, a, ga, gb in chains]
            ga_c = np.array([c[2] for c in chains], dtype=np.int64)
            gb_c = np.array([c[3] for c in chains], dtype=np.int64)
            gain = np.r_[gain, value(seat, ga_c) + value(moved, gb_c) - current[ga_c] - current[gb_c]]
            changes += [[(ga, seat[v]), (gb, moved[v]), (Q, tuple(j for j in queue if j != q))]
                        for v, (q, a, ga, gb) in enumerate(chains)]
        touched: set[int] = set()
        improved = False
        for v in np.argsort(-gain, kind="stable"):
            if not gain[v] > MIN_GAIN:
                break
            if any(g in touched for g, _ in changes[v]):
                continue
            for g, new in changes[v]:
                if g == Q:
                    queue = list(new)
                else:
                    groups[g] = list(new)
            touched.update(g for g, _ in changes[v])
            improved = True
        if not improved:
            break
    return [tuple(g) for g in groups]


def place(scorer: Scorer, jobs: Sequence[JobProfile], gpus: Sequence[Gpu], max_per_gpu: int = 3,
          max_slowdown: float | None = None, solver: str = "auto") -> Placement:
    """Place ``jobs`` on ``gpus`` (see module doc). ``solver``: ``auto`` (exact up to ``EXACT_MAX_JOBS`` jobs to
    place, else heuristic), ``exact`` or ``heuristic``. Jobs named in a GPU's ``running`` must be among ``jobs``."""
    names = [p.name for p in jobs]
    if len(set(names)) != len(names):
        raise ValueError("two jobs have the same name; give each job once")
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
    if max_per_gpu < 1:
        raise ValueError(f"max_per_gpu must be at least 1, not {max_per_gpu}")
    if max_slowdown is not None and not (math.isfinite(max_slowdown) and max_slowdown >= 1):
        raise ValueError(f"max_slowdown must be a number of at least 1, not {max_slowdown}")
    if solver not in ("auto", "exact", "heuristic"):
        raise ValueError(f"unknown solver {solver!r} (auto, exact or heuristic)")
    pb = _Problem(scorer, jobs, gpus, max_per_gpu, max_slowdown)
    for message in pb.closed.values():
        warnings.warn(message, UserWarning, stacklevel=3)  # to Predictor.pack's caller
    exact = solver == "exact" or (solver == "auto" and len(pb.free) <= EXACT_MAX_JOBS)
    if exact:
        groups = _exact(pb)
    else:
        starts = HEURISTIC_RESTARTS if len(pb.free) <= RESTARTS_MAX_JOBS else 1
        groups, best_value = _heuristic(pb, seed=0), -np.inf
        for seed in range(starts):
            tried = groups if seed == 0 else _heuristic(pb, seed=seed)
            v = pb.objective(tried)
            if v > best_value + MIN_GAIN:
                groups, best_value = tried, v
    return pb.result(groups, "exact" if exact else "heuristic", exact)
