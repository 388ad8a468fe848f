"""A campaign spread over several GPUs: which sets each GPU (shard) measures, as a pure function of the settings.

Each shard is a campaign of its own on one GPU: :func:`make_plan` of the shard's sets and their jobs, so every
slowdown a shard measures has its solo windows measured on the same GPU (opening, interleaved and closing solo
windows of each of its jobs). Sets are given to shards by expected measuring time, longest first, each to the
shard it leaves least loaded (Graham's LPT rule, within 4/3 of the optimal makespan for equal costs; Graham
1969): a set costs its expected window seconds, and a job new to a shard also costs the shard its solo windows. ``cross_gpu_frac`` of the sets are measured a second time on another shard (the least loaded one), so the
campaign itself tells whether the GPUs agree (:func:`reader.cross_gpu_agreement`).

Window ids are ``sK/ID`` (``ID`` as in a one-GPU plan), unique within the campaign; shard K's records go to
``windows.shardK.jsonl`` in the campaign's folder and only shard K's process writes that file.
"""

from __future__ import annotations

import random
from dataclasses import replace

from ...profile import job_of
from .plan import CampaignConfig, WindowSpec, make_plan

DEFAULT_ITER_MS = 200.0  # window sizing before a job's first solo window (and the shard balancer's guess)
SHARD_FILE_PREFIX = "windows.shard"


def window_length_s(cfg: CampaignConfig, est_ms: float) -> tuple[float, float]:
    """(window length, warm-up) in s for a window whose slowest member's iteration is expected to take
    ``est_ms``: long enough for ``min_iters`` timed iterations after the warm-up."""
    warmup = max(cfg.warmup_s, 2 * est_ms / 1e3)
    body = max(cfg.min_window_s, (cfg.min_iters + 1) * est_ms / 1e3)
    return min(warmup + body, cfg.max_window_s), warmup


RECORDS_FILE = "windows.jsonl"
"""A one-GPU campaign's record file (a shard's is ``windows.shardK.jsonl``)."""


def records_name(shard: int | None) -> str:
    """The record file of a shard (``windows.shardK.jsonl``), or of a one-GPU campaign (``windows.jsonl``)."""
    return RECORDS_FILE if shard is None else f"{SHARD_FILE_PREFIX}{shard}.jsonl"


def shard_of_file(name: str) -> int | None:
    """K of ``windows.shardK.jsonl``; None for any other name."""
    if name.startswith(SHARD_FILE_PREFIX) and name.endswith(".jsonl"):
        k = name[len(SHARD_FILE_PREFIX):-len(".jsonl")]
        if k.isdigit() and str(int(k)) == k:
            return int(k)
    return None


def _set_cost_s(cfg: CampaignConfig, s: tuple[str, ...]) -> float:
    """Expected seconds of one set's collocated windows over the modes, repeats included (collocated iterations
    are taken as n x solo, as the campaign sizes them; no solo times are known before measuring), and with
    ``bracket`` its members' solo windows before and after each."""
    colo = window_length_s(cfg, DEFAULT_ITER_MS * len(s))[0]
    brackets = 2 * len(s) * window_length_s(cfg, DEFAULT_ITER_MS)[0] if cfg.bracket else 0.0  # at most, before and after
    return len(cfg.modes) * (1 + cfg.repeat_frac) * (colo + brackets)


def _solo_cost_s(cfg: CampaignConfig) -> float:
    """Expected seconds of the opening and closing solo windows a job costs a shard, over the modes."""
    return len(cfg.modes) * 2 * window_length_s(cfg, DEFAULT_ITER_MS)[0]


def assign_sets(cfg: CampaignConfig) -> list[list[tuple[str, ...]]]:
    """The sets of each shard (a set measured on two GPUs is in two shards' lists)."""
    n = cfg.shards
    rng = random.Random(f"{cfg.seed}:shards")
    sets = list(cfg.sets)
    rng.shuffle(sets)  # ties in cost are broken at random (seeded), not by name
    cross = set(rng.sample(range(len(sets)), round(cfg.cross_gpu_frac * len(sets)))) if n > 1 else set()
    load = [0.0] * n
    jobs: list[set[str]] = [set() for _ in range(n)]
    out: list[list[tuple[str, ...]]] = [[] for _ in range(n)]
    solo = _solo_cost_s(cfg)

    def added(k: int, s: tuple[str, ...]) -> float:
        return _set_cost_s(cfg, s) + solo * len({job_of(j) for j in s} - jobs[k])

    def put(k: int, s: tuple[str, ...]) -> None:
        load[k] += added(k, s)
        jobs[k] |= {job_of(j) for j in s}
        out[k].append(s)

    order = sorted(range(len(sets)), key=lambda i: -_set_cost_s(cfg, sets[i]))  # stable: seeded order within a cost
    for i in order:
        s = sets[i]
        k = min(range(n), key=lambda k: (load[k] + added(k, s), k))
        put(k, s)
        if i in cross:
            put(min((h for h in range(n) if h != k), key=lambda h: (load[h] + added(h, s), h)), s)
    return out


def shard_plans(cfg: CampaignConfig) -> list[list[WindowSpec]]:
    """One window schedule per shard (see the module doc); ``[make_plan(cfg)]`` for a one-GPU campaign."""
    if cfg.shards == 1:
        return [make_plan(cfg)]
    plans = []
    for k, sets in enumerate(assign_sets(cfg)):
        if not sets:
            plans.append([])
            continue
        used = {job_of(j) for s in sets for j in s}
        sub = replace(cfg, jobs=tuple(j for j in cfg.jobs if j in used), sets=tuple(sets), shards=1, cross_gpu_frac=0.0)
        plans.append([replace(w, window_id=f"s{k}/{w.window_id}") for w in make_plan(sub)])
    return plans


def full_plan(cfg: CampaignConfig) -> list[WindowSpec]:
    """Every window of the campaign, shard after shard."""
    return [w for p in shard_plans(cfg) for w in p]
