"""The two-line helper that lets ``colopred profile run`` profile any training loop::

    from colopred.window import ProfileWindow
    win = ProfileWindow()                  # line 1
    for batch in loader:
        with win.step():                   # line 2
            train_step(batch)

Outside colopred it does nothing. Under ``colopred profile`` (environment variables
below) it skips ``COLOPRED_WARMUP`` iterations, then over ``COLOPRED_ITERS`` iterations
either brackets them with ``torch.cuda.profiler.start()/stop()`` (``COLOPRED_WINDOW=ncu``:
ncu runs with ``--profile-from-start off``) or times each one with a device
synchronisation (``COLOPRED_WINDOW=time``) or records them under ``torch.profiler`` with CUDA
activity and writes the Chrome trace to ``COLOPRED_TRACE`` (``COLOPRED_WINDOW=trace``: the solo
timeline ``colopred profile run`` takes the stream overlap from); it writes what it saw to
``COLOPRED_RESULT`` (JSON) and, with ``COLOPRED_EXIT=1``, ends the program.

Under ``colopred measure`` (``COLOPRED_WINDOW=worker``) the loop is a worker of the campaign's
pool, as the zoo's jobs are (:mod:`colopred.measurement.harness.worker`): after ``COLOPRED_WARMUP``
iterations it reports ready on the connection whose file descriptor is ``COLOPRED_WORKER_FD``, then
its ``step()`` blocks between windows and runs iterations only inside the windows the harness sends
(``{"cmd": "window", "start_at", "count_from", "end_at"}``, wall-clock times), timing those that start
after ``count_from`` and end before ``end_at``; on ``{"cmd": "stop"}`` or a closed connection it ends
the program. :meth:`ProfileWindow.epochs` lets a loop of a fixed number of epochs run as long as a
profiler or the harness needs.
"""

from __future__ import annotations

import contextlib
import json
import os
import itertools
import sys
import time
import traceback
from typing import Iterator


def error_text(e: BaseException) -> str:
    """A failure as one short line for a window record: the exception's class and the first line of its message."""
    return f"{e.__class__.__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"


class ProfileWindow:
    def __init__(self):
        self.mode = os.environ.get("COLOPRED_WINDOW")  # None | "ncu" | "time" | "trace" | "worker"
        self.warmup = int(os.environ.get("COLOPRED_WARMUP", "5" if self.mode == "worker" else "10"))
        self.iters = int(os.environ.get("COLOPRED_ITERS", "1" if self.mode == "ncu" else "30"))
        # a timed window also lasts at least this long (GPM sampling needs several counter intervals)
        self.min_seconds = float(os.environ.get("COLOPRED_MIN_SECONDS", "0"))
        self._done = False
        self.result_path = os.environ.get("COLOPRED_RESULT")
        self.exit_after = os.environ.get("COLOPRED_EXIT", "1") == "1"
        self.count = 0
        self.iter_ms: list[float] = []
        self.window_start = None
        self.trace_path = os.environ.get("COLOPRED_TRACE")
        self._profiler = None
        self._torch = None
        if self.mode is not None:
            import torch

            self._torch = torch if torch.cuda.is_available() else None
        self._worker = _HarnessLink(self) if self.mode == "worker" else None

    def epochs(self, n: int) -> Iterator[int]:
        """``range(n)`` outside colopred; under a profiler or ``colopred measure``, epochs without end (the
        profiler or the harness ends the program when it has its iterations)."""
        return iter(range(n)) if self.mode is None else itertools.count()

    def _sync(self) -> None:
        if self._torch is not None:
            self._torch.cuda.synchronize()

    @property
    def active(self) -> bool:
        return self.mode is not None and self.warmup <= self.count and not self._done

    @contextlib.contextmanager
    def step(self):
        if self.mode is None:
            yield
            return
        if self._worker is not None:
            with self._worker.step():
                yield
            return
        inside = self.active
        if self.count == self.warmup:
            self._sync()
            if self._torch is not None:
                self._torch.cuda.reset_peak_memory_stats()
            self.window_start = time.time()
            if self.mode == "ncu" and self._torch is not None:
                self._torch.cuda.profiler.start()
            if self.mode == "trace":
                self._start_trace()
        t0 = time.perf_counter()
        yield
        if inside and self.mode == "time":
            self._sync()
            self.iter_ms.append((time.perf_counter() - t0) * 1e3)
        self.count += 1
        if inside and self.count >= self.warmup + self.iters and (
                self.mode != "time" or time.time() - self.window_start >= self.min_seconds):
            self._done = True
            self._sync()
            if self.mode == "ncu" and self._torch is not None:
                self._torch.cuda.profiler.stop()
            if self._profiler is not None:
                self._profiler.__exit__(None, None, None)
                if self.trace_path:
                    self._profiler.export_chrome_trace(self.trace_path)
            self._finish()

    def _start_trace(self) -> None:
        """torch.profiler over the window, CUDA activity only (the kernels and runtime calls, no per-operator
        host events, which would slow a launch-bound job); without a GPU (tests) the CPU activity."""
        from torch.profiler import ProfilerActivity, profile

        self._profiler = profile(activities=[ProfilerActivity.CUDA if self._torch is not None else ProfilerActivity.CPU])
        self._profiler.__enter__()

    def _finish(self) -> None:
        t = self._torch
        result = {
            "mode": self.mode,
            "iterations": self.count - self.warmup,
            "iter_ms": self.iter_ms,
            "window_start": self.window_start,
            "window_end": time.time(),
            "peak_memory_gib": (t.cuda.max_memory_reserved() / 2**30) if t is not None else None,
            "gpu_name": t.cuda.get_device_name() if t is not None else None,
        }
        if self.result_path:
            from .io import write_text_atomic

            write_text_atomic(self.result_path, json.dumps(result))  # the profiler reads it whole or not at all
        if self.exit_after:
            sys.stdout.flush()
            raise SystemExit(0)


