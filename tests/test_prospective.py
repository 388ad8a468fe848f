"""The prospective campaigns (datasets/h100/prospective: sets never trained on, measured after the models that
predict them) and the scripts that plan and score them (scripts/make_sets.py, scripts/prospective_check.py)."""

import sys

import numpy as np

from colopred.measurement.harness.campaign import read_config
from colopred.measurement.harness.plan import expand_sets
from colopred.research.dataset import dataset_from, load_profiles_dir

from .conftest import DATA, ROOT, load_script

PROSPECTIVE = DATA / "prospective"


def _training_sets() -> set[tuple[str, ...]]:
    done = set()
    for f in (DATA / "campaigns").glob("*/campaign.json"):
        done |= {tuple(sorted(s)) for s in read_config(f)[0].sets}
    return done


def test_make_sets_with_overlapping_lists_never_lists_a_job_twice(tmp_path, monkeypatch):
    jobs = "a-b1-fp32,b-b1-fp32,c-b1-fp32,d-b1-fp32"
    seen = tmp_path / "seen.txt"
    seen.write_text("a-b1-fp32+b-b1-fp32\n")
    out = tmp_path / "sets.txt"
    monkeypatch.setattr(sys, "argv", ["make_sets", "--new", jobs, "--old", jobs, "--pairs", "10", "--triples", "10",
                                      "--exclude", str(seen), "-o", str(out)])
    load_script("make_sets").main()
    sets = [line.split("+") for line in out.read_text().splitlines() if not line.startswith("#")]
    assert sets and all(len(set(s)) == len(s) for s in sets)
    assert ["a-b1-fp32", "b-b1-fp32"] not in sets
    # four jobs have 6 pairs (one excluded) and 4 triples: every one not excluded, once
    assert sorted(len(s) for s in sets) == [2] * 5 + [3] * 4
    assert len({tuple(s) for s in sets}) == len(sets)


def test_prospective_sets_were_never_trained_on():
    planned = set(expand_sets(str(ROOT / "scripts" / "sets" / "h100-p1.txt"), []))
    assert len(planned) == 60
    assert not planned & _training_sets()


def test_prospective_campaigns_load_with_every_set_and_a_slowdown_per_job():
    pdir = DATA / "profiles" / "ncu"
    profiles = load_profiles_dir(pdir)
    trained = _training_sets()
    for name, mode in (("h100-p1", "mps"), ("h100-p1t", "timeslice")):
        rows = dataset_from(PROSPECTIVE / name, profiles, sorted(pdir.glob("*.json"))).rows
        assert set(rows["mode"]) == {mode}
        assert rows["set"].nunique() == 60
        assert not {tuple(sorted(s.split("+"))) for s in rows["set"]} & trained
        assert (rows["slowdown"] > 0.8).all() and np.isfinite(rows["slowdown"]).all()
        # one row per job of each window: pairs give two, triples three
        per_window = rows.groupby("window_id").size()
        assert set(per_window) <= {2, 3}
