"""Run a measurement campaign: the plan's windows, one after another, recorded as they finish.

GPU work sits behind :class:`WorkerPool` (see :mod:`colopred.measurement.harness.gpu_pool` for the
real one); tests drive the same code with fake pools.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

from ...constants import CONTEXT_OVERHEAD_GIB
from ...errors import ColopredError, InputError
from ...io import write_text_atomic
from ...profile import job_of
from ...runtime.outcome import fits_memory, memory_need_gib
from .plan import CampaignConfig, WindowSpec
from .records import RECORD_SCHEMA, RecordWriter, iter_records, now_iso, provenance
from .sharding import DEFAULT_ITER_MS, full_plan, records_name, shard_plans, window_length_s

CONFIG_FILE = "campaign.json"
LOCK_FILE = ".campaign.lock"
RETRIED_STATUSES = ("failed",)
"""Window statuses ``--resume`` measures again: a worker that failed or died (its reason says which). An
out-of-memory set (``oom``) would fail again; an ``infeasible`` one was never run."""
MAX_WINDOW_ATTEMPTS = 3
"""Most times one window is run: a window failed this often is left failed (it is the set, not bad luck)."""


def summarize_iterations(iter_ms: list[float]) -> dict[str, float | int]:
    """Mean, median, spread of iteration times (ms)."""
    if not iter_ms:
        return {"iterations": 0}
    return {
        "iterations": len(iter_ms),
        "mean_ms": statistics.fmean(iter_ms),
        "median_ms": statistics.median(iter_ms),
        "std_ms": statistics.pstdev(iter_ms) if len(iter_ms) > 1 else 0.0,
        "min_ms": min(iter_ms),
        "max_ms": max(iter_ms),
    }


class WorkerPool(Protocol):
    """Runs windows for one mode. ``run_window`` returns (per-job results, GPM metrics)."""

    gpu_name: str | None
    driver: str | None
    memory_gib: float

    def run_window(
        self, jobs: tuple[str, ...], duration_s: float, warmup_s: float
    ) -> tuple[dict[str, dict[str, Any]], dict[str, float] | None]: ...

    def close(self) -> None: ...


PoolFactory = Callable[[str, tuple[str, ...]], WorkerPool]


@dataclass
class Progress:
    """A one-line progress bar with an estimate of the time left (stderr)."""

    total: int
    done: int = 0
    stream: Any = sys.stderr
    _t0: float = 0.0
    _n0: int = 0

    def start(self, already: int) -> None:
        self.done = already
        self._n0 = already
        self._t0 = time.monotonic()
        self.show("")

    def step(self, label: str) -> None:
        self.done += 1
        self.show(label)

    def show(self, label: str) -> None:
        if self.stream is None:
            return
        frac = self.done / self.total if self.total else 1.0
        ran = self.done - self._n0
        elapsed = time.monotonic() - self._t0
        eta = "?" if ran == 0 else _fmt_s(elapsed / ran * (self.total - self.done))
        bar = "#" * int(frac * 24)
        self.stream.write(f"\r[{bar:<24}] {self.done}/{self.total} windows, {_fmt_s(elapsed)} elapsed, ~{eta} left  {label[:50]:<50}")
        if self.done >= self.total:
            self.stream.write("\n")
        self.stream.flush()


def _fmt_s(s: float) -> str:
    s = int(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def plan_fingerprint(plan: list[WindowSpec]) -> str:
    """SHA-256 (16 hex digits) of a plan's windows in order: recorded in campaign.json, checked on resume."""
    text = "\n".join(f"{w.window_id} {w.mode} {w.kind} {'+'.join(w.jobs)} {w.repeat}" for w in plan)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def write_config(out_dir: Path, config: CampaignConfig) -> None:
    """campaign.json of ``out_dir``: ``config``'s settings and its whole plan's fingerprint, unless it is written already."""
    cfg_path = out_dir / CONFIG_FILE
    if not cfg_path.exists():
        write_text_atomic(cfg_path, json.dumps({**config.to_dict(), "plan_sha256": plan_fingerprint(full_plan(config))}, indent=1) + "\n")