class _HarnessLink:
    """The worker side of ``colopred measure``'s protocol for a loop that is not a zoo job (see the module doc)."""

    def __init__(self, win: ProfileWindow):
        from multiprocessing.connection import Connection

        self.win = win
        self.conn = Connection(int(os.environ["COLOPRED_WORKER_FD"]))
        self.ready = False
        self.window: dict | None = None
        self.iter_ms: list[float] = []

    def _memory(self) -> dict:
        t = self.win._torch
        if t is None:
            return {"peak_memory_gib": None, "resident_gib": 0.0}
        t.cuda.synchronize()
        peak = t.cuda.max_memory_reserved() / 2**30
        t.cuda.empty_cache()
        return {"peak_memory_gib": peak, "resident_gib": t.cuda.memory_reserved() / 2**30}

    def _send(self, msg: dict) -> None:
        try:
            self.conn.send(msg)
        except (OSError, EOFError):  # the harness is gone
            raise SystemExit(0) from None

    def _next_window(self) -> None:
        """Block until the harness sends a window (then wait for its start) or stops the worker."""
        try:
            msg = self.conn.recv()
        except (EOFError, OSError):
            msg = {"cmd": "stop"}
        if msg.get("cmd") != "window":
            sys.stdout.flush()
            raise SystemExit(0)
        self.window = msg
        self.iter_ms = []
        if self.win._torch is not None:
            self.win._torch.cuda.reset_peak_memory_stats()
        delay = msg["start_at"] - time.time()
        if delay > 0:
            time.sleep(delay)

    def _end_window(self, status: str = "ok", error: str | None = None) -> None:
        from .measurement.harness.campaign import summarize_iterations

        self._send({"status": status, "error": error, **summarize_iterations(self.iter_ms), **self._memory()})
        self.window = None

    @contextlib.contextmanager
    def step(self):
        win = self.win
        if win.count >= win.warmup and not self.ready:
            self._send({"ready": True, "pid": os.getpid(), **self._memory()})
            self.ready = True
        while self.ready:
            if self.window is None:
                self._next_window()
            if time.time() < self.window["end_at"]:
                break
            self._end_window()
        t0 = time.time()
        try:
            yield
            win._sync()
        except Exception as e:  # reported like a zoo worker's failure; the program then ends
            oom = "out of memory" in str(e).lower()
            err = error_text(e)
            if self.window is not None:
                self._end_window("oom" if oom else "error", err)
            elif not self.ready:
                self._send({"ready": False, "status": "oom" if oom else "error", "error": err,
                            "trace": traceback.format_exc()[-2000:]})
            raise SystemExit(1) from None
        t1 = time.time()
        win.count += 1
        if self.window is not None and t0 >= self.window["count_from"] and t1 <= self.window["end_at"]:
            self.iter_ms.append((t1 - t0) * 1e3)
