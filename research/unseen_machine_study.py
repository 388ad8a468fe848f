#!/usr/bin/env python3
"""The reported figures on a GPU the model never saw (issue 23, item 3: an honest protocol; a study).

The report's splits hold out architectures or set sizes, but the training rows of a fold include rows measured on the
same machine (GPU, run) as the test rows: the co-runners' behaviour there, the host's speed. A user predicts on their
own GPU, which no training row comes from. Here each split is computed twice on ``datasets/h100``, colopred alone, no
intervals: as the report does (``evaluation.out_of_sample``), and **machine-guarded** (``evaluation.machine_guarded``:
the rows of each test machine predicted by a model fitted without any row of that machine; a machine is a GPU UUID,
else a campaign's segment, so two UUID-less segments of one GPU count as two machines and the guard is, if anything,
too lenient). MAPE per split, mode and job class (host-bound: ncu busy < ``HOST_BOUND_BUSY``), mean over ``--seeds``.

  PYTHONPATH=. python research/unseen_machine_study.py --seeds 1 --out reports/h100/unseen_machine   # ~3 min, 2 cores
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colopred.constants import MODES  # noqa: E402
from colopred.measurement.harness.reader import machine_key  # noqa: E402
from colopred.research.dataset import load_dataset  # noqa: E402
from colopred.research.evaluation import machine_guarded, out_of_sample, point_predictor  # noqa: E402
from research.noise import HOST_BOUND_BUSY  # noqa: E402
from colopred.research.report import md_table  # noqa: E402

KINDS = ("leave-arch", "pairs->triples", "pairs+triples->quads")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT / "datasets/h100"))
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--out", default=None, help="folder for README.md and table.csv (default: print only)")
    a = ap.parse_args()
    t0 = time.monotonic()
    ds = load_dataset(a.data)
    busy = {n: p.busy_fraction for n, p in ds.profiles.items()}
    rows = []
    for mode in MODES:
        df = ds.for_mode(mode)
        hb = df["job"].map(busy).to_numpy() < HOST_BOUND_BUSY
        measured = df["slowdown"].to_numpy()
        for kind in KINDS:
            ape = {}
            for name, predict in (("as reported", lambda s: out_of_sample(df, kind, params={"random_state": s})),
                                  ("unseen machine", lambda s: machine_guarded(df, df, kind, point_predictor(mode, params={"random_state": s})))):
                ape[name] = np.mean([100 * np.abs(predict(s) - measured) / measured for s in range(a.seeds)], axis=0)
            ok = ~np.isnan(ape["as reported"]) & ~np.isnan(ape["unseen machine"])
            for cls, sel in (("all", ok), ("host-bound", ok & hb), ("saturating", ok & ~hb)):
                rows.append({"mode": mode, "split": kind, "jobs": cls, "rows": int(sel.sum()),
                             "as reported": ape["as reported"][sel].mean(), "unseen machine": ape["unseen machine"][sel].mean()})
            print(f"{mode} {kind}: {rows[-3]['as reported']:.2f}% as reported, {rows[-3]['unseen machine']:.2f}% on an unseen "
                  f"machine ({time.monotonic() - t0:.0f} s)", flush=True)
    table = pd.DataFrame(rows)
    table["difference"] = table["unseen machine"] - table["as reported"]
    print("\n" + table.round(2).to_string(index=False))
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        table.to_csv(out / "table.csv", index=False)
        machines = {m: int(machine_key(ds.for_mode(m)).nunique()) for m in MODES}
        (out / "README.md").write_text(
            "# The reported figures on a GPU the model never saw\n\n"
            f"`PYTHONPATH=. python research/unseen_machine_study.py --seeds {a.seeds} --out {a.out}` (`datasets/h100`, "
            f"data hash {ds.data_hash}; machines: {machines}; colopred alone, no intervals, mean of {a.seeds} tree "
            "seed(s)). The script's docstring has the design. MAPE %:\n\n" + md_table(table, digits=2) + "\n")
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
