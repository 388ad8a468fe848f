"""A persistent worker: one process per job, built and warmed up once, then running only
inside the time windows the coordinator sends it (GPU side; needs torch).

Protocol over a ``multiprocessing`` pipe:
  worker -> {"ready": True, "pid", "resident_gib"} | {"ready": False, "error"}
  coordinator -> {"cmd": "window", "start_at", "count_from", "end_at"}   (wall-clock times)
  A worker started with ``park=True`` keeps its job's weights and optimizer state in host
  memory between windows (GPU only).
  worker -> per-job result (see :func:`run_window`)
  coordinator -> {"cmd": "stop"}   (or the pipe closes: the worker exits)
"""

from __future__ import annotations

import os
import time
import traceback

from ...window import error_text


def run_window(job, start_at: float, count_from: float, end_at: float) -> dict:
    """Run iterations from ``start_at`` until ``end_at``; time the ones that start after
    ``count_from`` and finish before ``end_at`` (so every timed iteration overlaps the
    whole set's activity)."""
    import torch

    cuda = job.device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats(job.device)
    iter_ms: list[float] = []
    status, error = "ok", None
    delay = start_at - time.time()
    if delay > 0:
        time.sleep(delay)
    try:
        while True:
            t0 = time.time()
            if t0 >= end_at:
                break
            job.step()
            job.sync()
            t1 = time.time()
            if t0 >= count_from and t1 <= end_at:
                iter_ms.append((t1 - t0) * 1e3)
    except torch.cuda.OutOfMemoryError as e:
        status, error = "oom", str(e).splitlines()[0][:200]
    except Exception as e:  # noqa: BLE001 - reported, the campaign goes on
        status, error = "error", error_text(e)
    from .campaign import summarize_iterations

    out = {"status": status, "error": error, **summarize_iterations(iter_ms)}
    if cuda:
        out["peak_memory_gib"] = torch.cuda.max_memory_reserved(job.device) / 2**30
        job.optimizer.zero_grad(set_to_none=True)
        torch.cuda.empty_cache()
        out["resident_gib"] = torch.cuda.memory_reserved(job.device) / 2**30
    return out


def worker_main(job_name: str, conn, device: str = "cuda", tiny: bool = False, warmup_iters: int = 5, park: bool = False,
                cpus: tuple[int, ...] | None = None) -> None:
    """Entry point of a worker process; ``cpus``: run on these CPUs only, with as many torch threads."""
    try:
        if cpus:
            os.sched_setaffinity(0, cpus)
        import torch

        if cpus:
            torch.set_num_threads(len(cpus))

        from ..zoo.registry import JobSpec
        from ..zoo.training import build

        if device == "cpu":
            # Collocated CPU workers (tests) would otherwise each spin one OpenMP thread per core
            # and starve one another; on the GPU the host threads only launch kernels.
            torch.set_num_threads(1)
        job = build(JobSpec.parse(job_name), device, tiny=tiny)
        job.timed_steps(warmup_iters)
        if job.device.type == "cuda":
            job.optimizer.zero_grad(set_to_none=True)
            if park:
                job.park()
            torch.cuda.empty_cache()
            resident = torch.cuda.memory_reserved(job.device) / 2**30
        else:
            resident = 0.0
        conn.send({"ready": True, "pid": os.getpid(), "resident_gib": resident})
    except Exception as e:  # noqa: BLE001
        oom = "out of memory" in str(e).lower()
        conn.send({"ready": False, "status": "oom" if oom else "error",
                   "error": error_text(e),
                   "trace": traceback.format_exc()[-2000:]})
        return
    park = park and job.device.type == "cuda"
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            break
        if msg.get("cmd") == "window":
            if park:
                job.unpark()
            res = run_window(job, msg["start_at"], msg["count_from"], msg["end_at"])
            if park:
                job.park()
                res["resident_gib"] = torch.cuda.memory_reserved(job.device) / 2**30
            conn.send(res)
        else:
            break
