"""The base install predicts and places without scikit-learn, pandas, matplotlib, torch or nvidia-ml-py; each
command that needs an extra says which in one line; the extras hold what the tests and the commands need."""

import subprocess
import sys
import tomllib

import pytest

from .conftest import DATA, ROOT

TOML = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = TOML["project"]
OPTIONAL = ("sklearn", "pandas", "matplotlib", "torch", "pynvml")


def _name(req: str) -> str:
    """A requirement's distribution name (before any version, extra or marker)."""
    for sep in "<>=!~;[ ":
        req = req.split(sep)[0]
    return req.strip().lower()


def _hiding(modules, body: str) -> subprocess.CompletedProcess:
    """Run ``body`` in a fresh interpreter in which importing any of ``modules`` fails, as where they are not installed."""
    hide = ("import sys, importlib.abc\n"
            "class Hide(importlib.abc.MetaPathFinder):\n"
            "    def find_spec(self, name, path, target=None):\n"
            f"        if name.split('.')[0] in {tuple(modules)!r}: raise ImportError(f'No module named {{name!r}}', name=name)\n"
            "sys.meta_path.insert(0, Hide())\n")
    return subprocess.run([sys.executable, "-c", hide + body], capture_output=True, text=True, cwd=ROOT)


def test_the_base_install_holds_what_predicting_and_placing_need_and_nothing_for_gpus_or_plots():
    base = {_name(r) for r in PROJECT["dependencies"]}
    assert base == {"numpy", "pandas", "xgboost-cpu", "xgboost"}
    markers = {_name(r): r.split(";", 1)[1].strip() for r in PROJECT["dependencies"] if ";" in r}
    # the CPU build where it has wheels (Linux, Windows), the full build on macOS: never both in one environment
    assert markers == {"xgboost-cpu": "sys_platform != 'darwin'", "xgboost": "sys_platform == 'darwin'"}
    extras = {k: {_name(r) for r in v} for k, v in PROJECT["optional-dependencies"].items()}
    assert {"torch", "nvidia-ml-py"} <= extras["gpu"] and extras["plots"] == {"matplotlib"}
    assert {"scikit-learn", "scipy", "matplotlib"} <= extras["research"]
    for extra in ("plots", "research", "serve", "postgres"):  # the tests import all of them
        assert extras[extra] <= extras["test"], extra
    assert "nvidia-ml-py" in extras["test"] and not extras["test"] & {"xgboost", "torch"}


def test_loading_the_default_model_and_predicting_import_neither_scikit_learn_nor_pandas():
    code = ("from colopred import JobProfile, Predictor\n"
            f"a = JobProfile.from_json({str(DATA / 'profiles/ncu/resnet18-b64-fp32.json')!r})\n"
            f"b = JobProfile.from_json({str(DATA / 'profiles/ncu/gpt2_small-b8-bf16.json')!r})\n"
            "pred = Predictor.default('mps')\n"
            "p = pred.predict([a, b])\n"
            "print(p.slowdown[0] > 1, pred.pack([a, b], n_gpus=2).placed, len(p.explain().jobs))\n")
    r = _hiding(OPTIONAL, code)
    assert r.returncode == 0 and r.stdout.split() == ["True", "2", "2"], r.stdout + r.stderr


def test_fitting_without_the_research_extra_names_it():
    r = _hiding(("sklearn",), "from colopred import SlowdownModel\nimport numpy as np\nSlowdownModel(mode='mps').fit(np.zeros((4, 50)), np.ones(4))\n")
    assert r.returncode == 1 and 'SlowdownModel.fit needs the research extra (sklearn is missing): pip install "colopred[research]"' in r.stderr


@pytest.mark.parametrize("argv, extra, module", [
    (["train", "--data", str(DATA), "--out", "/nonexistent/m"], "research", "sklearn"),
    (["evaluate", "--data", str(DATA)], "research", "sklearn"),
    (["simulate", "--data", str(DATA)], "research", "sklearn"),
])
def test_a_command_whose_extra_is_missing_says_so_in_one_line(argv, extra, module):
    r = _hiding((module,), f"from colopred.cli import main\nprint('rc', main({argv!r}))\n")
    assert r.returncode == 0 and r.stdout.strip() == "rc 2", r.stdout + r.stderr
    line = f'colopred: error: colopred {argv[0]} needs the {extra} extra ({module} is missing): pip install "colopred[{extra}]"'
    assert r.stderr.strip() == line


def test_a_missing_extra_met_deep_in_a_command_is_one_line_too():
    """Where the module is first wanted inside the work (NVML under measure), the command still says which extra."""
    from colopred.errors import MissingExtra

    e = MissingExtra("pynvml", what="NVML sampling")
    assert e.extra == "gpu" and e.exit_code == 2
    assert e.line("colopred measure") == 'colopred measure needs the gpu extra (pynvml is missing): pip install "colopred[gpu]"'


def test_the_estimator_contract_holds_without_inheriting_scikit_learn():
    from sklearn.base import is_regressor

    from colopred import SlowdownModel

    m = SlowdownModel(mode="mps", interval=False)
    assert is_regressor(m) and repr(m) == "SlowdownModel(interval=False, mode='mps')"
    assert m.set_params(offset=0.3) is m and m.get_params()["offset"] == 0.3
    with pytest.raises(ValueError, match="invalid parameter"):
        m.set_params(nonsense=1)
