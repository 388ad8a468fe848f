#!/usr/bin/env python3
"""Check: the shipped models predict bit for bit alike under two XGBoost builds (e.g. ``xgboost`` and ``xgboost-cpu``).

Every shipped model (``colopred/runtime/models/*.json``) predicts every pair and every triple of the shipped profiles
of its source (``datasets/h100/profiles/ncu`` or ``nvml``): the point slowdowns (``Predictor.predict_index``), the
slowdowns and intervals of the feature rows (``SlowdownModel.predict_with_interval``) and the point trees' raw output
(the Booster's ``inplace_predict``). ``--out`` writes them; ``--against`` compares them, bit for bit (the float64
bytes), with a file another environment wrote:

  .venv-full/bin/python scripts/check_xgboost_build.py --out /tmp/full.npz          # pip install xgboost
  .venv-cpu/bin/python scripts/check_xgboost_build.py --against /tmp/full.npz       # pip install xgboost-cpu

``--installed`` reads the installed colopred instead of this checkout's (an older release's code, say). Prints one
line per model and array (rows, SHA-256 of the bytes, equal or not); exits 1 if any array differs.

Predicting is the same code in both builds (tree traversal). Training is not bit for bit: on the shipped data,
xgboost-cpu 3.2.0 (GCC 14) grows the time-slicing models' files byte for byte as xgboost 3.2.0 (GCC 10) does, but
the MPS point trees diverge part-way (from tree 89 of 300 in a plain fit on the MPS rows; the retrained model's
predictions up to 4% apart, median 0.3%) and the MPS GPM interval trees differ: reproducing the shipped models takes the full build (CONTRIBUTING.md, "How a constant is chosen").
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PROFILES = ROOT / "datasets" / "h100" / "profiles"


def predictions(max_triples: int | None) -> dict[str, np.ndarray]:
    """Arrays by ``MODEL/what`` for every shipped model."""
    from colopred.profile import load_profiles
    from colopred.runtime.features import feature_matrix, profile_matrix
    from colopred.runtime.manifest import shipped_models_dir
    from colopred.runtime.predictor import Predictor

    out: dict[str, np.ndarray] = {}
    for man in sorted(shipped_models_dir().glob("*.json")):
        pred = Predictor.load(man)
        source = pred.manifest.get("profile_source", "ncu")
        profiles = load_profiles(sorted((PROFILES / source).glob("*.json")))
        n = len(profiles)
        triples = list(itertools.combinations(range(n), 3))
        if max_triples is not None:
            triples = triples[:: max(1, len(triples) // max_triples)]
        pairs = np.array(list(itertools.combinations(range(n), 2)), dtype=np.int64)
        sets = np.full((len(pairs) + len(triples), 3), -1, dtype=np.int64)
        sets[: len(pairs), :2] = pairs
        sets[len(pairs):] = np.array(triples, dtype=np.int64)
        stem = man.name[:-5]
        out[f"{stem}/point"] = pred.predict_index(profiles, sets)["slowdown"].to_numpy(np.float64)
        X, set_of, pos = feature_matrix(profile_matrix(profiles), sets)
        jobs = [profiles[sets[s, p]].name for s, p in zip(set_of, pos)]
        s, iv = pred.model.predict_with_interval(X, jobs=jobs)
        out[f"{stem}/rows"] = np.asarray(s, np.float64)
        out[f"{stem}/interval"] = np.asarray(iv, np.float64)
        booster = pred.model.point_.get_booster()
        out[f"{stem}/trees"] = np.asarray(booster.inplace_predict(X[:, pred.model._cols].astype(np.float32)), np.float64)
    return out


def digest(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()[:16]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="write the arrays to this .npz")
    ap.add_argument("--against", help="compare with the arrays of this .npz, bit for bit")
    ap.add_argument("--installed", action="store_true", help="read the installed colopred, not this checkout's")
    ap.add_argument("--max-triples", type=int, default=None, help="every k-th triple, about this many (default: all)")
    a = ap.parse_args()
    if not a.installed:
        sys.path.insert(0, str(ROOT))
    import xgboost

    import colopred

    info = xgboost.build_info()
    print(f"colopred {colopred.__version__} from {Path(colopred.__file__).parent}; xgboost {xgboost.__version__} "
          f"(CUDA {info.get('USE_CUDA')}, NCCL {info.get('USE_NCCL')}) from {Path(xgboost.__file__).parent}")
    got = predictions(a.max_triples)
    if a.out:
        np.savez(a.out, **got)
    other = dict(np.load(a.against)) if a.against else {}
    bad = 0
    print(f"{'array':<36} {'values':>8} {'sha256':>16}  {'bit for bit' if other else ''}")
    for k, v in got.items():
        same = ""
        if other:
            ok = k in other and other[k].shape == v.shape and np.ascontiguousarray(other[k]).tobytes() == np.ascontiguousarray(v).tobytes()
            bad += not ok
            same = "equal" if ok else "DIFFERENT"
        print(f"{k:<36} {v.size:>8} {digest(v):>16}  {same}")
    missing = sorted(set(other) - set(got))
    if missing:
        print(f"missing here: {', '.join(missing)}")
        bad += len(missing)
    if other:
        print("all equal, bit for bit" if not bad else f"{bad} arrays differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
