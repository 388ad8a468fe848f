"""The package's shape: what the runtime may import, one version, strict-JSON files, the estimator contract."""

import ast
import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone

from colopred import __version__
from colopred.runtime.estimator import SlowdownModel
from colopred.runtime.features import FEATURES

from .conftest import DATA, ROOT

PKG = ROOT / "colopred"
# What a scheduler imports: the runtime and the value types it uses.
RUNTIME = [PKG / "runtime", PKG / "profile.py", PKG / "gpu.py", PKG / "errors.py", PKG / "io.py", PKG / "schema.py", PKG / "constants.py", PKG / "__init__.py"]
FORBIDDEN_FOR_RUNTIME = ("colopred.measurement", "colopred.research", "colopred.cli", "torch", "pynvml")


def _modules(paths):
    for p in paths:
        yield from (sorted(p.rglob("*.py")) if p.is_dir() else [p])


def _imports(path: Path) -> set[str]:
    """Absolute names of every module ``path`` imports (relative imports resolved against its package)."""
    rel = path.relative_to(ROOT).with_suffix("")
    package = list(rel.parts[:-1])
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
                out.add(name)
                out |= {f"{name}.{a.name}" for a in node.names}
            else:
                out.add(node.module)
    return out


def test_runtime_imports_nothing_from_measurement_research_or_cli():
    bad = {}
    for f in _modules(RUNTIME):
        hits = sorted(i for i in _imports(f) if i.startswith(FORBIDDEN_FOR_RUNTIME))
        if hits:
            bad[str(f.relative_to(ROOT))] = hits
    assert not bad, bad


def test_the_package_never_imports_the_studies():
    """``research/`` (the studies, outside the package) is not installed: nothing in colopred/ may import it."""
    bad = {str(f.relative_to(ROOT)): hits for f in _modules([PKG])
           if (hits := sorted(i for i in _imports(f) if i == "research" or i.startswith("research.")))}
    assert not bad, bad


SERVICE = [PKG / "service", PKG / "client.py"]
SERVE_EXTRA = ("fastapi", "starlette", "uvicorn", "prometheus_client", "pydantic", "psycopg")


def test_the_service_is_a_thin_layer_over_the_runtime():
    """The service and its client import the runtime and the value types only (never the GPU side, the zoo, the
    research code or the CLI); the runtime, the value types and the CLI's module level never import the service or
    its framework, so everything but `colopred serve` works without the serve extra."""
    bad = {}
    for f in _modules(SERVICE):
        hits = sorted(i for i in _imports(f) if i.startswith(FORBIDDEN_FOR_RUNTIME))
        if hits:
            bad[str(f.relative_to(ROOT))] = hits
    for f in _modules(RUNTIME):
        hits = sorted(i for i in _imports(f) if i.startswith(("colopred.service", "colopred.client", *SERVE_EXTRA)))
        if hits:
            bad[str(f.relative_to(ROOT))] = hits
    for f in _modules([PKG / "cli"]):
        top = ast.parse(f.read_text()).body  # the CLI imports the service inside the command that runs it
        hits = sorted(i for node in top if isinstance(node, (ast.Import, ast.ImportFrom))
                      for i in ([a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""])
                      if i.startswith(("colopred.service", *SERVE_EXTRA)) or i.startswith("service"))
        if hits:
            bad[str(f.relative_to(ROOT))] = hits
    assert not bad, bad


