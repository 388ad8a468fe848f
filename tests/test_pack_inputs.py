"""Every bad input of pack and rank is one clear error at the boundary: ``TypeError``/``ValueError`` naming the field in
Python, a ``SchemaError`` naming the request's field, one ``colopred:`` line and a non-zero exit from the CLI, a 4xx
JSON answer from the service. Requests also come from standard input (``colopred pack -``)."""

import io
import json
import sys

import pytest

from colopred import Gpu
from colopred.errors import SchemaError
from colopred.profile import JobProfile
from colopred.runtime.request import request_from_document
from colopred.runtime.predictor import Predictor

from .conftest import DATA
from .test_cli import run

PROFILES = DATA / "profiles" / "ncu"
A, B, C = "resnet18-b64-fp32", "gpt2_small-b8-bf16", "lstm_lm-b64-fp32"


@pytest.fixture(scope="module")
def predictor():
    return Predictor.default("mps")


def _jobs():
    return [JobProfile.from_json(PROFILES / f"{n}.json") for n in (A, B, C)]


@pytest.mark.parametrize("args, kind, needle", [
    (("g", -5), ValueError, "memory_gib must be more than 0"),
    (("g", 0), ValueError, "memory_gib must be more than 0"),
    (("g", float("nan")), ValueError, "memory_gib"),
    (("g", 5000.0), ValueError, "at most 1024"),
    (("g", True), TypeError, "memory_gib must be a number"),
    (("g", "40"), TypeError, "memory_gib must be a number"),
    (("g", None, A), TypeError, "not one string"),
    (("g", None, 5), TypeError, "running must be a sequence"),
    (("g", None, (A, A)), ValueError, "twice"),
    (("g", None, ("a\nb",)), ValueError, "running[0] holds a control character"),
    (("",), ValueError, "Gpu name must not be empty"),
    (("a\nb",), ValueError, "control character"),
    (("x" * 201,), ValueError, "holds 201 characters, at most 200"),
    ((7,), TypeError, "Gpu name must be a string"),
])
def test_a_bad_gpu_is_refused_when_made(args, kind, needle):
    with pytest.raises(kind) as e:
        Gpu(*args)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_a_list_of_running_jobs_is_kept_as_a_tuple():
    assert Gpu("g", 40, [A, B]).running == (A, B) and Gpu("g", 40).memory_gib == 40.0


@pytest.mark.parametrize("kwargs, kind, needle", [
    ({"gpus": ["g0"]}, TypeError, "gpus[0] must be a Gpu"),
    ({"gpus": "g0"}, TypeError, "gpus must be a sequence"),
    ({"gpus": [Gpu("g"), Gpu("g")]}, ValueError, "two GPUs are named 'g'"),
    ({"n_gpus": 2, "max_slowdown": "lenient"}, ValueError, "max_slowdown must be"),
    ({"n_gpus": 2, "max_slowdown": 0.5}, ValueError, "max_slowdown must be at least 1"),
    ({"n_gpus": 2, "max_slowdown": True}, TypeError, "max_slowdown"),
    ({"n_gpus": 2, "min_throughput": -1}, ValueError, "min_throughput"),
    ({"n_gpus": 2, "min_throughput": "1"}, TypeError, "min_throughput"),
    ({"n_gpus": 2, "time_budget_s": 0}, ValueError, "time_budget_s"),
    ({"n_gpus": 2, "max_per_gpu": 2.5}, TypeError, "max_per_gpu"),
    ({"n_gpus": 2, "weights": {"nope": 2}}, ValueError, "no job named 'nope'"),
    ({"n_gpus": 2, "weights": {A: 0}}, ValueError, "above 0"),
    ({"n_gpus": 2, "weights": [1, 2]}, TypeError, "weights must be a mapping"),
    ({"n_gpus": 2, "progress": 3}, TypeError, "progress must be a callable"),
])
def test_bad_pack_arguments_are_refused(predictor, kwargs, kind, needle):
    with pytest.raises(kind) as e:
        predictor.pack(_jobs(), **kwargs)
    assert needle in str(e.value) and "\n" not in str(e.value)


