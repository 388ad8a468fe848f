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
synchronisation (``COLOPRED_WINDOW=time``); it writes what it saw to ``COLOPRED_RESULT``
(JSON) and, with ``COLOPRED_EXIT=1``, ends the program.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time


class ProfileWindow:
    def __init__(self):
        self.mode = os.environ.get("COLOPRED_WINDOW")  # None | "ncu" | "time"
        self.warmup = int(os.environ.get("COLOPRED_WARMUP", "10"))
        self.iters = int(os.environ.get("COLOPRED_ITERS", "1" if self.mode == "ncu" else "30"))
        self.result_path = os.environ.get("COLOPRED_RESULT")
        self.exit_after = os.environ.get("COLOPRED_EXIT", "1") == "1"
        self.count = 0
        self.iter_ms: list[float] = []
        self.window_start = None
        self._torch = None
        if self.mode is not None:
            import torch

            self._torch = torch if torch.cuda.is_available() else None

    def _sync(self) -> None:
        if self._torch is not None:
            self._torch.cuda.synchronize()

    @property
    def active(self) -> bool:
        return self.mode is not None and self.warmup <= self.count < self.warmup + self.iters

    @contextlib.contextmanager
    def step(self):
        if self.mode is None:
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
        t0 = time.perf_counter()
        yield
        if inside and self.mode == "time":
            self._sync()
            self.iter_ms.append((time.perf_counter() - t0) * 1e3)
        self.count += 1
        if self.count == self.warmup + self.iters:
            self._sync()
            if self.mode == "ncu" and self._torch is not None:
                self._torch.cuda.profiler.stop()
            self._finish()

    def _finish(self) -> None:
        t = self._torch
        result = {
            "mode": self.mode,
            "iterations": self.iters,
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
