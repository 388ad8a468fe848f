"""Issue 21: the shipped schemas, atomic outputs, models replaced whole, campaign lock and retries, API checks,
warnings where a prediction leaves the model's experience, and runs killed at any moment."""

import json
import os
import random
import signal
import subprocess
import sys
import time
import warnings
from typing import ClassVar

import numpy as np
import pytest

from colopred import constants as C
from colopred.errors import InputError, SchemaError
from colopred.io import atomic_file, check_output, write_csv_atomic, write_text_atomic
from colopred.measurement.harness.campaign import (
    MAX_WINDOW_ATTEMPTS,
    Campaign,
    CampaignLock,
)
from colopred.measurement.harness.reader import read_windows
from colopred.measurement.harness.records import iter_records
from colopred.profile import JobProfile
from colopred.runtime.manifest import read_manifest, shipped_models_dir
from colopred.runtime.predictor import Predictor
from colopred.schema import load_schema, problems, schema_text

from .conftest import DATA, ROOT, shipped_dataset
from .test_harness import FakePool, config

jsonschema = pytest.importorskip("jsonschema")

PROFILES = sorted((DATA / "profiles").glob("*/*.json"))
MANIFESTS = sorted(shipped_models_dir().glob("*.json"))
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def profile(name="resnet18-b64-fp32", source="ncu"):
    return JobProfile.from_json(DATA / "profiles" / source / f"{name}.json")


# ----------------------------------------------------------------------------------------------- schemas
def test_shipped_documents_validate_against_the_shipped_schemas():
    """Every shipped profile and manifest is valid under the package's JSON Schemas, by jsonschema itself and by
    colopred's validator; the schemas are well-formed draft 2020-12 schemas and ship as package data."""
    for name, docs in (("job_profile", PROFILES), ("model_manifest", MANIFESTS)):
        schema = json.loads(schema_text(name))
        jsonschema.Draft202012Validator.check_schema(schema)
        v = jsonschema.Draft202012Validator(schema)
        assert docs
        for f in docs:
            d = json.loads(f.read_text())
            assert not list(v.iter_errors(d)), f
            assert problems(d, name) == [], f
    toml = (ROOT / "pyproject.toml").read_text()
    assert '"schemas/*.schema.json"' in toml


def test_schema_bounds_are_the_named_constants():
    prof, man = load_schema("job_profile")["properties"], load_schema("model_manifest")["properties"]
    assert prof["iteration_ms"]["minimum"] == C.MIN_ITERATION_MS and prof["iteration_ms"]["maximum"] == C.MAX_ITERATION_MS
    assert prof["busy_fraction"]["maximum"] == C.MAX_BUSY_FRACTION
    assert prof["stream_overlap"]["maximum"] == C.MAX_STREAM_OVERLAP
    assert prof["dram_util_pct"]["maximum"] == 100 + C.NCU_PCT_TOLERANCE
    assert prof["gpu"]["properties"]["memory_gib"]["maximum"] == C.MAX_GPU_MEMORY_GIB
    assert prof["name"]["maxLength"] == C.MAX_NAME_LENGTH
    assert all(c["maximum"] == C.MAX_BASELINE_COEF for c in man["baseline_coefs"]["properties"].values())
    assert man["conformal_log_width"]["maximum"] == C.MAX_CONFORMAL_LOG_WIDTH
    assert man["max_set_size"]["maximum"] == C.MAX_SET_SIZE


BAD_PROFILE_CHANGES = [
    {"name": ""}, {"name": 3}, {"name": "a\tb"}, {"name": "x" * 201}, {"iteration_ms": 0}, {"iteration_ms": "5"},
    {"iteration_ms": 1e9}, {"busy_fraction": 2.5}, {"busy_fraction": None}, {"dram_util_pct": 101}, {"dram_util_pct": -1},
    {"achieved_occupancy_pct": True}, {"sm_fill_pct": 200}, {"mps_wait_us": -2}, {"kernels_per_iteration": "many"},
    {"stream_overlap": 0.9}, {"stream_overlap": 65}, {"iterations_profiled": 0}, {"iterations_profiled": 2.5},
    {"source": "nsys"}, {"gpu": {"name": "H100", "sm_count": 132}}, {"gpu": {"name": "H100", "sm_count": 0, "memory_gib": 80}},
    {"gpu": {"name": "H100", "sm_count": 132, "memory_gib": 80, "x": 1}}, {"distributions": {"dram_pct": {"p10": "low"}}},
    {"distributions": []}, {"meta": []}, {"extra_field": 1}, {"schema_version": 2}, {"schema": "colopred.model"},
]


