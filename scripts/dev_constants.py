#!/usr/bin/env python3
"""Re-choose the MPS baseline's cheap constants on the development architectures only (docs/model.md, "Honest protocol").

The wait gate's exponent (``WAIT_BUSY_GATE_EXPONENT``) and ε of the MPS share (``SHARE_EPS_US``) were chosen by
leave-architecture-out CV on every architecture. This script chooses them again from the same grids by the same CV
restricted to the development rows (sets without an architecture of ``datasets/h100/locked_split.json``), MPS only
(neither enters time-slicing), point models only, and prints the MAPE of each value. γ and the half-wave threshold of
``mps_wait_us`` are not re-chosen here: they need every profile rebuilt from its ncu report.

  python scripts/dev_constants.py [--data datasets/h100]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GATES = (1 / 3, 0.5, 0.7, 1.0, 2.0)
EPS_US = (1.0, 10.0)


def main() -> int:
    import colopred.runtime.baseline as baseline
    import colopred.runtime.features as features
    from colopred.research.dataset import load_dataset
    from colopred.research.evaluation import mape_pct, out_of_sample
    from colopred.research.protocol import is_locked, locked_architectures

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT / "datasets/h100"))
    a = ap.parse_args()
    locked = locked_architectures(a.data)

    def dev_mape() -> float:
        df = load_dataset(a.data).for_mode("mps")
        df = df[~is_locked(df, locked)].reset_index(drop=True)
        return mape_pct(df["slowdown"].to_numpy(), out_of_sample(df, "leave-arch"))

    shipped_gate, shipped_eps = baseline.WAIT_BUSY_GATE_EXPONENT, features.SHARE_EPS_US
    for g in GATES:
        baseline.WAIT_BUSY_GATE_EXPONENT = g
        print(f"WAIT_BUSY_GATE_EXPONENT {g:.3g}: development leave-arch MPS MAPE {dev_mape():.2f}%", flush=True)
    baseline.WAIT_BUSY_GATE_EXPONENT = shipped_gate
    for e in EPS_US:
        features.SHARE_EPS_US = e
        print(f"SHARE_EPS_US {e:g}: development leave-arch MPS MAPE {dev_mape():.2f}%", flush=True)
    features.SHARE_EPS_US = shipped_eps
    return 0


if __name__ == "__main__":
    sys.exit(main())
