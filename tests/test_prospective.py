"""The prospective campaigns (datasets/h100/prospective: sets never trained on, measured after the models that
predict them) and the scripts that plan and score them (scripts/make_sets.py, research/prospective_check.py)."""

import shutil
import sys

import numpy as np

from colopred.measurement.harness.campaign import read_config
from colopred.measurement.harness.plan import expand_sets
from colopred.research.dataset import dataset_from, load_profiles_dir

from .conftest import DATA, ROOT, load_script, load_study

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


def test_the_h200_campaign_of_new_architectures_loads_from_h200_profiles_and_is_scored_as_unseen(tmp_path, monkeypatch):
    """datasets/h200/prospective/h200-c27 (sets of scripts/sets/h100-c27.txt measured on an H200, both modes): every
    member has an H200 ncu profile (its own folder or datasets/h200/profiles/ncu), every set of the sets file has a
    slowdown per job in each mode, and research/prospective_check.py scores the jobs the shipped models never trained
    on (dgcnn, gat, gru_lm) as new, by the manifest's jobs, from both profile folders."""
    import pandas as pd

    h200 = ROOT / "datasets" / "h200"
    folders = [h200 / "prospective" / "profiles" / "ncu", h200 / "profiles" / "ncu"]
    profiles = {}
    for f in folders:
        more = load_profiles_dir(f)
        assert not set(more) & set(profiles)
        profiles.update(more)
    assert all(p.gpu.name == "NVIDIA H200" for p in profiles.values())
    rows = dataset_from(h200 / "prospective" / "h200-c27", profiles, sorted(p for f in folders for p in f.glob("*.json"))).rows
    planned = set(expand_sets(str(ROOT / "scripts" / "sets" / "h100-c27.txt"), []))
    for mode in ("mps", "timeslice"):
        got = rows[rows["mode"] == mode]
        assert {tuple(sorted(s.split("+"))) for s in got["set"]} == {tuple(sorted(s)) for s in planned}
        assert set(got.groupby("window_id").size()) <= {2, 3} and np.isfinite(got["slowdown"]).all()
    out = tmp_path / "out"
    script = load_study("prospective_check")
    shipped = ROOT / "colopred" / "runtime" / "models"
    # the working tree's shipped models stand for a commit's (no git history needed)
    monkeypatch.setattr(script, "models_at", lambda rev, folder: [shutil.copy(f, folder) for f in shipped.iterdir() if f.is_file()])
    monkeypatch.setattr(sys, "argv", ["prospective_check", "--models-from", "working-tree", "--data", str(h200 / "prospective"),
                                      "--campaigns-dir", str(h200 / "prospective"), "--campaigns", "h200-c27",
                                      "--extra-profiles", str(folders[1]), "--out", str(out)])
    assert script.main() == 0
    per_job = pd.read_csv(out / "per_job.csv")
    new = set(per_job.loc[per_job["new_to_models"], "job"])
    assert new == {"gru_lm-b32-fp32", "dgcnn-b32-fp32", "dgcnn-b16-bf16", "gat-b256-bf16", "gat-b4096-fp32"}
    table = pd.read_csv(out / "prospective.csv")
    assert set(table["mode"]) == {"mps", "timeslice"} and (table["new_jobs"] == 5).all()
