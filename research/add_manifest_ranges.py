#!/usr/bin/env python3
"""Add ``max_set_size`` and ``feature_ranges`` (``colopred.research.training.experience``) to the shipped model
manifests, computed from the data they were trained on, without retraining: the model files and their checksums
do not change, and neither does any prediction (``tests/test_checks.py`` checks both).

  python research/add_manifest_ranges.py [--data datasets/h100] [--models colopred/runtime/models]
"""

import argparse
import json
from pathlib import Path

from colopred.io import write_text_atomic
from colopred.research.training import experience, manifest_dataset
from colopred.runtime.manifest import read_manifest, strict_json

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT / "datasets" / "h100"))
    ap.add_argument("--models", default=str(ROOT / "colopred" / "runtime" / "models"))
    a = ap.parse_args()
    data = {}
    for path in sorted(Path(a.models).glob("*.json")):
        man = read_manifest(path)
        key = (man.get("profile_source", "ncu"), bool(man.get("relabelled", False)))
        ds = data[key] = data.get(key) or manifest_dataset(a.data, man)  # the rows it was trained on
        if man.get("data_hash") != ds.data_hash:
            raise SystemExit(f"{path}: trained on other data (data_hash {man.get('data_hash')} != {ds.data_hash})")
        man = {k: v for k, v in man.items() if k not in ("max_set_size", "feature_ranges")}
        rows = ds.for_mode(man["mode"])
        man.update(experience(rows, [ds.profiles[j] for j in sorted(rows["job"].unique())]))
        write_text_atomic(path, json.dumps(strict_json(man), indent=1, allow_nan=False, default=str) + "\n")
        print(f"{path}: max_set_size {man['max_set_size']}, {len(man['feature_ranges'])} feature ranges")


if __name__ == "__main__":
    main()
