#!/usr/bin/env python3
"""Study, on the development architectures only (the sets without a locked architecture): should the interval's width
scale with each row's predicted slowdown, as p̂^c, and with which c per mode and class of target job? The design and
the rule, fixed before the first run: ``research.interval_rules.slowdown_scale`` (the growth beyond the
trained sizes as it stands: ``constants.INTERVAL_SIZE_EXPONENTS``). The study writes its table and verdict; applying a
chosen c (``constants``, retraining, re-choosing a) is a separate step.

  PYTHONPATH=. python research/dev_slowdown_scale.py [--data datasets/h100] [--profiles ncu] [--out FOLDER]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colopred.io import write_csv_atomic, write_text_atomic  # noqa: E402
from colopred.research.dataset import load_dataset  # noqa: E402
from research.interval_rules.slowdown_scale import cells, choose, predictions  # noqa: E402
from colopred.research.protocol import is_locked, locked_architectures  # noqa: E402
from colopred.research.report import md_table  # noqa: E402

MODES = ("timeslice", "mps")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT / "datasets" / "h100"))
    ap.add_argument("--profiles", default="ncu", choices=("ncu", "nvml"))
    ap.add_argument("--out", default=str(ROOT / "reports" / "h100" / "intervals" / "slowdown_scale"))
    a = ap.parse_args()
    t0 = time.time()
    ds = load_dataset(a.data, profile_source=a.profiles)
    locked = locked_architectures(ds.root)
    dev = {}
    for mode in MODES:
        df = ds.for_mode(mode)
        dev[mode] = df[~is_locked(df, locked)].reset_index(drop=True)
    pred = predictions(dev, source=ds.profile_source, timeline=ds.timeline,
                       log=lambda line: print(f"{line}: {time.time() - t0:.0f} s", flush=True))
    table = cells(pred)
    chosen, obj = choose(table)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    shown = out.resolve().relative_to(ROOT) if out.resolve().is_relative_to(ROOT) else out
    wide = table.pivot_table(index=["mode", "cls", "cell"], columns="c", values="coverage_pct").reset_index()
    rows = table[table["c"] == 0.0].set_index(["mode", "cls", "cell"])["rows"]
    wide.insert(3, "rows", [int(rows[(m, k, e)]) for m, k, e in zip(wide["mode"], wide["cls"], wide["cell"])])
    wide.columns = [f"c={x:+g}" if isinstance(x, float) else x for x in wide.columns]
    objective = obj.pivot_table(index=["mode", "cls"], columns="c", values="objective").reset_index()
    objective.columns = [f"c={x:+g}" if isinstance(x, float) else x for x in objective.columns]
    write_csv_atomic(table, out / "coverage.csv", index=False)
    write_text_atomic(out / "README.md", "\n".join([
        "# Interval width by predicted slowdown (a study, development rows)", "",
        f"`PYTHONPATH=. python research/dev_slowdown_scale.py --profiles {a.profiles} --out {shown}` (data hash "
        f"`{ds.data_hash}`; {time.time() - t0:.0f} s). The design and the rule: `research/interval_rules/slowdown_scale.py`. Coverage (%) "
        "of the 90% interval on the development rows, by the exponent c of the per-row scale p̂^c:", "",
        md_table(wide.round(1)), "",
        "Objective (mean |coverage − 90| over the six cells of each mode and class):", "",
        md_table(objective.round(2)), "",
        f"Chosen by the rule: {chosen}.", ""]))
    print(f"chosen (rule in the docstring): {chosen} ({time.time() - t0:.0f} s)\nwrote {out}")


if __name__ == "__main__":
    main()