def _refused_by_schema_and_loader(doc: dict, schema: str, path, load) -> None:
    """``doc`` fails the published ``schema`` (checked with jsonschema itself), and ``load`` of it written to ``path``
    raises one SchemaError line naming the file."""
    v = jsonschema.Draft202012Validator(json.loads(schema_text(schema)))
    assert list(v.iter_errors(doc)), doc
    path.write_text(json.dumps(doc))
    with pytest.raises(SchemaError) as e:
        load(path)
    assert str(path) in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("change", BAD_PROFILE_CHANGES, ids=[str(c)[:40] for c in BAD_PROFILE_CHANGES])
def test_profile_loader_and_schema_refuse_the_same_documents(tmp_path, change):
    d = json.loads((DATA / "profiles" / "ncu" / "resnet18-b64-fp32.json").read_text())
    d.update(change)
    _refused_by_schema_and_loader(d, "job_profile", tmp_path / "p.json", JobProfile.from_json)


BAD_MANIFEST_CHANGES = [
    {"mode": "both"}, {"features": "x"}, {"baseline_coefs": {"contention_load": 1.0}}, {"baseline_coefs": None},
    {"conformal_log_width": -1}, {"conformal_log_width": 3.0}, {"monotone": "yes"}, {"params": []},
    {"interval_quantiles": [0.05]}, {"interval_coverage": 1.0}, {"files": {"point": {"path": "a.ubj", "sha256": "0" * 64}}},
    {"max_set_size": 1}, {"max_set_size": 2.5}, {"feature_ranges": {"t_busy": [0, 1, 2]}}, {"n_sets": -1},
    {"schema_version": 6}, {"contention_load": "other"},
]


@pytest.mark.parametrize("change", BAD_MANIFEST_CHANGES, ids=[str(c)[:40] for c in BAD_MANIFEST_CHANGES])
def test_manifest_loader_and_schema_refuse_the_same_documents(tmp_path, change):
    d = json.loads(MANIFESTS[0].read_text())
    d.update(change)
    _refused_by_schema_and_loader(d, "model_manifest", tmp_path / "m.json", read_manifest)


@pytest.mark.parametrize("part, name", [("point", "/etc/passwd"), ("point", "../h100-mps.point.ubj"), ("interval", "sub/x.ubj"),
                                        ("interval", ".."), ("point", "..\\x.ubj")])
def test_manifest_files_lie_in_the_manifests_own_folder(tmp_path, part, name):
    d = json.loads(MANIFESTS[0].read_text())
    d["files"][part]["path"] = name
    f = tmp_path / "m.json"
    f.write_text(json.dumps(d))
    with pytest.raises(SchemaError, match=f"files.{part}.path"):
        read_manifest(f)


@pytest.mark.slow
def test_shipped_experience_keys_are_recomputed_from_the_shipped_data_and_change_no_prediction(tmp_path):
    """research/add_manifest_ranges.py added max_set_size and feature_ranges to the shipped manifests without
    retraining: recomputed from the data they are the same, and a manifest without them predicts identically."""
    from colopred.research.training import experience, manifest_dataset
    from colopred.runtime.features import FEATURES

    data = {}
    for man_path in MANIFESTS:
        man = json.loads(man_path.read_text())
        # the rows it was trained on: the models for GPM profiles on profiles/nvml, each with its manifest's labels
        key = (man.get("profile_source", "ncu"), man.get("relabelled", False))
        ds = data[key] = data.get(key) or manifest_dataset(DATA, man)
        rows = ds.for_mode(man["mode"])
        assert experience(rows, [ds.profiles[j] for j in sorted(rows["job"].unique())]) == \
            {"max_set_size": man["max_set_size"], "feature_ranges": man["feature_ranges"]}
        for part in ("point", "interval"):
            (tmp_path / man["files"][part]["path"]).write_bytes((man_path.parent / man["files"][part]["path"]).read_bytes())
        old = {k: v for k, v in man.items() if k not in ("max_set_size", "feature_ranges")}
        (tmp_path / man_path.name).write_text(json.dumps(old))
        X = rows[list(FEATURES)].to_numpy()
        a, b = Predictor.load(man_path).model, Predictor.load(tmp_path / man_path.name).model
        assert np.array_equal(a.predict_with_interval(X)[0], b.predict_with_interval(X)[0])


