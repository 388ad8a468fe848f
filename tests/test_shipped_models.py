"""The shipped models are what `colopred train` makes of the shipped data, and the report describes them."""

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from colopred.research.training import manifest_dataset, train
from colopred.runtime.features import FEATURES
from colopred.runtime.predictor import Predictor

from .conftest import DATA, ROOT

pytestmark = [pytest.mark.slow, pytest.mark.data]
MODELS = ROOT / "colopred" / "runtime" / "models"


@pytest.mark.parametrize("source", ["ncu", "nvml"])
@pytest.mark.parametrize("mode", ["timeslice", "mps"])
def test_retraining_on_the_shipped_data_gives_the_shipped_models(tmp_path, mode, source):
    """Training is deterministic (one thread, fixed seeds): retrained on datasets/h100, a model (for ncu profiles, and
    for GPM profiles from profiles/nvml) predicts every measured row as the committed one does, interval included."""
    shipped = Predictor.load(MODELS / f"h100-{mode}{'' if source == 'ncu' else '-' + source}.json")
    relabelled = bool(shipped.manifest.get("relabelled", False))  # the labels it was trained on (manifest_dataset)
    (path,) = train(DATA, tmp_path / "h100", modes=(mode,), with_metrics=False, profile_source=source, relabel=relabelled)
    new = Predictor.load(path)
    assert new.manifest["relabelled"] is relabelled
    assert path.name == Path(shipped.manifest["files"]["point"]["path"]).name.replace(".point.ubj", ".json")
    assert new.manifest["data_hash"] == shipped.manifest["data_hash"], "the shipped models were trained on other data"
    assert shipped.profile_source == new.profile_source == source
    assert new.manifest["baseline_coefs"] == pytest.approx(shipped.manifest["baseline_coefs"], rel=1e-12)
    rows = manifest_dataset(DATA, shipped.manifest).for_mode(mode)
    X = rows[list(FEATURES)].to_numpy()
    p_new, iv_new = new.model.predict_with_interval(X)
    p_old, iv_old = shipped.model.predict_with_interval(X)
    assert np.allclose(p_new, p_old, rtol=1e-9, atol=0) and np.allclose(iv_new, iv_old, rtol=1e-9, atol=0)


@pytest.mark.parametrize("report, suffix", [("h100", ""), ("h100-nvml", "-nvml")])
def test_the_report_gives_the_shipped_models_figures(report, suffix):
    """reports/h100/metrics.csv and reports/h100-nvml/metrics.csv (colopred evaluate, ncu and GPM profiles) and each
    manifest's metrics (colopred train) agree."""
    with open(ROOT / "reports" / report / "metrics.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["method"].startswith("colopred")]
    assert len(rows) == 8  # two modes, four splits
    for r in rows:
        man = json.loads((MODELS / f"h100-{r['mode']}{suffix}.json").read_text())
        for k in ("slowdown_mape_pct", "interval_coverage_pct"):
            assert float(r[k]) == pytest.approx(man["metrics"][r["split"]][k], rel=1e-9)