def read_config(cfg_path: Path) -> tuple[CampaignConfig, str | None]:
    """(settings, plan fingerprint or None) of a campaign.json; a damaged one is one clear error."""
    try:
        d = json.loads(cfg_path.read_text(encoding="utf-8"))
        if not isinstance(d, dict):
            raise TypeError("not a JSON object")
        fingerprint = d.pop("plan_sha256", None)
        return CampaignConfig.from_dict(d), fingerprint
    except (OSError, UnicodeDecodeError, RecursionError) as e:
        raise InputError(cfg_path, f"cannot read the campaign's settings ({e.__class__.__name__})") from None
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise InputError(cfg_path, f"not a valid campaign.json ({str(e).splitlines()[0][:100] if str(e) else e.__class__.__name__})") from None


class CampaignLock:
    """An exclusive ``flock`` on ``DIR/.campaign.lock`` while a campaign is written: a second writer (another
    ``measure`` or ``measure --resume`` on the same folder) is refused at once instead of duplicating windows.
    The lock goes with the process (closed file, or a killed process), so a stale lock file never blocks."""

    def __init__(self, out_dir: Path, name: str = LOCK_FILE):
        self.path = Path(out_dir) / name
        self._f = None

    def __enter__(self) -> "CampaignLock":
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        f = open(self.path, "a+")
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.seek(0)
            holder = f.read().strip()[:80]
            f.close()
            raise InputError(self.path.parent, "another colopred measure is writing this campaign"
                             + (f" ({holder})" if holder else "") + "; wait for it to end, or stop it, before resuming") from None
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()} since {now_iso()}\n")
        f.flush()
        self._f = f
        return self

    def __exit__(self, *exc) -> None:
        if self._f is not None:
            self._f.close()  # releases the flock
            self._f = None


