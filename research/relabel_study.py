#!/usr/bin/env python3
"""What the re-measured host-bound labels do to the time-slicing model (issue 23, item 5; a study).

``datasets/h100/relabel/`` measures time-slicing sets holding a host-bound job three times in one run
(``research/relabel_status.py``). Here each such (set, job) gets one **relabelled** row
(``colopred.research.dataset.relabelled_rows``): the mean slowdown of its windows in that run, the job described by its
profile re-timed to the mean of its solo baselines there. Three training sets, one test set:

- ``training labels``: the time-slicing rows of ``datasets/h100`` as measured (``load_dataset(relabel=False)``: one row
  per window, other machines);
- ``relabelled``: the same rows, except that the sets re-measured have their relabelled rows instead
  (``dataset.replace_relabelled``: what ``load_dataset`` now trains on);
- ``both``: the rows as they are plus the relabelled rows (more data, old labels kept).

All are tested on the **relabelled** rows (so the comparison is of what each training set teaches, not of how noisy
the test labels are), split by split: a fold trains on the training set's rows outside it (leave-arch: no set holding
the held-out architecture; pairs -> triples: pairs; -> quads: pairs and triples), less those measured on the test
row's GPU (``reader.machine_key``: the re-measured rows of one chunk share a machine and a run), and predicts the test
rows inside it. The table gives MAPE per split, job class (host-bound: ncu busy < ``HOST_BOUND_BUSY``) and whether
the row's set was re-measured, mean over ``--seeds`` tree seeds. It also gives the shipped protocol's figure on each
training set tested on itself (what the report would say after adopting the labels; no machine guard).

  PYTHONPATH=. python research/relabel_study.py --seeds 3 --out reports/h100/relabel    # ~12 min on 2 cores
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colopred.research.dataset import load_dataset, relabelled_rows, replace_relabelled  # noqa: E402
from colopred.research.evaluation import machine_guarded, out_of_sample, point_predictor  # noqa: E402
from research.noise import HOST_BOUND_BUSY  # noqa: E402
from colopred.research.report import md_table  # noqa: E402

MODE = "timeslice"
KINDS = ("leave-arch", "pairs->triples", "pairs+triples->quads")


def cross_predictions(train: pd.DataFrame, test: pd.DataFrame, kind: str, seed: int) -> np.ndarray:
    """Out-of-fold predictions of ``test`` by models of ``train``, a test row never predicted by a model that saw a row
    of its GPU (the re-measured rows of a chunk share a machine and a run; the training rows as measured do not)."""
    return machine_guarded(train, test, kind, point_predictor(MODE, params={"random_state": seed}))


def ape_pct(measured: np.ndarray, pred: np.ndarray) -> np.ndarray:
    return 100 * np.abs(pred - measured) / measured


def seed_mean(apes: list[np.ndarray]) -> np.ndarray:
    """Mean absolute percentage error of each row over the seeds (NaN for a row no split tests)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # rows no fold tests: all-NaN, stay NaN
        return np.nanmean(apes, axis=0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT / "datasets/h100"))
    ap.add_argument("--relabel", default=str(ROOT / "datasets/h100/relabel"))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", default=None, help="folder for README.md and the tables (default: print only)")
    a = ap.parse_args()
    t0 = time.monotonic()
    ds = load_dataset(a.data, relabel=False)  # the labels as measured: the baseline the relabelled rows replace
    base = ds.for_mode(MODE)
    new = relabelled_rows(Path(a.relabel), ds.profiles)
    remeasured = set(new["set"])
    busy = {n: p.busy_fraction for n, p in ds.profiles.items()}
    relab = replace_relabelled(base, new)
    variants = {"training labels": base, "relabelled": relab, "both": pd.concat([base, new], ignore_index=True)}
    test = relab.assign(host_bound=relab["job"].map(busy) < HOST_BOUND_BUSY, remeasured=relab["set"].isin(remeasured))
    print(f"time-slicing rows: {len(base)} as measured; {len(remeasured)} sets re-measured -> {len(new)} relabelled rows "
          f"(replacing {int(base['set'].isin(remeasured).sum())}); {len(relab)} rows relabelled in all", flush=True)

    cross = []
    for kind in KINDS:
        for name, train in variants.items():
            apes = seed_mean([ape_pct(test["slowdown"].to_numpy(), cross_predictions(train, test, kind, s)) for s in range(a.seeds)])
            t = test.assign(ape=apes).dropna(subset=["ape"])
            for (hb, rm), g in t.groupby(["host_bound", "remeasured"]):
                cross.append({"split": kind, "trained on": name, "job": "host-bound" if hb else "saturating",
                              "set re-measured": bool(rm), "rows": len(g), "mape_pct": g["ape"].mean()})
            cross.append({"split": kind, "trained on": name, "job": "all", "set re-measured": None, "rows": len(t),
                          "mape_pct": t["ape"].mean()})
            print(f"  {kind} / {name}: {t['ape'].mean():.2f}% ({time.monotonic() - t0:.0f} s)", flush=True)
    cross = pd.DataFrame(cross)

    own = []
    for kind in KINDS:
        for name, df in variants.items():
            apes = seed_mean([ape_pct(df["slowdown"].to_numpy(), out_of_sample(df, kind, params={"random_state": s})) for s in range(a.seeds)])
            hb = df["job"].map(busy).to_numpy() < HOST_BOUND_BUSY
            ok = ~np.isnan(apes)
            own.append({"split": kind, "data": name, "rows": int(ok.sum()), "mape_pct": np.mean(apes[ok]),
                        "host-bound mape_pct": np.mean(apes[ok & hb]), "saturating mape_pct": np.mean(apes[ok & ~hb])})
    own = pd.DataFrame(own)

    wide = cross.pivot_table(index=["split", "job", "set re-measured"], columns="trained on", values="mape_pct", dropna=False)
    rows = cross.drop_duplicates(["split", "job", "set re-measured"]).set_index(["split", "job", "set re-measured"])["rows"]
    wide = wide.join(rows).dropna(subset=["relabelled"]).reset_index()
    wide["set re-measured"] = wide["set re-measured"].map({True: "yes", False: "no"}).fillna("all")
    wide = wide[["split", "job", "set re-measured", "rows", *variants]].astype({"rows": int})
    wide = wide.sort_values("split", key=lambda c: c.map(KINDS.index), kind="stable")
    print("\nTested on the relabelled rows (MAPE %):\n" + wide.round(2).to_string(index=False))
    print("\nEach training set tested on itself (the report's protocol):\n" + own.round(2).to_string(index=False))
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        wide.to_csv(out / "cross.csv", index=False)
        own.to_csv(out / "own.csv", index=False)
        chunks = sorted(new["campaign"].unique())
        text = (f"# Re-measured host-bound labels: what they teach (issue 23, item 5)\n\n"
                f"`PYTHONPATH=. python research/relabel_study.py --seeds {a.seeds} --out {a.out}` "
                f"({len(chunks)} chunks of `datasets/h100/relabel`: {', '.join(c.rsplit('-', 1)[1] for c in chunks)}; "
                f"{len(remeasured)} sets, {len(new)} relabelled rows replacing {int(base['set'].isin(remeasured).sum())}; "
                f"time-slicing; mean of {a.seeds} tree seeds). The script's docstring has the design, "
                "`datasets/h100/relabel/README.md` the campaign and what these figures say.\n\n"
                "## Tested on the relabelled rows (MAPE %)\n\n" + md_table(wide, digits=2) +
                "\n\n## Each training set tested on itself (the report's protocol, MAPE %)\n\n" + md_table(own, digits=2) + "\n")
        (out / "README.md").write_text(text)
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