def _doc(**fields):
    return {"schema": "colopred.placement_request", "mode": "mps",
            "jobs": [{"profile": str(PROFILES / f"{n}.json")} for n in (A, B, C)], "n_gpus": 2, **fields}


LONG = "x" * 10_000


@pytest.mark.parametrize("change, field", [
    ({"jobs": [{"profile": str(PROFILES / f"{A}.json"), "name": LONG}]}, "jobs[0].name holds 10000 characters"),
    ({"jobs": [{"profile": str(PROFILES / f"{A}.json"), "name": "a\nb"}]}, "jobs[0].name holds a control character"),
    ({"jobs": [{"profile": str(PROFILES / f"{A}.json"), "weight": 0}]}, "jobs[0].weight must be a number > 0"),
    ({"gpus": [{"name": "a\nb"}], "n_gpus": None}, "gpus[0].name holds a control character"),
    ({"gpus": [{"name": LONG}], "n_gpus": None}, "gpus[0].name holds 10000 characters"),
    ({"gpus": [{"name": "g", "memory_gib": 5000}], "n_gpus": None}, "gpus[0].memory_gib must be at most 1024"),
    ({"gpus": [{"name": "g", "running": A}], "n_gpus": None}, "gpus[0].running must be a list of job names"),
    ({"gpus": [{"name": "g", "running": [A, A]}], "n_gpus": None}, "gpus[0]: Gpu g: running names job"),
    ({"gpus": [{"name": "g", "running": [7]}], "n_gpus": None}, "gpus[0].running[0] must be a string"),
    ({"limits": {"max_slowdown": "lenient"}}, "limits.max_slowdown must be a number ≥ 1, \"fair\" or null"),
    ({"limits": {"min_throughput": -1}}, "limits.min_throughput must be a number ≥ 0"),
    ({"time_budget_s": 0}, "time_budget_s must be a number > 0"),
])
def test_bad_request_values_name_the_field(tmp_path, capsys, change, field):
    doc = {**_doc(), **change}
    doc = {k: v for k, v in doc.items() if v is not None}
    with pytest.raises(SchemaError) as e:
        request_from_document(doc, tmp_path / "req.json", "pack")
    assert field in str(e.value) and "\n" not in str(e.value)
    path = tmp_path / "req.json"
    path.write_text(json.dumps(doc))
    code, out, err = run(capsys, "pack", path)
    assert code != 0 and out == "" and "Traceback" not in err
    assert err.startswith("colopred: ") and err.count("\n") == 1 and field in err


def test_rank_refuses_a_long_name_in_one_line(tmp_path, capsys):
    path = tmp_path / "rank.json"
    path.write_text(json.dumps({"schema": "colopred.placement_request", "mode": "mps", "job": {"profile": str(PROFILES / f"{A}.json")},
                                "candidates": [{"profile": str(PROFILES / f"{B}.json"), "name": LONG}]}))
    code, _out, err = run(capsys, "rank", path)
    assert code != 0 and err.count("\n") == 1 and "candidates[0].name holds 10000 characters" in err


def test_weight_and_time_budget_are_pack_fields(tmp_path):
    rank = {"schema": "colopred.placement_request", "mode": "mps", "job": {"profile": str(PROFILES / f"{A}.json")},
            "candidates": [{"profile": str(PROFILES / f"{B}.json"), "weight": 2}]}
    with pytest.raises(SchemaError, match="only the jobs of a pack request have a weight"):
        request_from_document(rank, tmp_path / "r.json", "rank")
    with pytest.raises(SchemaError, match="time_budget_s: not a field of a rank request"):
        request_from_document({**rank, "candidates": [{"profile": str(PROFILES / f"{B}.json")}], "time_budget_s": 1}, tmp_path / "r.json", "rank")


