#!/usr/bin/env python3
"""Benchmark: parse an ncu report of N kernels (default 100,000) and build a profile.

The report is made by repeating the rows of a real H100 report (all its ~285 columns),
so it has the real width, units row, thousands separators and kernel names.

  python scripts/bench_parse.py [--kernels 100000] [--repeat 3]
"""

import argparse
import gzip
import statistics
import tempfile
import time
from pathlib import Path

from colopred.measurement.profiling.ncu_csv import read_ncu_csv
from colopred.measurement.profiling.ncu_profile import profile_from_ncu

SRC = Path(__file__).resolve().parents[1] / "datasets" / "h100" / "profiling_cost" / "resnet18-b64-fp32.kernel-full.csv.gz"


def make_report(n: int, path: Path) -> int:
    lines = gzip.open(SRC, "rt").read().splitlines()
    h = next(i for i, l in enumerate(lines) if l.startswith('"ID"'))
    pre, body = lines[: h + 2], lines[h + 2 :]
    with open(path, "w") as f:
        f.write("\n".join(pre) + "\n")
        for i in range(n):
            row = body[i % len(body)]
            f.write(f'"{i}"' + row[row.index(","):] + "\n")
    return path.stat().st_size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "report.csv"
        size = make_report(a.kernels, path)
        parse, total = [], []
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            rep = read_ncu_csv(path)
            t1 = time.perf_counter()
            profile_from_ncu(rep, name="bench", iteration_ms=rep.total_kernel_ms * 1.1)
            t2 = time.perf_counter()
            parse.append(t1 - t0)
            total.append(t2 - t0)
    print(f"| kernels | report MB | parse s (median of {a.repeat}) | parse + profile s | target |")
    print("|---|---|---|---|---|")
    ok = "met" if statistics.median(total) < 3 else "MISSED"
    print(f"| {a.kernels:,} | {size / 1e6:.0f} | {statistics.median(parse):.2f} | {statistics.median(total):.2f} | < 3 s: {ok} |")


if __name__ == "__main__":
    main()
