import csv
import functools
import gzip
import importlib.util
import io
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "datasets" / "h100"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SAMPLE = FIXTURES / "ncu_resnet18_b64_h100.csv.gz"  # copy of shared/samples, recorded on our H100
# Real ncu reports recorded on our H100 (datasets/h100/ncu_reports, profiling_cost).
FULL_REPORT = DATA / "profiling_cost" / "resnet18-b64-fp32.kernel-full.csv.gz"
MINIMAL_REPORT = DATA / "ncu_reports" / "lstm_lm-b64-fp32.csv.gz"


def load_script(name: str, folder: str = "scripts"):
    """The module of ``FOLDER/NAME.py`` (an operator's script, or a study's), for testing its pure functions."""
    spec = importlib.util.spec_from_file_location(name, ROOT / folder / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_study(name: str):
    """The module of the study ``research/NAME.py`` (research/README.md lists them)."""
    return load_script(name, "research")


@functools.cache
def shipped_dataset(relabel: bool = True, profile_source: str = "ncu"):
    """``load_dataset(DATA, ...)``, read once per test process: tests only read it (filter, never assign)."""
    from colopred.research.dataset import load_dataset

    return load_dataset(DATA, relabel=relabel, profile_source=profile_source)


FEW_TREES = 40
"""Trees per forest in tests of the model's mechanics (intervals and their calibration, offsets, manifests, splits,
the studies' bookkeeping): what they assert holds for any forest, and 40 trees fit in a fraction of the time of the
shipped 300. Tests of the shipped models' accuracy, and the slow tier's reproductions, keep ``constants.TREE_PARAMS``."""


@pytest.fixture
def few_trees(monkeypatch):
    """Every SlowdownModel fitted in the test grows :data:`FEW_TREES` trees (its other settings the shipped ones)."""
    from colopred.runtime import estimator

    monkeypatch.setattr(estimator, "TREE_PARAMS", {**estimator.TREE_PARAMS, "n_estimators": FEW_TREES})


@pytest.fixture
def report_text():
    """The text of a real full-metric ncu report."""
    return gzip.open(FULL_REPORT, "rt").read()


@pytest.fixture
def write(tmp_path):
    def _write(name: str, text: str) -> Path:
        p = tmp_path / name
        p.write_text(text)
        return p

    return _write


def with_cell(report_text: str, metric: str, value: str, row: int) -> str:
    """A real ncu report's text with one cell replaced: column ``metric`` of the ``row``-th line after the header
    (1 is the units row), written back with ncu's quoting."""
    lines = report_text.splitlines()
    h = next(i for i, l in enumerate(lines) if l.startswith('"ID"'))
    cells = next(csv.reader([lines[h + row]]))
    cells[next(csv.reader([lines[h]])).index(metric)] = value
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="").writerow(cells)
    lines[h + row] = buf.getvalue()
    return "\n".join(lines) + "\n"
