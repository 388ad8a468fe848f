#!/usr/bin/env python3
"""Measure how long a small kernel of one process waits beside another process's kernels under MPS.

Checks the physics behind ``JobProfile.mps_wait_us`` directly: process A ("hog") loops one Triton
kernel whose grid size (waves) and per-block spin time are set; process B ("victim") launches a
one-block kernel and synchronises, many times, and records each launch-to-sync latency. The extra
latency over B alone is the wait. Predictions per scenario (kernel time t, block time b = t / waves):

  blocking_wait (old):  min(1, waves) · t / 2
  mps_wait (model):     [waves ≥ ½] · t^0.7 · b^0.3 / 2

Run on the GPU machine under MPS (the script starts and stops the daemon itself unless told not to):

  PYTHONPATH=. python3 research/mps_wait_probe.py --out $OUT/mps_wait_probe.json

GPU side only: needs torch with Triton; never changes clocks, power or compute mode.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

SCENARIOS = [  # name, waves, block spin µs (approximate; the measured kernel time is recorded)
    ("alone", 0, 0),
    ("0.3 wave, 1 ms blocks", 0.3, 1000),
    ("1 wave, 1 ms blocks", 1.0, 1000),
    ("8 waves, 125 us blocks", 8.0, 125),
    ("8 waves, 1 ms blocks", 8.0, 1000),
    ("2 waves, 500 us blocks", 2.0, 500),
]
NUM_WARPS = 4


def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def spin(out_ptr, n_iter):
        pid = tl.program_id(0)
        x = pid.to(tl.float32)
        for _ in range(n_iter):
            x = x * 0.999999 + 0.000001
        tl.store(out_ptr + pid, x)

    return spin


def blocks_per_sm() -> int:
    """Resident blocks of NUM_WARPS warps per SM: 64 warps and 32 blocks per SM on Hopper."""
    return min(32, 64 // NUM_WARPS)


def calibrate(spin, out, target_us: float) -> int:
    """Loop count giving a one-block kernel of about ``target_us``."""
    import torch

    n = 1000
    for _ in range(6):
        spin[(1,)](out, n, num_warps=NUM_WARPS)
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        spin[(1,)](out, n, num_warps=NUM_WARPS)
        e1.record()
        torch.cuda.synchronize()
        us = e0.elapsed_time(e1) * 1e3
        n = max(1, int(n * target_us / max(us, 1e-3)))
    return n


def hog(waves: float, block_us: float, seconds: float) -> None:
    import torch

    spin = _kernel()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    grid = max(1, round(waves * sms * blocks_per_sm()))
    out = torch.empty(grid, device="cuda")
    n = calibrate(spin, out, block_us)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    spin[(grid,)](out, n, num_warps=NUM_WARPS)
    e1.record()
    torch.cuda.synchronize()
    kernel_us = e0.elapsed_time(e1) * 1e3
    print(json.dumps({"grid": grid, "loops": n, "kernel_us": kernel_us, "sms": sms}), flush=True)
    end = time.time() + seconds
    while time.time() < end:
        for _ in range(4):
            spin[(grid,)](out, n, num_warps=NUM_WARPS)
        torch.cuda.synchronize()


def victim(seconds: float, delay_s: float) -> dict:
    import numpy as np
    import torch

    spin = _kernel()
    out = torch.empty(1, device="cuda")
    n = calibrate(spin, out, 5.0)
    time.sleep(delay_s)
    rng = np.random.default_rng()
    lat = []
    end = time.time() + seconds
    while time.time() < end:
        t0 = time.perf_counter()
        spin[(1,)](out, n, num_warps=NUM_WARPS)
        torch.cuda.synchronize()
        lat.append((time.perf_counter() - t0) * 1e6)
        time.sleep(rng.uniform(0, 200e-6))  # arrive at random phases of the hog's kernels
    a = np.array(lat)
    return {"n": len(a), "mean_us": float(a.mean()), "median_us": float(np.median(a)), "p90_us": float(np.quantile(a, 0.9))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--no-daemon", action="store_true", help="MPS is already running (or measure without MPS)")
    ap.add_argument("--scenarios", help="WAVES:BLOCK_US,... instead of the default scenarios (the victim alone comes first)")
    ap.add_argument("--role", choices=("hog", "victim"), help=argparse.SUPPRESS)
    ap.add_argument("--waves", type=float, default=0)
    ap.add_argument("--block-us", type=float, default=0)
    a = ap.parse_args()
    if a.role == "hog":
        hog(a.waves, a.block_us, a.seconds + 3)
        return 0
    if a.role == "victim":
        print(json.dumps(victim(a.seconds, 2.0)), flush=True)
        return 0
    env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY="/tmp/mps-pipe", CUDA_MPS_LOG_DIRECTORY="/tmp/mps-log")
    if not a.no_daemon:
        os.makedirs("/tmp/mps-pipe", exist_ok=True)
        os.makedirs("/tmp/mps-log", exist_ok=True)
        subprocess.run(["nvidia-cuda-mps-control", "-d"], env=env, check=True)
    scenarios = SCENARIOS
    if a.scenarios:
        pairs = [tuple(map(float, x.split(":"))) for x in a.scenarios.split(",")]
        scenarios = [SCENARIOS[0]] + [(f"{w:g} waves, {b:g} us blocks", w, b) for w, b in pairs]
    results = []
    try:
        for name, waves, block_us in scenarios:
            base = [sys.executable, __file__, "--out", a.out, "--seconds", str(a.seconds)]
            h = None
            if waves:
                h = subprocess.Popen(base + ["--role", "hog", "--waves", str(waves), "--block-us", str(block_us)], env=env,
                                     stdout=subprocess.PIPE, text=True)
            v = subprocess.run(base + ["--role", "victim"], env=env, capture_output=True, text=True, timeout=120)
            row = {"scenario": name, "waves": waves, "block_us_target": block_us}
            if h is not None:
                hout, _ = h.communicate(timeout=120)
                row.update(json.loads(hout.strip().splitlines()[0]))
            if v.returncode != 0:
                row["error"] = v.stderr[-500:]
            else:
                row.update({f"victim_{k}": x for k, x in json.loads(v.stdout.strip().splitlines()[-1]).items()})
            results.append(row)
            print(json.dumps(row), flush=True)
    finally:
        if not a.no_daemon:
            subprocess.run(["nvidia-cuda-mps-control"], input="quit\n", env=env, text=True)
    from colopred.measurement.profiling.ncu_profile import mps_wait_us

    alone = next((r.get("victim_mean_us") for r in results if r["scenario"] == "alone"), None)
    for r in results:
        if alone and "victim_mean_us" in r and "kernel_us" in r:
            t, w = r["kernel_us"], r["waves"]
            r["extra_us"] = r["victim_mean_us"] - alone
            r["blocking_wait_pred_us"] = min(1.0, w) * t / 2
            # the profile's formula for one kernel at full occupancy weight
            r["mps_wait_pred_us"] = mps_wait_us([t * 1e3], [w], [100.0])
    with open(a.out, "w") as f:
        json.dump(results, f, indent=1)
    for r in results:
        print(r["scenario"], {k: round(v, 1) for k, v in r.items() if isinstance(v, float)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
