"""The re-labelling study of host-bound time-slicing labels (scripts/relabel_status.py, scripts/relabel_study.py) on
the chunks measured on the H100 (datasets/h100/relabel)."""

import importlib.util
import shutil
from pathlib import Path

import numpy as np
import pytest

from colopred.measurement.harness import reader as R
from colopred.research.dataset import load_profiles_dir

ROOT = Path(__file__).parents[1]
RELABEL = ROOT / "datasets" / "h100" / "relabel"
CHUNK = "h100-c16t-20"  # the smallest chunk measured: 72 windows


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def chunk_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("relabel")
    shutil.copytree(RELABEL / CHUNK, d / CHUNK)
    return d


def test_each_relabelled_row_is_the_mean_of_its_windows_in_the_run(chunk_dir):
    """One row per (set, job) of the chunk: the mean of the slowdowns of its three windows, the job described by its
    profile re-timed to the mean of its solo baselines there."""
    study = _script("relabel_study")
    profiles = load_profiles_dir(ROOT / "datasets" / "h100" / "profiles" / "ncu")
    rows = study.relabelled_rows(chunk_dir, profiles)
    w = R.read_windows(chunk_dir / CHUNK)
    sl = R.slowdown_table(w)
    assert set(sl["mode"]) == {"timeslice"}
    per = sl.groupby(["set", "job"]).agg(slowdown=("slowdown", "mean"), solo_ms=("solo_ms", "mean"), n=("slowdown", "size"))
    assert len(rows) == len(per) and (per["n"] == 3).all()
    got = rows.set_index(["set", "job"]).loc[per.index]
    assert np.allclose(got["slowdown"], per["slowdown"]) and (got["windows"] == 3).all()
    # re-timed: a member's own iteration time feature is its mean solo baseline there
    assert np.allclose(got["t_log_iter_ms"], np.log(per["solo_ms"]))
    # the three members of one set share a synthetic window (so set features see all of them)
    assert rows.groupby("window_id")["job"].size().eq(rows["n_jobs"].groupby(rows["window_id"]).first()).all()


def test_relabel_status_label_table_gives_the_standard_error_of_each_mean(chunk_dir):
    status = _script("relabel_status")
    w = R.read_windows(chunk_dir / CHUNK)
    lab = status.label_table(w)
    sl = R.slowdown_table(w)
    one = lab.iloc[0]
    s = sl[(sl["set"] == one["set"]) & (sl["job"] == one["job"])]["slowdown"]
    assert one["n"] == len(s) == 3
    assert one["mean"] == pytest.approx(s.mean())
    assert one["se_pct"] == pytest.approx(100 * s.std() / s.mean() / np.sqrt(3))