class Campaign:
    """A campaign stored in ``out_dir``: ``campaign.json`` (settings) and ``windows.jsonl`` (records).

    A campaign over several GPUs (``config.shards`` > 1) is run shard by shard: ``Campaign(dir, shard=K)`` is
    shard K's part (its plan, ``windows.shardK.jsonl``, its own lock ``.shardK.lock``), run by one process on one
    GPU; ``multigpu.ShardedCampaign`` starts one such process per GPU. Without ``shard`` a sharded campaign's
    object has the whole plan but does not run."""

    def __init__(self, out_dir: str | Path, config: CampaignConfig | None = None, *, resume: bool = False,
                 shard: int | None = None):
        self.out_dir = Path(out_dir)
        if self.out_dir.exists() and not self.out_dir.is_dir():
            raise InputError(self.out_dir, "is a file; --out names the campaign's folder")
        cfg_path = self.out_dir / CONFIG_FILE
        fingerprint = None
        if cfg_path.is_dir():
            raise InputError(cfg_path, "is a directory, not a campaign's settings")
        if cfg_path.exists():
            stored, fingerprint = read_config(cfg_path)
            if not resume:
                raise InputError(cfg_path, "a campaign already exists here; add --resume to continue it, or pick a new --out")
            if config is not None and config != stored:
                raise InputError(cfg_path, "--resume with settings that differ from the stored campaign's")
            config = stored
        elif resume:
            raise InputError(cfg_path, "nothing to resume: no campaign in this directory")
        if config is None:
            raise ColopredError("no campaign settings given")
        self.config = config
        if shard is not None and not (config.shards > 1 and 0 <= shard < config.shards):
            raise InputError(cfg_path, f"the campaign has no shard {shard} (it is spread over {config.shards} GPU(s))")
        self.shard = shard
        plans = shard_plans(config)
        whole = [w for p in plans for w in p]  # full_plan(config), of the shard plans built once
        self.plan = whole if shard is None else plans[shard]
        self.records_path = self.out_dir / records_name(shard)
        self.lock_name = LOCK_FILE if shard is None else f".shard{shard}.lock"
        if fingerprint is not None and fingerprint != plan_fingerprint(whole):
            raise InputError(cfg_path, "the plan rebuilt from these settings is not the one recorded (made by another colopred "
                                       "version?): finish the campaign with that version, or start a new --out")
        self.run_id: str | None = None  # set by run(): one per invocation

    def attempts(self) -> dict[str, list[str]]:
        """Statuses recorded for each window, in order, after checking that every record belongs to the plan:
        a record whose window the rebuilt plan lacks, or whose jobs, mode or kind differ from its window's,
        means the plan is not the one recorded, and is refused naming the file and line."""
        out: dict[str, list[str]] = {}
        if not self.records_path.exists():
            return out
        plan = {w.window_id: w for w in self.plan}
        for n, r in enumerate(iter_records(self.records_path), 1):
            wid = r.get("window_id")
            w = plan.get(wid)
            if w is None:
                raise InputError(self.records_path, f"record {n} is of window {str(wid)[:40]!r}, which the plan rebuilt from "
                                                    f"{CONFIG_FILE} does not hold: not this campaign's records")
            if list(r.get("jobs") or []) != list(w.jobs) or r.get("mode") != w.mode or r.get("kind") != w.kind:
                raise InputError(self.records_path, f"record {n} (window {wid}) does not match the plan rebuilt from {CONFIG_FILE} "
                                                    f"({w.kind} {'+'.join(w.jobs)} in {w.mode})")
            out.setdefault(wid, []).append(str(r.get("status")))
        return out

    def done_ids(self) -> set[str]:
        """Windows that need no more runs: recorded with a final status, or failed ``MAX_WINDOW_ATTEMPTS`` times."""
        return {wid for wid, st in self.attempts().items()
                if st[-1] not in RETRIED_STATUSES or len(st) >= MAX_WINDOW_ATTEMPTS}

    def _solo_state(self) -> tuple[dict[tuple[str, str], float], dict[tuple[str, str], float]]:
        """Latest solo iteration ms and peak memory per (mode, job) from the records."""
        iter_ms: dict[tuple[str, str], float] = {}
        mem: dict[tuple[str, str], float] = {}
        if self.records_path.exists():
            for r in iter_records(self.records_path):
                if r.get("kind") == "solo" and r.get("status") == "ok":
                    j = r["jobs"][0]
                    res = r["results"][j]
                    iter_ms[(r["mode"], j)] = res["mean_ms"]
                    if res.get("peak_memory_gib") is not None:
                        mem[(r["mode"], j)] = res["peak_memory_gib"]
        return iter_ms, mem

    def window_seconds(self, w: WindowSpec, solo_ms: dict[tuple[str, str], float]) -> tuple[float, float]:
        """(window length, warm-up) in s: long enough for each member to finish ``min_iters``
        iterations after the warm-up, assuming a collocated iteration takes at most n x solo."""
        n = len(w.jobs)
        est_ms = max(solo_ms.get((w.mode, job_of(j)), DEFAULT_ITER_MS) for j in w.jobs) * (n if w.kind == "colo" else 1)
        return window_length_s(self.config, est_ms)

    def run(self, pool_factory: PoolFactory, *, progress: Progress | None = None, log: Callable[[str], None] = lambda s: None) -> int:
        """Run every window not yet recorded, and again (up to ``MAX_WINDOW_ATTEMPTS`` runs) each window whose
        worker failed or died. Holds the campaign's lock throughout. Returns the number of windows run now."""
        if self.config.shards > 1 and self.shard is None:
            raise ColopredError(f"a campaign over {self.config.shards} GPUs runs one shard per GPU (colopred measure --gpus)")
        with CampaignLock(self.out_dir, self.lock_name):
            return self._run(pool_factory, progress, log)

    def _run(self, pool_factory: PoolFactory, progress: Progress | None, log: Callable[[str], None]) -> int:
        write_config(self.out_dir, self.config)
        done = self.done_ids()
        pending = [w for w in self.plan if w.window_id not in done]
        if progress is not None:
            progress.total = len(self.plan)
            progress.start(len(self.plan) - len(pending))
        solo_ms, solo_mem = self._solo_state()
        self.run_id = uuid.uuid4().hex[:12]  # one per invocation: a resume starts a new run (and segment)
        ran = 0
        with RecordWriter(self.records_path) as writer:
            for mode in self.config.modes:
                todo = [w for w in pending if w.mode == mode]
                if not todo:
                    continue
                log(f"mode {mode}: {len(todo)} windows to run")
                pool = pool_factory(mode, self.config.jobs)
                # Pools that size their memory use get the peaks measured so far (any mode).
                hints = getattr(pool, "peak_seen_gib", None)
                if isinstance(hints, dict):
                    for (_, j), gib in solo_mem.items():
                        hints[j] = max(hints.get(j, 0.0), gib)
                try:
                    for w in todo:
                        rec = self._run_one(w, pool, solo_ms, solo_mem)
                        writer.append(rec)
                        ran += 1
                        if progress is not None:
                            progress.step(f"{w.kind} {'+'.join(w.jobs)}: {rec['status']}")
                finally:
                    pool.close()
        return ran

    def _run_one(self, w: WindowSpec, pool: WorkerPool, solo_ms, solo_mem) -> dict[str, Any]:
        duration, warmup = self.window_seconds(w, solo_ms)
        rec: dict[str, Any] = {
            "schema": RECORD_SCHEMA,
            "window_id": w.window_id,
            "mode": w.mode,
            "kind": w.kind,
            "jobs": list(w.jobs),
            "repeat": w.repeat,
            "started_at": now_iso(),
            "window_s": round(duration, 3),
            "warmup_s": round(warmup, 3),
            "provenance": provenance(w.mode, pool.gpu_name, pool.driver, getattr(pool, "gpu_uuid", None)),
            "park_idle": bool(getattr(pool, "park_idle", False)),  # idle workers' state kept in host memory
            "pin_cpus": bool(getattr(pool, "pin_cpus", False)),  # each worker on its own block of CPUs
            "run_id": self.run_id,
        }
        if self.shard is not None:  # harness 1.4: the shard and the GPU (index on its node) of a multi-GPU campaign
            rec["shard"] = self.shard
            rec["gpu_index"] = getattr(pool, "gpu_index", None)
        commands = [c.to_dict() for c in self.config.commands if c.name in {job_of(j) for j in w.jobs}]
        if commands:  # jobs that are training commands: what ran (harness.commands)
            rec["commands"] = commands
        if w.kind == "colo":
            need = [solo_mem.get((w.mode, job_of(j))) for j in w.jobs]
            if all(x is not None for x in need):
                total = memory_need_gib(need)
                if not fits_memory(total, pool.memory_gib):
                    rec.update(
                        status="infeasible",
                        reason=f"needs ~{total:.1f} GiB (solo peaks + {CONTEXT_OVERHEAD_GIB} GiB/process), GPU has {pool.memory_gib:.1f} GiB",
                        results={},
                        gpm=None,
                    )
                    return rec
        t0 = time.monotonic()
        results, gpm = pool.run_window(w.jobs, duration, warmup)
        rec["wall_s"] = round(time.monotonic() - t0, 3)
        rec["results"] = results
        rec["gpm"] = gpm
        statuses = {r.get("status") for r in results.values()}
        if statuses == {"ok"} and all(r.get("iterations", 0) >= 2 for r in results.values()):
            rec["status"] = "ok"
            rec["reason"] = None
        else:
            bad = {j: r.get("error") or r.get("status") for j, r in results.items() if r.get("status") != "ok" or r.get("iterations", 0) < 2}
            rec["status"] = "oom" if "oom" in statuses else "failed"
            rec["reason"] = "; ".join(f"{j}: {e or 'too few iterations'}" for j, e in bad.items())
        if rec["status"] == "ok" and w.kind == "solo":
            j = w.jobs[0]
            solo_ms[(w.mode, j)] = results[j]["mean_ms"]
            if results[j].get("peak_memory_gib") is not None:
                solo_mem[(w.mode, j)] = results[j]["peak_memory_gib"]
        return rec
