"""The schedule of a measurement campaign: which windows run, in which order.

The plan is a pure function of the campaign settings, so a resumed campaign rebuilds
exactly the same window IDs and skips those already recorded.

Per mode the plan is: one solo window per job (baselines, also used to size windows),
then the collocated windows in a seeded random order with one solo window interleaved
after every ``solo_every`` of them (rotating through the jobs of the sets just measured,
so every slowdown has solo times measured nearby), repeats of a fraction of the sets
(for the noise of collocated windows), and a closing solo window per job.

With ``bracket`` the interleaved solo windows are replaced by solo windows of every member right
before and right after each collocated window (a member measured alone in the window just before
is not measured again), so a slowdown's baseline is seconds away from it, whatever drift there is
between windows minutes apart. No closing solo windows then: the last brackets close. On the H100
it did not make host-bound jobs' labels less noisy: their noise is from one window to the next, not
drift (``datasets/h100/window_noise/README.md``).
"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

from ...constants import MODES
from ...errors import InputError
from ...io import write_text_atomic
from ...profile import instance_names, job_of
from .commands import JobCommand


@dataclass(frozen=True)
class WindowSpec:
    window_id: str
    mode: str
    kind: str  # "solo" | "colo"
    jobs: tuple[str, ...]
    repeat: int = 0


@dataclass(frozen=True)
class CampaignConfig:
    jobs: tuple[str, ...]
    sets: tuple[tuple[str, ...], ...]
    modes: tuple[str, ...]
    seed: int = 0
    solo_every: int = 3
    repeat_frac: float = 0.1
    min_iters: int = 12
    min_window_s: float = 1.5
    max_window_s: float = 20.0
    warmup_s: float = 0.4
    shards: int = 1  # GPUs the campaign is spread over (``sharding.shard_plans``); 1: one GPU, ``make_plan``
    cross_gpu_frac: float = 0.0  # fraction of the sets measured on a second GPU too (cross-GPU agreement)
    commands: tuple[JobCommand, ...] = ()  # jobs that are training commands, not zoo jobs (harness.commands)
    bracket: bool = False  # solo windows of each member right before and after every collocated window

    def __post_init__(self):
        if not isinstance(self.shards, int) or isinstance(self.shards, bool) or self.shards < 1:
            raise ValueError(f"the number of GPUs (shards) must be a positive integer, not {self.shards!r}")
        if not 0.0 <= self.cross_gpu_frac <= 1.0:
            raise ValueError(f"--cross-gpu-frac must lie in [0, 1], not {self.cross_gpu_frac!r}")
        if not self.repeat_frac >= 0:
            raise ValueError(f"the repeat fraction must be at least 0, not {self.repeat_frac!r}")
        if self.cross_gpu_frac > 0 and self.shards < 2:
            raise ValueError("--cross-gpu-frac needs a campaign over at least two GPUs")
        for m in self.modes:
            if m not in MODES:
                raise ValueError(f"unknown mode {m!r} (use {' or '.join(MODES)})")
        known = set(self.jobs)
        for s in self.sets:
            if len(s) < 2:
                raise ValueError(f"a collocation set needs at least 2 jobs: {'+'.join(s)}")
            if len(set(s)) != len(s):
                raise ValueError(f"a set lists a job twice: {'+'.join(s)} (copies of one job are named JOB#1, JOB#2, ...)")
            missing = [j for j in s if job_of(j) not in known]
            if missing:
                raise ValueError(f"set {'+'.join(s)} uses job(s) not in --jobs: {', '.join(missing)}")
        stray = [c.name for c in self.commands if c.name not in known]
        if stray:
            raise ValueError(f"command job(s) not in --jobs: {', '.join(stray)}")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["jobs"] = list(self.jobs)
        d["sets"] = ["+".join(s) for s in self.sets]
        d["modes"] = list(self.modes)
        if self.shards == 1 and self.cross_gpu_frac == 0.0:  # a one-GPU campaign.json keeps the fields it always had
            del d["shards"], d["cross_gpu_frac"]
        d["commands"] = [c.to_dict() for c in self.commands]
        if not self.commands:
            del d["commands"]  # a zoo campaign's settings stay as before
        if not self.bracket:
            del d["bracket"]  # so do those of an unbracketed one
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "CampaignConfig":
        d = dict(d)
        d["jobs"] = tuple(d["jobs"])
        d["sets"] = tuple(tuple(s.split("+")) for s in d["sets"])
        d["modes"] = tuple(d["modes"])
        d["commands"] = tuple(JobCommand.from_dict(c) for c in d.get("commands", ()))
        return cls(**d)

    def save(self, path: Path) -> None:
        write_text_atomic(path, json.dumps(self.to_dict(), indent=1) + "\n")


def expand_sets(spec: str, jobs: list[str], *, max_sets: int | None = None, seed: int = 0) -> list[tuple[str, ...]]:
    """``pairs``, ``triples``, ``pairs+triples`` (all combinations of the jobs), or a file
    with one set per line (jobs joined by ``+`` or ``,``; `` #`` after a space starts a comment).
    ``max_sets`` keeps a seeded random sample of each size. A job listed n > 1 times in one set is n copies of it,
    run side by side as n processes (a hyperparameter sweep's runs): the set's members are then named
    ``JOB#1`` .. ``JOB#n`` (``colopred.profile.instance_names``), each measured against the job's solo windows."""
    sizes = {"pairs": [2], "triples": [3], "pairs+triples": [2, 3]}
    if spec in sizes:
        out: list[tuple[str, ...]] = []
        rng = random.Random(seed)
        for k in sizes[spec]:
            combos = [tuple(sorted(c)) for c in itertools.combinations(sorted(jobs), k)]
            if max_sets is not None and len(combos) > max_sets:
                combos = sorted(rng.sample(combos, max_sets))
            out += combos
        return out
    path = Path(spec)
    if not path.exists():
        raise InputError(path, "no such sets file (use pairs, triples, pairs+triples or a file of sets)")
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = _strip_comment(line)
        if not line:
            continue
        members = tuple(instance_names(sorted(job_of(x.strip()) for x in line.replace(",", "+").split("+") if x.strip())))
        if len(members) < 2:
            raise InputError(path, f"line {n}: a set needs at least two jobs")
        out.append(members)
    if not out:
        raise InputError(path, "no sets in file")
    return out


def _strip_comment(line: str) -> str:
    """A sets-file line without its comment: ``#`` at the start of the line or after white space (a ``#`` inside a
    name, as in an instance name ``JOB#2``, is part of the name)."""
    for i, ch in enumerate(line):
        if ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].strip()
    return line.strip()


def _repeats(sets: list[tuple[str, ...]], frac: float, rng: random.Random) -> list[tuple[tuple[str, ...], int]]:
    """(set, repeat number) of the windows measured again after every set's first: a sample of ``frac`` of the sets
    once more, or for ``frac`` > 1 every set floor(frac) more times (each round in its own order) and a sample of the
    rest once more, so repeats of a set lie minutes apart in one run."""
    if frac <= 1:
        n_rep = round(frac * len(sets))
        return [(s, 1) for s in rng.sample(sets, n_rep)] if n_rep else []
    whole = int(frac)
    out = [(s, r) for r in range(1, whole + 1) for s in rng.sample(sets, len(sets))]
    return out + [(s, whole + 1) for s in rng.sample(sets, round((frac - whole) * len(sets)))]


def make_plan(cfg: CampaignConfig) -> list[WindowSpec]:
    """Deterministic window schedule for ``cfg`` (see module docstring)."""
    plan: list[WindowSpec] = []
    n = 0

    def add(mode: str, kind: str, jobs: tuple[str, ...], repeat: int = 0) -> None:
        nonlocal n
        wid = f"{mode}:{n:05d}:{kind}:{'+'.join(jobs)}:r{repeat}"
        plan.append(WindowSpec(wid, mode, kind, jobs, repeat))
        n += 1

    for mode in cfg.modes:
        rng = random.Random(f"{cfg.seed}:{mode}")
        sets = list(cfg.sets)
        rng.shuffle(sets)
        order = [(s, 0) for s in sets] + _repeats(sets, cfg.repeat_frac, rng)
        for j in cfg.jobs:
            add(mode, "solo", (j,))
        if cfg.bracket:
            just_alone = {cfg.jobs[-1]}  # measured alone in the window just before
            for i, (s, rep) in enumerate(order, 1):
                members = list(dict.fromkeys(job_of(j) for j in s))  # copies share their job's solo windows
                for j in members:
                    if j not in just_alone:
                        add(mode, "solo", (j,), repeat=i)
                add(mode, "colo", s, rep)
                for j in members:
                    add(mode, "solo", (j,), repeat=i)
                just_alone = set(members)
            continue
        rotation: list[str] = []
        for i, (s, rep) in enumerate(order, 1):
            add(mode, "colo", s, rep)
            rotation.extend(j for j in dict.fromkeys(job_of(x) for x in s) if j not in rotation)
            if cfg.solo_every and i % cfg.solo_every == 0 and rotation:
                add(mode, "solo", (rotation.pop(0),), repeat=i)
        for j in cfg.jobs:
            add(mode, "solo", (j,), repeat=len(order) + 1)
    return plan
