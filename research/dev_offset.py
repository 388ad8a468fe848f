#!/usr/bin/env python3
"""Choose ``constants.TREE_TARGET_OFFSET`` on the development architectures only: do the trees scale the whole slowdown
or only the interference (docs/model.md, "The trees")?

The shipped model is s = s_base·e^f: the trees' correction multiplies the job's own time as well as the interference
its co-runners add. Measured pair slowdowns compose additively into a saturating job's slowdown in a larger set
(``research/pair_additivity.py``), and a correction learnt on a pair then scales only one co-runner's interference; a
multiplicative correction on the whole slowdown does not add up that way (on pairs → triples, time-slicing, saturating
jobs beside a host-bound co-runner are predicted 8% low). ``estimator.compose`` has s = 1 − c + (s_base − 1 + c)·e^f,
fitted by the squared log error: c = 1 is the shipped model, c → 0 scales the interference alone.

Each (c, classes) of ``GRID`` is tried on the development rows (sets without an architecture of
``datasets/h100/locked_split.json``), both modes, on leave-arch, pairs → triples and pairs and triples → four-job
sets, point models only, ``--seeds`` tree seeds; classes ``none``, every target job takes c, or ``host_bound``,
host-bound targets (busy < ``HOST_BOUND_BUSY``) keep c = 1. **Rule, fixed before the first run**: per mode, a variant
with c < 1 replaces c = 1 only if its mean MAPE over the seeds lowers leave-arch or pairs → triples by more than that
split's seed spread at c = 1 (max − min over the seeds) and raises none of the three splits by more than its spread;
among those, the least mean of the three splits wins. The first run had classes ``none`` alone: it lowered the
saturating jobs' errors and raised the host-bound jobs' (whose interference is super-additive), and no c passed; the
``host_bound`` variants were added after it, under the same rule. With ``--locked`` the chosen value (and c = 1) is then tested once on the
locked rows (fitted on development rows and split as the report's "Honest protocol").

  PYTHONPATH=. python research/dev_offset.py [--data datasets/h100] [--seeds 3] [--locked] [--out FOLDER]
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

from colopred.constants import HOST_BOUND_BUSY, TREE_TARGET_OFFSET, TREE_TARGET_OFFSET_CLASSES  # noqa: E402
from colopred.io import write_csv_atomic, write_text_atomic  # noqa: E402
from colopred.research.dataset import load_dataset  # noqa: E402
from colopred.research.evaluation import mape_pct, out_of_sample, point_predictor  # noqa: E402
from colopred.research.protocol import is_locked, locked_architectures, locked_tests  # noqa: E402
from colopred.research.report import md_table  # noqa: E402

GRID = ((1.0, "none"),) + tuple((c, k) for k in ("none", "host_bound") for c in (0.5, 0.25, 0.1, 0.02))
MODES = ("timeslice", "mps")
KINDS = ("leave-arch", "pairs->triples", "pairs+triples->quads")


def variant(c: float, classes: str) -> str:
    """A variant's label: ``c`` and, under ``host_bound``, ``/sat`` (host-bound targets keep c = 1)."""
    return f"{c:g}" + ("/sat" if classes == "host_bound" and c != 1.0 else "")


def dev_table(ds, seeds: int, log=print) -> pd.DataFrame:
    """MAPE % of every (mode, split, c, seed, job class) on the development rows."""
    locked = locked_architectures(ds.root)
    rows = []
    t0 = time.monotonic()
    for mode in MODES:
        df = ds.for_mode(mode)
        dev = df[~is_locked(df, locked)].reset_index(drop=True)
        hb = dev["t_busy"].to_numpy() < HOST_BOUND_BUSY
        for c, classes in GRID:
            for seed in range(seeds):
                for kind in KINDS:
                    p = out_of_sample(dev, kind, params={"random_state": seed}, source=ds.profile_source,
                                      timeline=ds.timeline, model_kw={"offset": c, "offset_classes": classes})
                    s = dev["slowdown"].to_numpy()
                    for label, sel in (("all", np.ones(len(s), bool)), ("saturating", ~hb), ("host-bound", hb)):
                        rows.append({"mode": mode, "split": kind, "variant": variant(c, classes), "seed": seed,
                                     "jobs": label, "mape_pct": mape_pct(s[sel], p[sel])})
            log(f"{mode} {variant(c, classes)}: done ({time.monotonic() - t0:.0f} s)")
    return pd.DataFrame(rows)