def test_request_limits_reach_pack(tmp_path, predictor):
    doc = _doc(limits={"max_slowdown": None, "min_throughput": None}, time_budget_s=5,
               jobs=[{"profile": str(PROFILES / f"{A}.json"), "weight": 3}, {"profile": str(PROFILES / f"{B}.json")}])
    req = request_from_document(doc, tmp_path / "req.json", "pack")
    assert (req.max_slowdown, req.min_throughput, req.time_budget_s, req.weights) == (None, None, 5.0, {A: 3.0})
    default = request_from_document(_doc(), tmp_path / "req.json", "pack")
    assert (default.max_slowdown, default.min_throughput) == ("fair", 1.0)


def test_pack_reads_the_request_from_standard_input(tmp_path, capsys, monkeypatch):
    """`colopred pack -`: profiles relative to the working folder; the same answer as from the file."""
    monkeypatch.chdir(PROFILES)
    doc = {"schema": "colopred.placement_request", "mode": "mps", "n_gpus": 2,
           "jobs": [{"profile": f"{n}.json"} for n in (A, B, C)]}
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(doc)))
    code, out, err = run(capsys, "pack", "-", "--json")
    assert code == 0, err
    from_stdin = json.loads(out)
    path = tmp_path / "req.json"
    path.write_text(json.dumps({**doc, "jobs": [{"profile": str(PROFILES / f"{n}.json")} for n in (A, B, C)]}))
    code, out, _ = run(capsys, "pack", path, "--json")
    assert code == 0 and json.loads(out) == from_stdin and from_stdin["placed"] == 3
    monkeypatch.setattr(sys, "stdin", io.StringIO("{not json"))
    code, out, err = run(capsys, "pack", "-")
    assert code != 0 and err.startswith("colopred: ") and "<stdin>: not valid JSON" in err and err.count("\n") == 1


def test_a_request_naming_one_file_many_times_reads_it_once(tmp_path, monkeypatch):
    """A rank request of many candidates re-timed from one file: the file is read and checked once."""
    base = JobProfile.from_json(PROFILES / f"{B}.json")
    calls = []
    real = JobProfile.from_json.__func__

    def counted(cls, path):
        calls.append(path)
        return real(cls, path)

    monkeypatch.setattr(JobProfile, "from_json", classmethod(counted))
    doc = {"schema": "colopred.placement_request", "mode": "mps", "job": {"profile": f"{A}.json"},
           "candidates": [{"profile": f"{B}.json", "name": f"b{i}", "iteration_ms": base.iteration_ms * (1 + i / 1000)}
                          for i in range(500)]}
    req = request_from_document(doc, PROFILES / "req.json", "rank")
    assert len(calls) == 2 and len(req.candidates) == 500
    want = base.retimed(base.iteration_ms * (1 + 7 / 1000)).with_(name="b7")
    assert req.candidates[7] == want and req.candidates[7].busy_fraction == pytest.approx(base.gpu_busy_ms / want.iteration_ms)


def test_the_service_answers_bad_pack_values_with_a_4xx_naming_the_field(tmp_path):
    from .service_support import Server, call, profile_doc

    with Server(tmp_path / "store") as s:
        status, _h, _d = call(s.url + f"/v1/profiles/{A}", "PUT", profile_doc(A))
        assert status == 201
        for body, field in (({"mode": "mps", "jobs": [{"profile": A, "name": LONG}], "n_gpus": 1}, "jobs[0].name"),
                            ({"mode": "mps", "jobs": [{"profile": A}], "gpus": [{"name": "a\nb"}]}, "gpus[0].name"),
                            ({"mode": "mps", "jobs": [{"profile": A}], "n_gpus": 1, "limits": {"min_throughput": -1}},
                             "limits.min_throughput")):
            status, _h, data = call(s.url + "/v1/pack", "POST", body)
            doc = json.loads(data)
            assert 400 <= status < 500 and doc["error"].startswith(field) and "\n" not in doc["error"], doc
        status, _h, data = call(s.url + "/v1/pack", "POST", {"mode": "mps", "jobs": [{"profile": A, "weight": 2}], "n_gpus": 1,
                                                             "limits": {"max_slowdown": "fair", "min_throughput": None}})
        assert status == 200 and json.loads(data)["placed"] == 1