# ----------------------------------------------------------------------------------------------- API
@pytest.fixture(scope="module")
def mps():
    return Predictor.default("mps")


def test_a_job_alone_has_slowdown_exactly_one(mps):
    a, b = profile(), profile("lstm_lm-b64-fp32")
    rows = mps.predict_many([[a], [a, b], [b]])
    alone = rows[rows["n_jobs"] == 1]
    assert len(alone) == 2
    assert (alone["slowdown"] == 1.0).all() and (alone["delta"] == 1.0).all() and (alone["throughput"] == 1.0).all()
    assert (alone["collocated_iteration_ms"] == alone["solo_iteration_ms"]).all()
    pair = rows[rows["n_jobs"] == 2]
    assert (pair["slowdown"] > 1).all()


@pytest.mark.parametrize("call, error, needle", [
    (lambda p, a, b: p.predict_many([]), ValueError, "sets is empty"),
    (lambda p, a, b: p.predict_many([[]]), ValueError, "sets[0] must hold at least 1 job"),
    (lambda p, a, b: p.predict_many("ab"), TypeError, "sets must be a sequence"),
    (lambda p, a, b: p.predict_many([[a, "x.json"]]), TypeError, "sets[0][1] must be a JobProfile, not str"),
    (lambda p, a, b: p.predict_many([[a, b], [a.with_(iteration_ms=a.iteration_ms * 2), b]]), ValueError, "differs from another set's"),
    (lambda p, a, b: p.predict_many([[a, b]] * 50 + [[b, a, b.with_(iteration_ms=b.iteration_ms * 2)]]), ValueError,
     "sets[50] holds a job named 'lstm_lm-b64-fp32' that differs"),
    (lambda p, a, b: p.predict_many([[a, b], (x for x in [a])]), TypeError, "sets[1] must be a sequence of JobProfile, not generator"),
    (lambda p, a, b: p.predict_many([[a, b], [a, 3]]), TypeError, "sets[1][1] must be a JobProfile, not int"),
    (lambda p, a, b: p.predict_many([[a]] + [[b.with_(name=f"j{i}") for i in range(17)]]), ValueError, "sets[1] holds 17 jobs"),
    (lambda p, a, b: p.predict([a]), ValueError, "at least two jobs"),
    (lambda p, a, b: p.predict(a), TypeError, "not one JobProfile"),
    (lambda p, a, b: p.predict([a, {"name": "b"}]), TypeError, "profiles[1] must be a JobProfile, not dict"),
    (lambda p, a, b: p.predict([a, a.with_(iteration_ms=a.iteration_ms * 2)]), ValueError, "two different jobs named"),
    (lambda p, a, b: p.predict([a, b.with_(name=a.name)]), ValueError, "two different jobs named"),
    (lambda p, a, b: p.predict([a, b] + [b.with_(name=f"j{i}") for i in range(20)]), ValueError, "at most 16"),
    (lambda p, a, b: p.rank_partners(a, []), ValueError, "candidates must hold at least 1 job"),
    (lambda p, a, b: p.rank_partners(a, [b], k=0), ValueError, "k must be at least 1"),
    (lambda p, a, b: p.rank_partners(a, [b], k=1.5), TypeError, "k must be an integer"),
    (lambda p, a, b: p.rank_partners("a", [b]), TypeError, "job must be a JobProfile"),
    (lambda p, a, b: p.rank_partners(a, [b, a.with_(iteration_ms=a.iteration_ms * 2)]), ValueError,
     "candidates[1] is another job named as the job"),
    (lambda p, a, b: p.pack([a, b], n_gpus=-1), ValueError, "n_gpus must be at least 1"),
    (lambda p, a, b: p.pack([a, b], n_gpus=0), ValueError, "n_gpus must be at least 1"),
    (lambda p, a, b: p.pack([a, b], n_gpus=True), TypeError, "n_gpus must be an integer"),
    (lambda p, a, b: p.pack([a, b], n_gpus=2, max_per_gpu=0), ValueError, "max_per_gpu must be at least 1"),
    (lambda p, a, b: p.pack([a, b], n_gpus=2, max_slowdown=0.5), ValueError, "max_slowdown must be at least 1"),
    (lambda p, a, b: p.pack([a, b], n_gpus=2, max_slowdown=float("nan")), ValueError, "max_slowdown must be a finite"),
    (lambda p, a, b: p.pack([a, b.with_(name=a.name)], n_gpus=2), ValueError, "two different jobs named"),
    (lambda p, a, b: p.pack([], n_gpus=2), ValueError, "jobs must hold at least 1 job"),
    (lambda p, a, b: p.pack(["a.json"], n_gpus=2), TypeError, "jobs[0] must be a JobProfile"),
])
def test_api_arguments_are_checked(mps, call, error, needle):
    a, b = profile(), profile("lstm_lm-b64-fp32")
    with pytest.raises(error) as e:
        call(mps, a, b)
    assert needle in str(e.value)


