#!/usr/bin/env python3
"""Benchmark: a scheduler's cold start. Each step runs N times in a fresh interpreter (a subprocess, wall clock from
its start to its exit), one step after the other in turn; prints the median, minimum and maximum of each.

  python scripts/bench_start.py [-n 15] [--python PATH] [--installed]

  import colopred      python -c "import colopred"
  default model        python -c "from colopred import Predictor; Predictor.default('mps')"
  first predict        the same, then Predictor.predict of two shipped profiles
  python alone         python -c "pass" (the interpreter's own start, for scale)

Wall time on a shared machine grows with its load; the CPU time (user + system, of the process and its threads)
hardly does: both are printed. ``--python``: the interpreter to time (default: this one), e.g. that of a fresh ``pip install colopred``
environment; ``--installed`` times the colopred that interpreter has installed (default: this checkout's, through
``PYTHONPATH``). The target: the default model loaded in well under a second.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:
    import resource
except ImportError:  # Windows
    resource = None  # type: ignore[assignment]

ROOT = Path(__file__).resolve().parents[1]
PROFILES = ROOT / "datasets" / "h100" / "profiles" / "ncu"

STEPS = {
    "python alone": "pass",
    "import colopred": "import colopred",
    "default model": "from colopred import Predictor; Predictor.default('mps')",
    "first predict": ("from colopred import JobProfile, Predictor; p = Predictor.default('mps'); "
                      f"a = JobProfile.from_json({str(PROFILES / 'resnet18-b64-fp32.json')!r}); "
                      f"b = JobProfile.from_json({str(PROFILES / 'gpt2_small-b8-bf16.json')!r}); p.predict([a, b])"),
}


def _children_cpu() -> float:
    if resource is None:  # Windows: no rusage
        return math.nan
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def once(python: str, code: str, env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one cold start."""
    cpu, t = _children_cpu(), time.perf_counter()
    r = subprocess.run([python, "-c", code], env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True)
    dt = time.perf_counter() - t
    if r.returncode:
        raise SystemExit(f"{code!r} failed:\n{r.stderr}")
    return dt, _children_cpu() - cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=15, help="cold starts of each step")
    ap.add_argument("--python", default=sys.executable, help="the interpreter to time")
    ap.add_argument("--installed", action="store_true", help="time its installed colopred, not this checkout's")
    a = ap.parse_args()
    env = dict(os.environ)
    if not a.installed:
        env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    for code in STEPS.values():  # once each, unmeasured: bytecode compiled, files in the page cache
        once(a.python, code, env)
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in STEPS}
    for _ in range(a.n):
        for name, code in STEPS.items():
            times[name].append(once(a.python, code, env))
    where = subprocess.run([a.python, "-c", "import colopred, xgboost; print(colopred.__file__, xgboost.__version__)"],
                           env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True).stdout.split()
    load = f", load average {os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else ""
    print(f"{a.python}: colopred from {Path(where[0]).parent}, xgboost {where[1]}; {a.n} cold starts each, "
          f"{os.cpu_count()} cores{load}")
    print(f"{'step':<18} {'median s':>9} {'min s':>7} {'max s':>7} {'median CPU s':>13}")
    for name, runs in times.items():
        wall = [w for w, _ in runs]
        cpu = statistics.median(c for _, c in runs)
        print(f"{name:<18} {statistics.median(wall):>9.3f} {min(wall):>7.3f} {max(wall):>7.3f} {cpu:>13.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
