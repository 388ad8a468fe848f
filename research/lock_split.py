#!/usr/bin/env python3
"""Lock the final test split of the honest protocol (docs/model.md): a fixed group of architectures held out of every choice.

Rule: the architectures of the dataset's profiles, grouped by family (``colopred.measurement.zoo.registry.ARCH_FAMILY``,
cnn by default); from each family of at least two architectures, ⌈n/4⌉ drawn without replacement by
``numpy.random.default_rng(SEED)`` from the family's sorted list (families in sorted order). Families of one
architecture stay in development (holding one out would leave its kind unseen in development, a test of another
question). The draw is written once, with the rule and seed, to ``datasets/h100/locked_split.json``; every
constant or design chosen after it is chosen on the development architectures only (sets without a locked
architecture), and the locked sets (those with one) are used once, for the figure reported beside the development
one (``colopred.research.protocol``). The file records the architectures the draw was made over; ``--check`` redraws
over those, so architectures profiled after the lock join development and never move the locked group (adding a
second architecture to a family would otherwise shift the seeded draw of every family after it).

  python research/lock_split.py [--data datasets/h100] [--check]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SEED = 23  # the number, fixed before the draw
RULE = ("per family of >= 2 architectures (zoo registry ARCH_FAMILY, cnn by default), ceil(n/4) drawn by "
        "numpy.random.default_rng(23) from the family's sorted architectures, families in sorted order; "
        "one-architecture families stay in development")


def draw(archs: list[str]) -> list[str]:
    import numpy as np

    from colopred.measurement.zoo.registry import ARCH_FAMILY

    rng = np.random.default_rng(SEED)
    families: dict[str, list[str]] = {}
    for a in sorted(archs):
        families.setdefault(ARCH_FAMILY.get(a, "cnn"), []).append(a)
    locked = []
    for fam in sorted(families):
        members = families[fam]
        if len(members) >= 2:
            locked += [str(x) for x in rng.choice(members, size=math.ceil(len(members) / 4), replace=False)]
    return sorted(locked)


def main() -> int:
    from colopred.io import write_text_atomic
    from colopred.research.dataset import arch_of

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT / "datasets/h100"))
    ap.add_argument("--check", action="store_true", help="only check that the locked split is the rule's draw")
    a = ap.parse_args()
    archs = sorted({arch_of(f.stem) for f in (Path(a.data) / "profiles" / "ncu").glob("*.json")})
    path = Path(a.data) / "locked_split.json"
    if a.check:
        old = json.loads(path.read_text())
        drawn = draw(old["architectures"])
        if old["locked"] != drawn:
            print(f"lock_split: {path}: locked {old['locked']} is not the rule's draw {drawn} over its "
                  f"{len(old['architectures'])} architectures", file=sys.stderr)
            return 1
        missing = sorted(set(old["architectures"]) - set(archs))
        if missing:
            print(f"lock_split: {path}: architectures of the draw without a profile: {', '.join(missing)}", file=sys.stderr)
            return 1
        return 0
    if path.exists():
        print(f"lock_split: {path} exists: a locked split is drawn once (delete it only to start a new protocol)", file=sys.stderr)
        return 1
    locked = draw(archs)
    doc = {"rule": RULE, "seed": SEED, "architectures": archs, "locked": locked,
           "development": [x for x in archs if x not in locked]}
    write_text_atomic(path, json.dumps(doc, indent=1) + "\n")
    print(f"locked {', '.join(locked)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
