"""One shard of a multi-GPU campaign on a fake GPU (no torch): ``python -m tests.fake_gpu_shard OUT SHARD GPU DELAY_S``.

The coordinator tests start this in place of ``colopred measure --shard``: the same Campaign code, lock and record
file, with :class:`FakeGpu` windows that take ``DELAY_S`` each, so a test can kill a shard in the middle."""

from __future__ import annotations

import math
import sys
import time

from colopred.measurement.harness.campaign import Campaign

from .test_harness import SOLO_MS, FakePool


class FakeGpu(FakePool):
    """GPU ``index`` of a fake node: solo times 10% slower per index (so a baseline taken from another GPU gives a
    wrong slowdown), collocated times by FakePool's physics, x ``bias`` on this GPU, and a deterministic repeat
    noise of up to ``noise`` (relative) that differs between windows."""

    def __init__(self, mode, jobs, index=0, bias=1.0, noise=0.0, delay_s=0.0, **kw):
        super().__init__(mode, jobs, **kw)
        self.gpu_index, self.gpu_uuid, self.gpu_name = index, f"GPU-fake-{index}", "fake GPU"
        self.bias, self.noise, self.delay_s, self.n = bias, noise, delay_s, 0

    def run_window(self, jobs, duration_s, warmup_s):
        if self.delay_s:
            time.sleep(self.delay_s)
        self.n += 1
        f = 1.0 + 0.5 * (len(jobs) - 1) * (0.5 if self.mode == "mps" else 1.0)  # FakePool's physics
        out = {}
        for i, j in enumerate(jobs):
            t = solo_ms(j, self.gpu_index) * f * (1.0 if len(jobs) == 1 else self.bias * (1 + self.noise * math.sin(self.n * 2.3 + i)))
            out[j] = {"status": "ok", "iterations": 20, "mean_ms": t, "median_ms": t, "peak_memory_gib": 1.0}
        return out, {"dram_bw_util_pct": 10.0}


SOLO = {**SOLO_MS, "e-b1-fp32": 15.0, "f-b1-fp32": 25.0, "g-b1-fp32": 8.0, "h-b1-fp32": 30.0}


def solo_ms(job: str, index: int) -> float:
    """A job's solo iteration ms on fake GPU ``index``."""
    return SOLO[job] * (1 + 0.1 * index)


if __name__ == "__main__":
    out, shard, gpu, delay = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    Campaign(out, None, resume=True, shard=shard).run(lambda m, j: FakeGpu(m, j, index=gpu, delay_s=delay))
