"""`colopred pack` and `colopred rank`: the request format (JSON Schema shipped in the package) end to end."""

import copy
import hashlib
import json

import pytest

from colopred.errors import SchemaError
from colopred.profile import JobProfile
from colopred.runtime.predictor import Predictor
from colopred.runtime.request import read_request, schema_path

from .conftest import DATA
from .test_cli import run

PROFILES = DATA / "profiles" / "ncu"
NAMES = ["resnet18-b64-fp32", "gpt2_small-b8-bf16", "lstm_lm-b64-fp32", "vgg16-b32-fp32", "dlrm-b2048-fp32"]


def _request(tmp_path):
    inline = json.loads((PROFILES / f"{NAMES[4]}.json").read_text())
    return {"schema": "colopred.placement_request", "schema_version": 1, "mode": "mps",
            "jobs": [{"profile": str(PROFILES / f"{n}.json")} for n in NAMES[:4]] + [{"profile": inline, "iteration_ms": 14.0}],
            "gpus": [{"name": "n1:0", "running": [NAMES[3]]}, {"name": "n1:1", "memory_gib": 40}],
            "limits": {"max_per_gpu": 3, "max_slowdown": 3.0}}


def test_pack_request_end_to_end(tmp_path, capsys):
    req = tmp_path / "req.json"
    req.write_text(json.dumps(_request(tmp_path)))
    code, out, _err = run(capsys, "pack", req, "--json", "-o", tmp_path / "placement.json")
    assert code == 0
    got = json.loads(out)
    assert got == json.loads((tmp_path / "placement.json").read_text())
    jobs = [JobProfile.from_json(PROFILES / f"{n}.json") for n in NAMES[:4]]
    jobs.append(JobProfile.from_json(PROFILES / f"{NAMES[4]}.json").retimed(14.0))
    from colopred.runtime.placement import Gpu

    want = Predictor.default("mps").pack(jobs, gpus=[Gpu("n1:0", running=(NAMES[3],)), Gpu("n1:1", 40.0)], max_per_gpu=3,
                                         max_slowdown=3.0)
    assert [g["jobs"] for g in got["gpus"]] == [list(g) for g in want.gpus]
    assert got["throughput"] == pytest.approx(want.throughput) and got["placed"] == 5
    assert NAMES[3] in got["gpus"][0]["jobs"]  # the running job stays
    code, out, _ = run(capsys, "pack", req)  # the readable table
    assert code == 0 and "5 of 5 jobs placed" in out and "n1:1" in out


def test_rank_request(tmp_path, capsys):
    req = tmp_path / "rank.json"
    req.write_text(json.dumps({"schema": "colopred.placement_request", "mode": "timeslice",
                               "job": {"profile": str(PROFILES / f"{NAMES[0]}.json")},
                               "candidates": [{"profile": str(PROFILES / f"{n}.json")} for n in NAMES[1:]], "k": 2}))
    code, out, _ = run(capsys, "rank", req, "--json")
    got = json.loads(out)
    assert code == 0 and got["job"] == NAMES[0] and len(got["partners"]) == 2
    assert got["partners"][0]["throughput"] >= got["partners"][1]["throughput"]


def test_the_shipped_schema_and_the_reader_agree(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(schema_path().read_text())
    good = _request(tmp_path)
    jsonschema.validate(good, schema)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(good))
    assert len(read_request(path).jobs) == 5

    def variant(change):
        doc = copy.deepcopy(good)
        change(doc)
        return doc

    bad = [variant(lambda d: d.update(mode="gpu")), variant(lambda d: d.update(schema="other")),
           variant(lambda d: d.update(n_gpus=0, gpus=None) or d.pop("gpus")), variant(lambda d: d.update(extra=1)),
           variant(lambda d: d["limits"].update(max_per_gpu=0)), variant(lambda d: d["limits"].update(max_slowdown=0.5)),
           variant(lambda d: d["gpus"][1].update(memory_gib=-1)), variant(lambda d: d["jobs"][0].update(iteration_ms=0)),
           variant(lambda d: d["jobs"][0].pop("profile")), variant(lambda d: d.update(solver="magic")),
           variant(lambda d: d["gpus"][0].update(color="red")), variant(lambda d: d.update(k=0))]
    for doc in bad:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(doc, schema)
        path.write_text(json.dumps(doc))
        with pytest.raises(SchemaError):
            read_request(path)


@pytest.mark.parametrize("text, needle", [
    ("{", "not valid JSON"), ('{"schema": "colopred.placement_request"}', "mode must be"),
    ('{"schema": "colopred.placement_request", "mode": "mps", "n_gpus": 2}', "needs jobs"),
    ('{"schema": "colopred.placement_request", "mode": "mps", "jobs": [{"profile": "missing.json"}], "n_gpus": 1}', "no such file"),
    ('{"schema": "colopred.placement_request", "mode": "mps", "jobs": [{"profile": 3}], "n_gpus": 1}', "profile must be"),
    ('[' * 5000 + ']' * 5000, "not"),
])
def test_bad_requests_get_one_line_and_change_nothing(tmp_path, capsys, text, needle):
    req = tmp_path / "req.json"
    req.write_text(text)
    out = tmp_path / "out.json"
    out.write_text("precious")
    before = hashlib.sha256(out.read_bytes()).hexdigest()
    code, _, err = run(capsys, "pack", req, "-o", out)
    assert code == 2 and err.count("\n") == 1 and needle in err and "Traceback" not in err
    assert hashlib.sha256(out.read_bytes()).hexdigest() == before
