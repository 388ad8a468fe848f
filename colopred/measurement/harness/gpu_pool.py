"""The real worker pool: one persistent process per job, MPS daemon in ``mps`` mode, GPM per window.

Also runs on the CPU with tiny models (``device="cpu", tiny=True``) so tests exercise
the same processes and protocol without a GPU.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from dataclasses import dataclass, field
from typing import Any

from ...constants import CONTEXT_OVERHEAD_GIB
from ...errors import GpuError, MissingExtra
from ...profile import instance_name, job_of
from ...runtime.outcome import memory_need_gib
from .mps import MPS_BASE_DIR, MpsDaemon
from .worker import worker_main

READY_TIMEOUT_S = 600.0
PRESTART_FRACTION = 0.3  # prestart workers while idle ones hold less than this share of GPU memory
MEMORY_BUDGET_FRACTION = 0.92  # share of GPU memory the pool plans to fill
NEW_WORKER_GIB = 2.0  # assumed start-up peak of a job never seen before


def refill_batch(evicted: list[str], peak_gib: dict[str, float], free_gib: float) -> list[str]:
    """Evicted jobs to restart beside a window's own start-ups, oldest eviction first: each
    while its start-up peak (solo peak + CUDA context) still fits in ``free_gib``.

    A parked worker warms up at its full peak before it parks, so jobs started together must
    fit together; restarting them in one parallel batch costs one start-up instead of one per
    later window that needs them.
    """
    out = []
    for j in evicted:
        need = memory_need_gib([peak_gib.get(job_of(j), NEW_WORKER_GIB)])
        if need <= free_gib:
            out.append(j)
            free_gib -= need
    return out


def cpu_blocks(jobs: tuple[str, ...], cpus) -> dict[str, tuple[int, ...]]:
    """Disjoint blocks of ``cpus`` (sorted, contiguous, sizes differing by at most one), one per job in order;
    with fewer CPUs than jobs each job gets one CPU, shared round-robin. Contiguous blocks keep a worker, its
    launch thread and its data-loader processes on neighbouring cores (``--pin-cpus``)."""
    cpus = sorted(cpus)
    if not jobs:
        return {}
    if not cpus:
        raise ValueError("no CPUs to pin the workers to")
    if len(cpus) < len(jobs):
        return {j: (cpus[i % len(cpus)],) for i, j in enumerate(jobs)}
    size, extra = divmod(len(cpus), len(jobs))
    out, start = {}, 0
    for i, j in enumerate(jobs):
        n = size + (i < extra)
        out[j] = tuple(cpus[start : start + n])
        start += n
    return out


def worker_key(member: str) -> str:
    """The worker a window's member runs on: a job's own (its solo windows' and its first copy's), or, for its
    k-th copy (``JOB#k``, k > 1), a worker of its own running the same job."""
    job = job_of(member)
    return job if member in (job, instance_name(job, 1)) else member


def _receive(w: "_Worker", deadline: float, clock) -> dict | None:
    """The worker's next message, or None if it exits or ``clock()`` passes ``deadline`` first."""
    while clock() < deadline:
        if w.conn.poll(0.5):
            try:
                return w.conn.recv()
            except EOFError:
                return None
        if not w.proc.is_alive():
            return None
    return None


@dataclass
class _Worker:
    job: str
    proc: Any
    conn: Any
    resident_gib: float = 0.0
    last_used: float = field(default_factory=time.monotonic)


class GpuWorkerPool:
    """Workers for one mode. Idle workers are evicted (least recently used first) when the
    memory they hold plus the next window's needs would not fit on the GPU."""

    def __init__(self, mode: str, jobs: tuple[str, ...], *, device: str = "cuda", tiny: bool = False,
                 mps_dir: str = MPS_BASE_DIR, use_nvml: bool = True, prestart: int = 4, park_idle: bool = False,
                 gpu_index: int | None = None, fake_gpu_uuid: str | None = None, commands: dict | None = None,
                 pin_cpus: bool = False, log=lambda s: None):
        self.mode = mode
        self.device = device
        self.tiny = tiny
        # Park idle workers: weights and optimizer state wait in host memory between windows,
        # so many workers stay resident (each keeps only its CUDA context on the GPU).
        self.park_idle = park_idle
        # Pin each zoo worker (and the processes it starts) to its own block of this process's CPUs, so the
        # scheduler does not move a launch-bound job's host thread between cores from one window to the next.
        self.cpus: dict[str, tuple[int, ...]] = cpu_blocks(tuple(jobs), os.sched_getaffinity(0)) if pin_cpus else {}
        self.pin_cpus = pin_cpus
        self.log = log
        self.ctx = mp.get_context("spawn")
        self.workers: dict[str, _Worker] = {}
        self.dead: dict[str, str] = {}
        self.peak_seen_gib: dict[str, float] = {}  # per job; survives a worker's eviction
        self.evicted: list[str] = []  # stopped to make room, oldest first; parked pools restart them in batches
        # Jobs that are commands (harness.commands.JobCommand by name), not zoo jobs; their declared peaks plan memory.
        self.commands = dict(commands or {})
        self.peak_seen_gib.update({j: c.peak_memory_gib for j, c in self.commands.items() if c.peak_memory_gib is not None})
        self.nvml = None
        self.gpu_name = None
        self.driver = None
        self.gpu_uuid = None
        # The GPU's index on its node (NVML's order; a shard of a multi-GPU campaign sees only this GPU, as CUDA's 0).
        self.gpu_index = gpu_index
        self.memory_gib = 1e9 if device == "cpu" else 80.0
        if fake_gpu_uuid is not None:  # tests: CPU workers standing for one GPU of a fake multi-GPU node
            if device != "cpu":
                raise GpuError("a fake GPU identity is for CPU workers only")
            self.gpu_name, self.gpu_uuid = "fake GPU (CPU workers)", fake_gpu_uuid
        if use_nvml:
            from ..nvml import Nvml

            self.nvml = Nvml(gpu_index or 0)
            self.gpu_name, self.driver, self.memory_gib = self.nvml.gpu_name, self.nvml.driver, self.nvml.memory_gib
            self.gpu_uuid = self.nvml.uuid
        self.mps: MpsDaemon | None = None
        self.mps_checked = False
        if mode == "mps":
            self.mps = MpsDaemon(mps_dir)
            self.mps.start()
            log(f"MPS daemon started (pipe {self.mps.pipe_dir})")
        # Build and warm up workers a few at a time, in parallel, before the first window, while
        # the idle workers hold less than PRESTART_FRACTION of the GPU (the rest start on demand).
        try:
            for i in range(0, len(jobs) if prestart else 0, max(prestart, 1)):
                if self.device != "cpu" and self._held_gib() > PRESTART_FRACTION * self.memory_gib:
                    log(f"prestarted {len(self.workers)} of {len(jobs)} workers; the others start on demand")
                    break
                self._ensure(tuple(jobs[i : i + prestart]))
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ workers
    def _spawn(self, key: str) -> _Worker:
        """A worker for ``key`` (a job, or ``JOB#k`` for a further copy of one: the same job in another process)."""
        job = job_of(key)
        if job in self.commands:  # a training command whose ProfileWindow speaks the worker protocol
            from .commands import spawn_command

            return _Worker(key, *spawn_command(self.ctx, self.commands[job]))
        parent, child = self.ctx.Pipe()
        # Not daemonic: input-bound (loader) jobs start DataLoader worker processes of their own.
        # The pool stops every worker in close(); the campaign runs in its own process group.
        p = self.ctx.Process(target=worker_main, args=(job, child, self.device, self.tiny),
                             kwargs={"park": self.park_idle, "cpus": self.cpus.get(key)}, daemon=False, name=f"colopred-{key}")
        p.start()
        child.close()
        return _Worker(key, p, parent)

    def _held_gib(self, exclude: tuple[str, ...] = ()) -> float:
        return sum(w.resident_gib + CONTEXT_OVERHEAD_GIB for j, w in self.workers.items() if j not in exclude)

    def _ensure(self, jobs: tuple[str, ...], extra: tuple[str, ...] = ()) -> dict[str, str]:
        """Start missing workers (in parallel, with ``extra`` ones that no window waits for). A
        worker of ``jobs`` that runs out of memory while it starts is tried once more after every
        idle worker is stopped. Returns {job: error} for failures of ``jobs``."""
        failed = self._start(jobs + extra)
        self.evicted = [j for j in self.evicted if j not in self.workers]
        failed = {j: e for j, e in failed.items() if j in jobs}  # an extra that failed is retried later
        oom = tuple(j for j, e in failed.items() if e.startswith("oom") and j not in self.dead)
        idle = [j for j in self.workers if j not in jobs]
        if oom and idle and self.device != "cpu":
            for j in idle:
                self._stop_worker(j)
            self.evicted += [j for j in idle if j not in self.evicted]
            self.log(f"stopped {len(idle)} idle workers to start {', '.join(oom)}")
            retried = self._start(oom)
            failed = {j: e for j, e in failed.items() if j not in oom} | retried
        return failed

    def _start(self, jobs: tuple[str, ...]) -> dict[str, str]:
        failed: dict[str, str] = {}
        new = []
        for j in jobs:
            if j in self.dead:
                failed[j] = self.dead[j]
            elif j not in self.workers:
                new.append(self._spawn(j))
        deadline = time.monotonic() + READY_TIMEOUT_S
        for w in new:
            msg = _receive(w, deadline, time.monotonic)
            if msg and msg.get("ready"):
                w.resident_gib = msg["resident_gib"]
                if msg.get("peak_memory_gib") is not None:  # a command reports its warm-up peak
                    self.peak_seen_gib[job_of(w.job)] = max(self.peak_seen_gib.get(job_of(w.job), 0.0), msg["peak_memory_gib"])
                self.workers[w.job] = w
                self.log(f"worker {w.job} ready (pid {msg['pid']}, {w.resident_gib:.2f} GiB resident)")
            else:
                err = (msg or {}).get("error") or f"worker exited (code {w.proc.exitcode}) before it was ready"
                tail = w.proc.tail() if msg is None and hasattr(w.proc, "tail") else ""  # a command: its last stderr line says why
                err += f": {tail}" if tail else ""
                status = (msg or {}).get("status", "error")
                self._kill(w)
                failed[w.job] = f"{status}: {err}"
                if status != "oom":  # an OOM at start-up may pass when the GPU is emptier
                    self.dead[w.job] = failed[w.job]
                self.log(f"worker {w.job} failed: {err}")
        if self.mps is not None and not self.mps_checked and self.workers:
            pids = self.mps.check_in_use()
            self.mps_checked = True
            self.log(f"MPS server in use (pid {', '.join(map(str, pids))})")
        return failed

    def _kill(self, w: _Worker) -> None:
        try:
            w.conn.close()
        except Exception:  # noqa: BLE001
            pass
        w.proc.join(timeout=5)
        if w.proc.is_alive():
            w.proc.kill()
            w.proc.join(timeout=5)

    def _make_room(self, jobs: tuple[str, ...]) -> None:
        if self.device == "cpu":
            return
        free = self._free_gib(jobs)
        idle = sorted((w for j, w in self.workers.items() if j not in jobs), key=lambda w: w.last_used)
        while idle and free < 0:
            w = idle.pop(0)
            free += w.resident_gib + CONTEXT_OVERHEAD_GIB
            self._stop_worker(w.job)
            self.evicted.append(w.job)
            self.log(f"stopped idle worker {w.job} to make room")

    def _window_need_gib(self, jobs: tuple[str, ...]) -> float:
        """GiB a window's jobs need while they run: a job's peak so far (any of its workers, or the
        campaign's solo records); unknown: a started worker already holds its memory, a new one is
        assumed to need NEW_WORKER_GIB."""
        return memory_need_gib([self.peak_seen_gib.get(job_of(j), 0.0 if j in self.workers else NEW_WORKER_GIB) for j in jobs])

    def _free_gib(self, jobs: tuple[str, ...]) -> float:
        """GiB of the pool's memory budget left once this window's jobs run beside the other workers."""
        return self.memory_gib * MEMORY_BUDGET_FRACTION - self._held_gib(exclude=jobs) - self._window_need_gib(jobs)

    def _refill(self, jobs: tuple[str, ...]) -> tuple[str, ...]:
        """Evicted workers to restart together with this window's own start-ups (parked pools only:
        a parked worker holds little more than its context once it is ready)."""
        if not (self.park_idle and self.evicted):
            return ()
        free = self._free_gib(jobs)
        cand = [j for j in self.evicted if j not in jobs and j not in self.workers and j not in self.dead]
        return tuple(refill_batch(cand, self.peak_seen_gib, free))

    def _stop_worker(self, job: str) -> None:
        w = self.workers.pop(job)
        try:
            w.conn.send({"cmd": "stop"})
        except Exception:  # noqa: BLE001
            pass
        self._kill(w)

    # ------------------------------------------------------------------ windows
    def run_window(self, members: tuple[str, ...], duration_s: float, warmup_s: float):
        """Run one window of ``members`` (jobs, or copies ``JOB#k`` of one): per-member results, GPM metrics."""
        keys = tuple(worker_key(m) for m in members)
        results, gpm = self._run_window(keys, duration_s, warmup_s)
        return {m: results[k] for m, k in zip(members, keys)}, gpm

    def _run_window(self, jobs: tuple[str, ...], duration_s: float, warmup_s: float):
        self._make_room(jobs)
        extra = self._refill(jobs)
        if extra:
            self.log(f"restarting {len(extra)} evicted workers with this window's: {', '.join(extra)}")
        failed = self._ensure(jobs, extra)
        if failed:
            return {j: ({"status": "error", "error": failed[j], "iterations": 0} if j in failed else {"status": "skipped", "iterations": 0})
                    for j in jobs}, None
        start_at = time.time() + (0.75 if self.park_idle else 0.25)  # parked workers move their state back first
        count_from = start_at + warmup_s
        end_at = start_at + duration_s
        for j in jobs:
            self.workers[j].conn.send({"cmd": "window", "start_at": start_at, "count_from": count_from, "end_at": end_at})
        gpm = self._sample_gpm(count_from, end_at)
        results: dict[str, dict] = {}
        deadline = end_at + 120.0
        for j in jobs:
            w = self.workers[j]
            res = _receive(w, deadline, time.time)
            if res is None:
                results[j] = {"status": "died", "error": f"worker exited (code {w.proc.exitcode}) during the window", "iterations": 0}
                self.workers.pop(j, None)
                self._kill(w)
            else:
                self.peak_seen_gib[job_of(j)] = max(self.peak_seen_gib.get(job_of(j), 0.0), res.get("peak_memory_gib") or 0.0)
                w.resident_gib = res.get("resident_gib") or w.resident_gib
                w.last_used = time.monotonic()
                results[j] = res
        return results, gpm

    def _sample_gpm(self, t_from: float, t_to: float) -> dict[str, float] | None:
        if self.nvml is None or not self.nvml.gpm_supported:
            d = t_to - time.time()
            if d > 0:
                time.sleep(d)
            return None
        d = t_from - time.time()
        if d > 0:
            time.sleep(d)
        s1 = self.nvml.sample()
        d = t_to - time.time()
        if d > 0:
            time.sleep(d)
        s2 = self.nvml.sample()
        try:
            return self.nvml.metrics(s1, s2)
        finally:
            self.nvml.free(s1)
            self.nvml.free(s2)

    def close(self) -> None:
        for j in list(self.workers):
            self._stop_worker(j)
        if self.mps is not None:
            self.mps.stop()
            self.log("MPS daemon stopped")
        if self.nvml is not None:
            self.nvml.close()


def make_pool_factory(**kwargs):
    """A ``PoolFactory`` for :meth:`Campaign.run` building :class:`GpuWorkerPool` objects."""

    def factory(mode: str, jobs: tuple[str, ...]) -> GpuWorkerPool:
        try:
            return GpuWorkerPool(mode, jobs, **kwargs)
        except (GpuError, MissingExtra):
            raise
        except Exception as e:  # noqa: BLE001
            raise GpuError(f"cannot start the worker pool: {e}") from e

    return factory