def test_valid_api_calls_still_work(mps):
    a, b, c = profile(), profile("lstm_lm-b64-fp32"), profile("vgg16-b32-fp32")
    assert len(mps.rank_partners(a, [b, c], k=1)) == 1
    placed = mps.pack([a, b, c], n_gpus=2).gpus
    assert sorted(n for g in placed for n in g) == sorted([a.name, b.name, c.name]) and len(placed) == 2


def caught(fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        fn()
    return [str(x.message) for x in w]


def test_warnings_where_a_prediction_leaves_the_models_experience(mps):
    a, b, c, d, e = (profile(n) for n in ("resnet18-b64-fp32", "lstm_lm-b64-fp32", "vgg16-b32-fp32", "alexnet-b128-fp32",
                                          "gpt2_small-b8-bf16"))
    assert caught(lambda: mps.predict([a, b])) == []
    assert caught(lambda: mps.predict_many([[a, b], [a, b, c], [a, b, c, d]])) == []
    trained = mps.manifest["max_set_size"]
    assert trained == 4  # the shipped data holds measured sets of two, three and four jobs
    four = caught(lambda: mps.predict([a, b, c, d, e]))
    assert len(four) == 1 and "a set of 5 jobs is larger than any the model was trained on (4)" in four[0]
    odd = b.with_(iteration_ms=b.iteration_ms * 50, kernel_ms_per_iteration=b.kernel_ms_per_iteration, busy_fraction=b.busy_fraction / 50)
    w = caught(lambda: mps.predict([a, odd]))
    assert len(w) == 1 and f"profile {b.name}: feature" in w[0] and "outside the model's training range" in w[0]
    gpm = profile("resnet18-b64-fp32", source="nvml").with_(name="gpm-job")
    with pytest.raises(ValueError, match="gpm-job an NVML GPM profile: a prediction reads profiles of one kind"):
        mps.predict([a, gpm])  # refused, not a warning: the ncu model never predicts from a GPM profile
    from colopred.gpu import GpuInfo

    other = b.with_(gpu=GpuInfo.from_name("NVIDIA A100-SXM4-80GB"))
    assert any("measured on NVIDIA A100-SXM4-80GB" in x for x in caught(lambda: mps.predict_many([[a, other]])))
    assert all("\n" not in x for x in four + w)


def test_cli_predict_prints_experience_warnings_in_one_line_each_and_in_json(tmp_path, capsys):
    from colopred.cli import main

    args = [str(DATA / "profiles" / "ncu" / f"{n}.json") for n in ("resnet18-b64-fp32", "lstm_lm-b64-fp32", "vgg16-b32-fp32",
                                                                  "alexnet-b128-fp32", "gpt2_small-b8-bf16")]  # 5 > the 4 trained
    assert main(["predict", *args, "--mode", "mps", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["warnings"] == [l[len("colopred: warning: "):] for l in err.strip().splitlines()]
    assert "larger than any the model was trained on" in err


# ----------------------------------------------------------------------------------------------- atomic writes
def test_atomic_file_leaves_the_old_file_on_failure(tmp_path):
    f = tmp_path / "out.csv"
    f.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_file(f) as h:
            h.write("half of the new")
            raise RuntimeError("killed")
    assert f.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]
    write_text_atomic(f, "new")
    assert f.read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]
    with pytest.raises(InputError, match="does not exist"):
        write_text_atomic(tmp_path / "nowhere" / "x", "y")
    with pytest.raises(InputError, match="is the input"):
        check_output(tmp_path / "." / "out.csv", f)



def test_a_gz_table_is_written_gzipped_and_the_same_table_gives_the_same_bytes(tmp_path):
    import gzip

    import pandas as pd

    df = pd.DataFrame({"job": ["resnet18-b64-fp32", "gpt2_small-b8-bf16"], "slowdown": [1.63, 1.33]})
    f = write_csv_atomic(df, tmp_path / "t.csv.gz", index=False)
    assert gzip.decompress(f.read_bytes()).decode() == df.to_csv(index=False)
    pd.testing.assert_frame_equal(pd.read_csv(f), df)
    first = f.read_bytes()
    assert first[4:8] == bytes(4)  # no time stamp in the gzip header
    assert write_csv_atomic(df, f, index=False).read_bytes() == first  # nor the temporary file's name
    assert write_csv_atomic(df, tmp_path / "t.csv", index=False).read_text() == df.to_csv(index=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv", "t.csv.gz"]

def _predictions(path, X):
    return Predictor.load(path).model.predict_with_interval(X)


@pytest.fixture(scope="module")
def two_models(tmp_path_factory):
    """Two different fitted mps models: the shipped one and one fitted on a part of the shipped data."""
    from colopred.runtime.estimator import SlowdownModel
    from colopred.runtime.features import FEATURES

    rows = shipped_dataset().for_mode("mps")
    rows = rows[rows["n_jobs"] == 2].iloc[:300]
    X = rows[list(FEATURES)].to_numpy()
    other = SlowdownModel(mode="mps", params={"n_estimators": 20}).fit(X, rows["slowdown"].to_numpy(), groups=rows["arch"].to_numpy())
    return Predictor.default("mps"), Predictor(model=other, mode="mps"), X


def test_a_failed_save_leaves_the_old_model_or_the_new_one_whole(tmp_path, monkeypatch, two_models):
    """save_model fails at each file-system step in turn (each rename, link, unlink and fsync): afterwards the
    manifest loads, checksums and all, and predicts exactly as the old model or exactly as the new one."""
    import colopred.io as cio
    import colopred.runtime.manifest as manifest

    old, new, X = two_models
    path = tmp_path / "m.json"
    old.save(path)
    p_old, p_new = _predictions(path, X), None
    steps = [(os, "replace"), (os, "link"), (os, "unlink"), (cio, "fsync_file"), (manifest, "fsync_file")]
    for mod, name in steps:
        for k in range(4):
            real = getattr(mod, name)
            calls = {"n": 0}

            def failing(*args, _real=real, _k=k, _calls=calls, **kw):
                _calls["n"] += 1
                if _calls["n"] == _k + 1:
                    raise OSError(28, "No space left on device")
                return _real(*args, **kw)

            monkeypatch.setattr(mod, name, failing)
            try:
                new.save(path)
            except (OSError, InputError):
                pass
            finally:
                monkeypatch.setattr(mod, name, real)
            got = _predictions(path, X)
            if p_new is None and not np.array_equal(got[0], p_old[0]):
                p_new = got
            assert np.array_equal(got[0], p_old[0]) or np.array_equal(got[0], p_new[0]), (name, k)
            old.save(path)  # back to the old model for the next step
    files = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("."))
    assert files == ["m.interval.ubj", "m.json", "m.point.ubj"]


def test_train_into_an_unwritable_place_leaves_the_old_model(tmp_path, two_models, monkeypatch):
    old, new, X = two_models
    path = tmp_path / "m.json"
    old.save(path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def no_space(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("tempfile.mkstemp", no_space)
    with pytest.raises(InputError, match="cannot write in"):
        new.save(path)
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert np.array_equal(_predictions(path, X)[0], old.model.predict_with_interval(X)[0])


# ----------------------------------------------------------------------------------------------- campaigns
def test_a_second_writer_is_refused_while_the_first_holds_the_lock(tmp_path):
    out = tmp_path / "c"
    with CampaignLock(out):
        with pytest.raises(InputError, match="another colopred measure is writing this campaign"):
            Campaign(out, config()).run(lambda m, j: FakePool(m, j))
    Campaign(out, config()).run(lambda m, j: FakePool(m, j))  # released: the campaign runs
    ids = [r["window_id"] for r in iter_records(out / "windows.jsonl")]
    assert len(ids) == len(set(ids)) == len(Campaign(out, None, resume=True).plan)


def test_resume_retries_failed_windows_up_to_the_limit(tmp_path):
    class Dying(FakePool):
        """The worker of job d dies in every window it is in; job c's dies only on the first attempt."""

        seen: ClassVar[dict] = {}

        def run_window(self, jobs, d, w):
            res, gpm = super().run_window(jobs, d, w)
            key = tuple(jobs)
            Dying.seen[key] = Dying.seen.get(key, 0) + 1
            if "d-b1-fp32" in jobs or ("c-b1-fp32" in jobs and Dying.seen[key] == 1):
                j = "d-b1-fp32" if "d-b1-fp32" in jobs else "c-b1-fp32"
                res[j] = {"status": "died", "error": "worker exited (code -9) during the window", "iterations": 0}
            return res, gpm

    out = tmp_path / "c"
    cfg = config(modes=("timeslice",), repeat_frac=0.0)
    Campaign(out, cfg).run(lambda m, j: Dying(m, j))
    for _ in range(MAX_WINDOW_ATTEMPTS + 1):
        Campaign(out, None, resume=True).run(lambda m, j: Dying(m, j))
    recs = list(iter_records(out / "windows.jsonl"))
    per: dict = {}
    for r in recs:
        per.setdefault(r["window_id"], []).append(r["status"])
    assert all(s == ["failed"] * MAX_WINDOW_ATTEMPTS for wid, s in per.items() if "d-b1-fp32" in next(
        r["jobs"] for r in recs if r["window_id"] == wid))
    c_only = [s for wid, s in per.items() if "c-b1-fp32" in next(r["jobs"] for r in recs if r["window_id"] == wid)
              and "d-b1-fp32" not in next(r["jobs"] for r in recs if r["window_id"] == wid)]
    # c's worker dies in the first window of each set it is in (a solo set recurs: its later windows succeed)
    assert ["failed", "ok"] in c_only and all(s in (["failed", "ok"], ["ok"]) for s in c_only)
    w = read_windows(out)  # the last run of a retried window counts; no window twice
    assert w["record_id"].is_unique and set(w["record_id"]) == set(per)
    assert set(w[w["jobs"].map(lambda j: "c-b1-fp32" in j and "d-b1-fp32" not in j)]["status"]) == {"ok"}


def test_resume_refuses_records_of_another_plan(tmp_path):
    out = tmp_path / "c"
    with pytest.raises(KeyboardInterrupt):  # killed after 5 windows
        Campaign(out, config()).run(lambda m, j: FakePool(m, j, fail_after=5))
    recs = (out / "windows.jsonl").read_text().splitlines()
    r = json.loads(recs[0])
    r["jobs"] = list(reversed(r["jobs"])) if len(r["jobs"]) > 1 else ["d-b1-fp32"]
    (out / "windows.jsonl").write_text("\n".join([json.dumps(r)] + recs[1:]) + "\n")
    with pytest.raises(InputError, match=r"record 1 .* does not match the plan"):
        Campaign(out, None, resume=True).run(lambda m, j: FakePool(m, j))


def test_a_duplicated_window_names_its_file(tmp_path):
    out = tmp_path / "c"
    Campaign(out, config()).run(lambda m, j: FakePool(m, j))
    lines = (out / "windows.jsonl").read_text().splitlines()
    (out / "windows.jsonl").write_text("\n".join(lines + [lines[3]]) + "\n")
    with pytest.raises(InputError) as e:
        read_windows(out)
    assert str(out / "windows.jsonl") in str(e.value) and "recorded twice" in str(e.value)


# ----------------------------------------------------------------------------------------------- killed at any moment
def _kill_after(cmd, delay, cwd=ROOT):
    """Start ``cmd`` in its own process group, SIGKILL the group after ``delay`` s (if still running); its exit code."""
    p = subprocess.Popen(cmd, cwd=cwd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        p.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    return p.returncode


@pytest.mark.slow
def test_killing_train_at_any_moment_leaves_the_model_usable(tmp_path, two_models):
    old, _, X = two_models
    path = tmp_path / "x-mps.json"
    old.save(path)
    expected = old.model.predict_with_interval(X)[0]
    rng = random.Random(21)
    cmd = [sys.executable, "-m", "colopred", "train", "--data", str(DATA), "--out", str(tmp_path / "x"), "--modes", "mps",
           "--no-metrics", "-q"]
    t0 = time.monotonic()
    assert _kill_after(cmd, 600) == 0  # one whole run: how long a run takes, and the new model
    whole = time.monotonic() - t0
    new = Predictor.load(path).model.predict_with_interval(X)[0]
    old.save(path)
    for delay in [rng.uniform(0.3, whole) for _ in range(4)] + [whole * f for f in (0.9, 0.95, 0.98)]:
        _kill_after(cmd, delay)
        got = Predictor.load(path).model.predict_with_interval(X)[0]  # loads, checksums and all
        assert np.array_equal(got, expected) or np.array_equal(got, new), delay
        if np.array_equal(got, new):
            old.save(path)


@pytest.mark.slow
def test_killing_profile_ncu_leaves_the_earlier_output(tmp_path):
    from .conftest import FULL_REPORT

    out = tmp_path / "p.json"
    out.write_text((DATA / "profiles" / "ncu" / "resnet18-b64-fp32.json").read_text())
    before = out.read_bytes()
    cmd = [sys.executable, "-m", "colopred", "profile", "ncu", str(FULL_REPORT), "--name", "new", "--iter-ms", "200", "-o", str(out)]
    rng = random.Random(7)
    for delay in [rng.uniform(0.05, 2.0) for _ in range(5)]:
        code = _kill_after(cmd, delay)
        p = JobProfile.from_json(out)  # whole: the old profile, or the new one (killed after its rename, or done)
        assert out.read_bytes() == before or p.name == "new"
        if code == 0:
            assert p.name == "new"
        out.write_bytes(before)
    assert sorted(f.name for f in tmp_path.iterdir()) == ["p.json"]


@pytest.mark.slow
def test_killing_measure_leaves_every_recorded_window_and_resume_completes(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "camp"
    base = [sys.executable, "-m", "colopred", "measure", "--out", str(out), "--device", "cpu", "--tiny", "--no-nvml", "-q",
            "--no-progress", "--min-iters", "3", "--max-window-s", "5"]
    start = base + ["--jobs", "resnet18-b2-fp32,dlrm-b8-fp32", "--sets", "pairs", "--mode", "timeslice"]
    rng = random.Random(3)
    seen: list[str] = []
    for i, delay in enumerate([rng.uniform(2, 8) for _ in range(3)]):
        _kill_after(start if i == 0 or not (out / "campaign.json").exists() else base + ["--resume"], delay)
        if (out / "windows.jsonl").exists():
            ids = [r["window_id"] for r in iter_records(out / "windows.jsonl")]
            assert ids[: len(seen)] == seen  # nothing recorded before is lost or changed
            seen = ids
            read_windows(out)  # the campaign stays readable
    cmd = base + ["--resume"] if (out / "campaign.json").exists() else start
    assert subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, timeout=300).returncode == 0
    w = read_windows(out)
    assert w["record_id"].is_unique and set(w["record_id"]) == {x.window_id for x in Campaign(out, None, resume=True).plan}
    assert (out / ".campaign.lock").exists() and not any(p.name.endswith(".tmp") for p in out.iterdir())


@pytest.mark.slow
def test_evaluate_on_one_valid_campaign_writes_its_report(tmp_path, capsys):
    """A dataset of one campaign: folds and placement scenarios that leave nothing to train on are skipped (they
    made XGBoost fit an empty set), and the report is written."""
    import shutil

    from colopred.cli import main

    data = tmp_path / "data"
    shutil.copytree(DATA / "profiles" / "ncu", data / "profiles" / "ncu")
    shutil.copytree(DATA / "campaigns" / "h100-c1", data / "campaigns" / "h100-c1")
    assert main(["evaluate", "-q", "--data", str(data), "--modes", "timeslice", "--out", str(tmp_path / "rep")]) == 0
    out = capsys.readouterr().out
    assert "colopred (XGBoost)" in out and "leave-arch" in out
    written = sorted(p.name for p in (tmp_path / "rep").iterdir())
    assert {"report.md", "metrics.csv", "pred_vs_measured.png"} <= set(written)
    assert not [n for n in written if n.startswith(".") or n.endswith(".tmp")]