def test_predicting_and_the_cli_work_without_the_serve_extra():
    hide = ("import sys, importlib.abc\n"
            "class Hide(importlib.abc.MetaPathFinder):\n"
            f"    def find_spec(self, name, path, target=None):\n"
            f"        if name.split('.')[0] in {SERVE_EXTRA!r}: raise ImportError(f'No module named {{name!r}}', name=name)\n"
            "sys.meta_path.insert(0, Hide())\n")
    code = hide + ("from colopred import JobProfile, Predictor\n"
                   f"a = JobProfile.from_json({str(DATA / 'profiles/ncu/resnet18-b64-fp32.json')!r})\n"
                   f"b = JobProfile.from_json({str(DATA / 'profiles/ncu/gpt2_small-b8-bf16.json')!r})\n"
                   "assert Predictor.default('mps').predict([a, b]).slowdown[0] > 1\n"
                   "from colopred.cli import main\n"
                   "rc = main(['serve', '--port', '1'])\n"
                   "print('rc', rc)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and r.stdout.strip() == "rc 2", r.stdout + r.stderr
    assert r.stderr.strip().count("\n") == 0 and 'pip install "colopred[serve]"' in r.stderr, r.stderr


def test_measurement_never_imports_research_cli_or_xgboost():
    """The GPU side runs from the working tree on machines without XGBoost."""
    bad = {}
    for f in _modules([PKG / "measurement", PKG / "window.py"]):
        hits = sorted(i for i in _imports(f) if i.startswith(("colopred.research", "colopred.cli", "xgboost"))
                      or i in ("colopred.runtime.predictor", "colopred.runtime.estimator", "colopred.runtime.manifest"))
        if hits:
            bad[str(f.relative_to(ROOT))] = hits
    assert not bad, bad


def test_a_scheduler_predicting_loads_no_gpu_harness_zoo_or_research_code():
    code = ("import sys, colopred; from colopred import JobProfile, Predictor; "
            f"a = JobProfile.from_json({str(DATA / 'profiles/ncu/resnet18-b64-fp32.json')!r}); "
            f"b = JobProfile.from_json({str(DATA / 'profiles/ncu/gpt2_small-b8-bf16.json')!r}); "
            "p = Predictor.default('mps').predict([a, b]); assert p.slowdown[0] > 1; "
            "print(sorted(m for m in sys.modules if m.startswith(('colopred.', 'torch', 'pynvml'))))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    loaded = eval(r.stdout)
    assert loaded and all(m.startswith(("colopred.runtime", "colopred.profile", "colopred.gpu", "colopred.errors", "colopred.io", "colopred.schema",
                                        "colopred.constants")) for m in loaded), loaded


def _module_graph() -> dict[str, set[str]]:
    """Module -> the colopred modules it imports anywhere in its text (inside functions and ``TYPE_CHECKING``
    blocks too): ``from P import n`` is an edge to the module ``P.n`` where there is one, else to ``P``."""
    files = {}
    for f in _modules([PKG]):
        parts = list(f.relative_to(ROOT).with_suffix("").parts)
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    graph = {}
    for name, f in files.items():
        package = name.split(".") if f.name == "__init__.py" else name.split(".")[:-1]
        targets = set()
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = (".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
                        if node.level else node.module)
                targets |= {f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names}
        edges = set()
        for t in targets:
            parts = t.split(".")
            while parts and ".".join(parts) not in files:
                parts.pop()
            if parts and ".".join(parts) != name:
                edges.add(".".join(parts))
        graph[name] = edges
    return graph


def _a_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` (its modules in order, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        path.append(v)
        for w in sorted(graph[v]):
            if state.get(w) == 1:
                return path[path.index(w):] + [w]
            if w not in state and (found := visit(w)):
                return found
        state[v] = 2
        path.pop()
        return None

    for v in sorted(graph):
        if v not in state and (found := visit(v)):
            return found
    return None


def test_no_module_of_the_package_imports_itself_through_a_circle():
    """One module owns each definition: no chain of imports in colopred/ comes back to where it started, counting
    imports made inside functions and for type checking only."""
    graph = _module_graph()
    assert len(graph) > 50 and "colopred.runtime.predictor" in graph["colopred.cli.common"]
    circle = _a_circle(graph)
    assert circle is None, " -> ".join(circle)
    assert _a_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]  # the finder finds one


def test_the_version_lives_in_one_place():
    assert metadata.version("colopred") == __version__
    r = subprocess.run([sys.executable, "-m", "colopred", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == f"colopred {__version__}"
    toml = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in toml and '\nversion = "' not in toml


def _strict(text: str):
    def refuse(name):
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def test_shipped_manifests_and_profiles_are_strict_json():
    files = sorted((PKG / "runtime" / "models").glob("*.json")) + sorted((DATA / "profiles").rglob("*.json"))
    assert len(files) > 50
    for f in files:
        _strict(f.read_text())


def test_shipped_models_are_package_data():
    from colopred.runtime.manifest import default_model_path, read_manifest

    for mode in ("timeslice", "mps"):
        path = default_model_path(mode)
        assert PKG in path.parents
        man = read_manifest(path)
        assert man["mode"] == mode and man["gpu"] == "NVIDIA H100 80GB HBM3"
    toml = (ROOT / "pyproject.toml").read_text()
    assert '"runtime/models/*.json"' in toml and '"runtime/models/*.ubj"' in toml and '"py.typed"' in toml
    assert '"runtime/reference/*/*.json"' in toml  # the calibration reference's profiles ship too


def _rows(n=60, seed=0):
    """Feature rows of real shipped profiles in random pairs, with slowdowns of a known form."""
    from colopred.profile import load_profiles
    from colopred.runtime.features import feature_matrix, profile_matrix

    profiles = load_profiles(sorted((DATA / "profiles" / "ncu").glob("*.json"))[:12])
    rng = np.random.default_rng(seed)
    sets = np.array([rng.choice(len(profiles), 2, replace=False) for _ in range(n)])
    X, _, _ = feature_matrix(profile_matrix(profiles), sets)
    s = 1 + X[:, FEATURES.index("co_sum_busy")] * (0.5 + 0.01 * X[:, FEATURES.index("t_dram_util")])
    return X, s


def test_the_estimator_follows_scikit_learns_contract():
    m = SlowdownModel(mode="mps", params={"n_estimators": 200}, interval=False)
    assert m.get_params()["mode"] == "mps" and m.get_params()["params"] == {"n_estimators": 200}
    c = clone(m)
    assert c is not m and c.get_params() == m.get_params()
    assert not hasattr(c, "point_")
    X, s = _rows()
    assert m.fit(X, s) is m
    assert hasattr(m, "point_") and m.baseline_coefs_.shape == (3,) and m.interval_ is None
    pred = m.predict(X)
    assert pred.shape == s.shape and np.all(pred > 0)
    err = np.mean(np.abs(pred - s) / s)
    assert err < 0.02 and err < np.mean(np.abs(m.baseline(X) - s) / s)  # the trees improve on the baseline
    m2 = clone(m).set_params(params={"n_estimators": 40})
    assert m2.get_params()["params"] == {"n_estimators": 40} and not hasattr(m2, "point_")
    # a frame with the FEATURES columns is taken by name, in any column order
    import pandas as pd

    frame = pd.DataFrame(X, columns=FEATURES)[list(reversed(FEATURES))]
    assert np.allclose(m.predict(frame), pred)
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        SlowdownModel().predict(X)
    with pytest.raises(ValueError, match="features"):
        m.predict(X[:, :5])


DISTRIBUTED_ENGINES = ("ray", "dask", "submitit", "mpi4py", "horovod")


def test_campaigns_use_no_distributed_engine_and_one_gpu_measuring_never_loads_the_multi_gpu_coordinator():
    """Across nodes, campaigns run as Slurm job arrays of plain `colopred measure` processes (docs/campaigns.md):
    no module imports a distributed engine. The one-GPU harness (campaign, plan, pool, workers, records, reader)
    never imports the multi-GPU coordinator, and a one-GPU `colopred measure` loads neither it nor an engine."""
    bad = {}
    for f in _modules([PKG]):
        hits = sorted(i for i in _imports(f) if i.split(".")[0] in DISTRIBUTED_ENGINES)
        if hits:
            bad[str(f.relative_to(ROOT))] = hits
    assert not bad, bad
    harness = PKG / "measurement" / "harness"
    one_gpu = [harness / f"{n}.py" for n in ("campaign", "plan", "sharding", "gpu_pool", "worker", "mps", "records", "reader")]
    assert not {str(f.name): sorted(i for i in _imports(f) if "multigpu" in i) for f in one_gpu if any("multigpu" in i for i in _imports(f))}
    code = ("import sys; from colopred.cli import main; "
            "from tests.test_harness import FakePool, SOLO_MS; import colopred.measurement.harness.gpu_pool as gp; "
            "SOLO_MS.update({'resnet18-b2-fp32': 5.0, 'dlrm-b8-fp32': 7.0}); "
            "gp.make_pool_factory = lambda **k: (lambda m, j: FakePool(m, j)); "
            "rc = main(['measure', '--jobs', 'resnet18-b2-fp32,dlrm-b8-fp32', '--sets', 'pairs', '--mode', 'mps', '--out', sys.argv[1], "
            "'--no-nvml', '-q', '--no-progress']); "
            f"print(rc, sorted(m for m in sys.modules if 'multigpu' in m or m.split('.')[0] in {DISTRIBUTED_ENGINES!r}))")
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([sys.executable, "-c", code, d + "/c"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and r.stdout.split(maxsplit=1) == ["0", "[]\n"], r.stdout + r.stderr
