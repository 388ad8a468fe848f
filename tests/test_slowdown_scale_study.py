"""The rule of interval_rules.slowdown_scale (which per-row slowdown scale of the interval each class takes)."""

import numpy as np
import pandas as pd

from research.interval_rules import slowdown_scale as study


def _predictions(widths: dict[float, float], mode="mps", busy=1.0, n=400, seed=0):
    """Rows of the three splits whose log error grows with the slowdown (|r| ∝ p̂), given each c's log half-width
    factor k (interval p̂·e^{±k·p̂^c})."""
    rng = np.random.default_rng(seed)
    out = []
    for split in study.SPLITS:
        pred = rng.uniform(1.0, 4.0, n)
        r = rng.normal(0.0, 0.04, n) * pred
        for c, k in widths.items():
            w = k * pred ** c
            out.append(pd.DataFrame({"mode": mode, "c": c, "split": split, "t_busy": busy, "slowdown": pred * np.exp(r),
                                     "pred": pred, "lo": pred * np.exp(-w), "hi": pred * np.exp(w)}))
    return pd.concat(out, ignore_index=True)


def test_cells_are_the_random_quartiles_and_the_extrapolating_splits():
    table = study.cells(_predictions({0.0: 0.165}))
    assert set(table["cell"]) == {"random q1", "random q2", "random q3", "random q4", "pairs->triples", "pairs+triples->quads"}
    q = table[table["cell"].str.startswith("random")].set_index("cell")
    assert q["rows"].sum() == 400 and (q["rows"] == 100).all()
    # one width for errors that grow with p̂: the lowest quartile over-covered, the highest under-covered
    assert q.loc["random q1", "coverage_pct"] > 95 > q.loc["random q4", "coverage_pct"]


def test_a_scale_that_follows_the_error_is_chosen_and_a_small_gain_is_not():
    # c = 1 matches |r| ∝ p̂ (width 0.066·p̂ covers ~90% of N(0, 0.04·p̂)); c = 0 cannot cover every quartile
    table = study.cells(_predictions({0.0: 0.165, 1.0: 0.066}))
    chosen, obj = study.choose(table)
    assert chosen == {"mps": {"saturating": 1.0}}
    by_c = obj.set_index("c")["objective"]
    assert by_c[1.0] < by_c[0.0] - study.MIN_GAIN_POINTS
    # the same width at both c: no gain, 0 stays
    same = _predictions({0.0: 0.165}, seed=1)
    same = pd.concat([same, same.assign(c=1.0)], ignore_index=True)
    assert study.choose(study.cells(same))[0] == {"mps": {"saturating": 0.0}}
