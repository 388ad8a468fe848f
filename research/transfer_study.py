#!/usr/bin/env python3
"""The H100 -> H200 transfer study (research.transfer.run_study): reports/h200/transfer.md, tables, plots.

  PYTHONPATH=. python research/transfer_study.py [--h100 datasets/h100] [--h200 datasets/h200] [--out reports/h200]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from colopred.errors import InputError  # noqa: E402
from research.transfer import FRACTIONS, run_study  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--h100", default="datasets/h100", help="dataset folder of the GPU the shipped models know")
    ap.add_argument("--h200", default="datasets/h200", help="dataset folder of the new GPU")
    ap.add_argument("--out", default="reports/h200")
    ap.add_argument("--seeds", default="0,1,2", help="learning-curve fold seeds, comma separated")
    ap.add_argument("--fractions", default=",".join(map(str, FRACTIONS)))
    ap.add_argument("--folds", type=int, default=5)
    a = ap.parse_args(argv)
    try:
        seeds = [int(s) for s in a.seeds.split(",") if s]
        fractions = [float(f) for f in a.fractions.split(",") if f]
    except ValueError:
        print(f"transfer_study: --seeds and --fractions take comma-separated numbers, not {a.seeds!r} / {a.fractions!r}", file=sys.stderr)
        return 2
    if not fractions or any(not 0 < f <= 1 for f in fractions) or a.folds < 2:
        print("transfer_study: --fractions must lie in (0, 1] and --folds be at least 2", file=sys.stderr)
        return 2
    try:
        run_study(a.h100, a.h200, a.out, seeds=seeds, fractions=fractions, n_folds=a.folds, log=lambda s: print(s, flush=True))
    except InputError as e:
        print(f"transfer_study: {e}", file=sys.stderr)
        return 2
    print(f"wrote {a.out}/transfer.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