def choose(t: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, float]]:
    """The per-(mode, split, c) mean and seed spread of the all-jobs MAPE, and the rule's choice per mode."""
    a = t[t["jobs"] == "all"]
    g = a.groupby(["mode", "split", "variant"], sort=False)["mape_pct"].agg(mean="mean", spread=lambda x: x.max() - x.min()).reset_index()
    chosen = {}
    for mode, m in g.groupby("mode", sort=False):
        ref = m[m["variant"] == "1"].set_index("split")
        ok = []
        for c, mc in m[m["variant"] != "1"].groupby("variant"):
            mc = mc.set_index("split")
            gain = ref["mean"] - mc["mean"]  # positive: c lowers the error
            if ((gain > ref["spread"])[["leave-arch", "pairs->triples"]].any() and (-gain <= ref["spread"]).all()):
                ok.append((mc["mean"].mean(), c))
        chosen[mode] = min(ok)[1] if ok else "1"
    return g, chosen


def locked_table(ds, variants: dict[str, list[str]]) -> pd.DataFrame:
    """MAPE % on the locked rows of models fitted on the development rows (tree seed 0), split as the report's locked
    figures (``protocol.locked_tests``: on leave-arch no test row's job was seen)."""
    locked = locked_architectures(ds.root)
    rows = []
    for mode, vs in variants.items():
        df = ds.for_mode(mode).reset_index(drop=True)
        s, hb_all = df["slowdown"].to_numpy(), df["t_busy"].to_numpy() < HOST_BOUND_BUSY
        for v in vs:
            kw = {"offset": float(v.split("/")[0]), "offset_classes": "host_bound" if v.endswith("/sat") else "none"}
            fit_predict = point_predictor(mode, source=ds.profile_source, timeline=ds.timeline, model_kw=kw)
            for kind, te, folds in locked_tests(df, locked):
                p = np.empty(len(te))
                for pos, fit_rows in folds:
                    p[pos] = fit_predict(df.iloc[fit_rows], df.iloc[te[pos]])
                hb = hb_all[te]
                for label, sel in (("all", np.ones(len(te), bool)), ("saturating", ~hb), ("host-bound", hb)):
                    rows.append({"mode": mode, "split": kind, "variant": v, "jobs": label, "rows": int(sel.sum()),
                                 "mape_pct": mape_pct(s[te][sel], p[sel])})
    return pd.DataFrame(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT / "datasets/h100"))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--locked", action="store_true", help="test the chosen value once on the locked rows")
    ap.add_argument("--out", default=None, help="folder for README.md and the tables (default: print only)")
    a = ap.parse_args()
    ds = load_dataset(a.data)
    t = dev_table(ds, a.seeds)
    g, chosen = choose(t)
    by_class = t.groupby(["mode", "split", "jobs", "variant"], sort=False)["mape_pct"].mean().unstack("variant").reset_index()
    by_class.columns = [str(c) for c in by_class.columns]
    print("\nDevelopment MAPE % (mean over seeds) by c:\n" + by_class.round(2).to_string(index=False))
    print("\nMean and seed spread, all jobs:\n" + g.round(3).to_string(index=False))
    print(f"\nchosen (rule in the docstring): {chosen}; shipped {TREE_TARGET_OFFSET} ({TREE_TARGET_OFFSET_CLASSES})")
    lk = None
    if a.locked:
        lk = locked_table(ds, {m: ["1"] + ([v] if v != "1" else []) for m, v in chosen.items()})
        lk = lk.pivot_table(index=["mode", "split", "jobs"], columns="variant", values="mape_pct", sort=False).reset_index()
        lk.columns = [str(c) for c in lk.columns]
        print("\nLocked MAPE % (fitted on development rows):\n" + lk.round(2).to_string(index=False))
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        write_csv_atomic(t, out / "dev.csv", index=False)
        text = (f"# Trees on the whole slowdown or on the interference, chosen on the development architectures\n\n"
                f"`PYTHONPATH=. python research/dev_offset.py --seeds {a.seeds}{' --locked' if a.locked else ''} --out {a.out}` "
                f"(data hash `{ds.data_hash}`). The script's docstring has the design and the rule. s = 1 − c + (s_base − 1 + c)·e^f; "
                "c = 1 is the shipped model; `/sat`: host-bound targets keep c = 1.\n\nDevelopment MAPE % (mean of the seeds), all "
                "jobs and per class of target job:\n\n"
                + md_table(by_class, digits=2) + "\n\nAll jobs, mean and spread over the seeds:\n\n" + md_table(g, digits=3)
                + f"\n\nChosen by the rule: {', '.join(f'{m} {v}' for m, v in chosen.items())}.\n")
        if lk is not None:
            text += "\nLocked rows, one fit on the development rows (tree seed 0), MAPE %:\n\n" + md_table(lk, digits=2) + "\n"
        write_text_atomic(out / "README.md", text)
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
