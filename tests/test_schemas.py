"""The shipped JSON Schemas of records and of prediction output describe the real documents: every recorded window
in datasets/, records the harness and the importer write, and the output of predict --json, predict_many, pack and
rank validate under them, by jsonschema itself and by colopred's validator; both refuse the same bad records, and the
records reader refuses them in one line naming the file."""

import copy
import json

import pytest

from colopred.cli import main
from colopred.errors import InputError
from colopred.measurement.harness.campaign import Campaign
from colopred.measurement.harness.reader import read_windows
from colopred.profile import JobProfile
from colopred.runtime.predictor import Predictor
from colopred.schema import SCHEMAS, load_schema, problems, schema_text

from .conftest import DATA, ROOT
from .test_exchange import LAB, LAB_COLUMNS
from .test_harness import FakePool, config
from .test_placement_cli import NAMES, PROFILES, _request

jsonschema = pytest.importorskip("jsonschema")

RECORD_FILES = sorted((ROOT / "datasets").rglob("windows.jsonl"))


def validator(name):
    return jsonschema.Draft202012Validator(json.loads(schema_text(name)))


def both_accept(doc, name):
    errors = [e.message for e in validator(name).iter_errors(doc)]
    assert not errors, errors[:3]
    assert problems(doc, name) == []


def test_every_shipped_schema_is_a_draft_2020_12_schema_the_package_validator_implements():
    for name in SCHEMAS:
        jsonschema.Draft202012Validator.check_schema(json.loads(schema_text(name)))
        load_schema(name)  # refuses a keyword colopred's validator does not implement


@pytest.mark.slow
@pytest.mark.data
def test_every_recorded_window_validates():
    assert len(RECORD_FILES) >= 30
    v, n = validator("window_record"), 0
    for f in RECORD_FILES:
        for line in f.read_text().splitlines():
            r = json.loads(line)
            assert not list(v.iter_errors(r)), (f, r["window_id"])
            assert problems(r, "window_record") == [], (f, r["window_id"])
            n += 1
    assert n > 4000


def test_records_the_harness_and_the_importer_write_validate(tmp_path, capsys):
    Campaign(tmp_path / "c", config()).run(lambda m, j: FakePool(m, j))
    assert main(["import", str(LAB), "--out", str(tmp_path / "lab"), *LAB_COLUMNS]) == 0
    files = [tmp_path / "c" / "windows.jsonl", tmp_path / "lab" / "campaigns" / "lab_table" / "windows.jsonl"]
    for f in files:
        for line in f.read_text().splitlines():
            both_accept(json.loads(line), "window_record")


BAD_RECORD_CHANGES = [
    {"schema": "colopred.window/2"}, {"mode": "both"}, {"kind": "pair"}, {"jobs": []}, {"jobs": "a+b"}, {"repeat": -1},
    {"status": "done"}, {"results": []}, {"provenance": None}, {"gpm": {"dram_bw_util_pct": "high"}}, {"window_s": -1.0},
    {"park_idle": "no"}, {"commands": [{"name": "x"}]}, {"imported": {"set_id": "s"}}, {"reason": 3},
]


@pytest.mark.parametrize("change", BAD_RECORD_CHANGES, ids=[str(c)[:40] for c in BAD_RECORD_CHANGES])
def test_the_schema_and_the_records_reader_refuse_the_same_records(tmp_path, change):
    lines = (DATA / "campaigns" / "h100-smoke" / "windows.jsonl").read_text().splitlines()
    rec = json.loads(lines[2])
    rec.update(change)
    assert list(validator("window_record").iter_errors(rec)) and problems(rec, "window_record")
    (tmp_path / "c").mkdir()
    f = tmp_path / "c" / "windows.jsonl"
    f.write_text("\n".join([*lines[:2], json.dumps(rec), *lines[3:]]) + "\n")
    with pytest.raises(InputError) as e:
        read_windows(tmp_path / "c")
    assert str(f) in str(e.value) and "record 3" in str(e.value) and "\n" not in str(e.value)


def test_a_bad_job_result_is_refused_naming_the_field(tmp_path):
    rec = json.loads((DATA / "campaigns" / "h100-smoke" / "windows.jsonl").read_text().splitlines()[2])
    job = rec["jobs"][0]
    for key, value in (("iterations", 2.5), ("status", "fine"), ("peak_memory_gib", -1.0), ("max_ms", "slow")):
        r = copy.deepcopy(rec)
        r["results"][job][key] = value
        assert list(validator("window_record").iter_errors(r))
        assert any(f"results.{job}.{key}" in p for p in problems(r, "window_record"))


def test_predict_json_validates(capsys):
    for mode in ("mps", "timeslice"):
        assert main(["predict", str(PROFILES / f"{NAMES[0]}.json"), str(PROFILES / f"{NAMES[1]}.json"),
                     str(PROFILES / f"{NAMES[2]}.json"), "--mode", mode, "--json"]) == 0
        both_accept(json.loads(capsys.readouterr().out), "prediction")
    # an NVML profile without a peak: warnings and the memory need still fit the schema
    nvml = sorted((DATA / "profiles" / "nvml").glob("*.json"))[:2]
    assert main(["predict", *map(str, nvml), "--mode", "mps", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    both_accept(doc, "prediction")


def test_predict_many_table_as_json_validates():
    profiles = [JobProfile.from_json(PROFILES / f"{n}.json") for n in NAMES]
    table = Predictor.default("mps").predict_many([profiles[:2], profiles[1:4], profiles[:5]])
    both_accept(json.loads(table.to_json(orient="records")), "prediction_table")


def test_pack_and_rank_output_validate(tmp_path, capsys):
    req = tmp_path / "req.json"
    req.write_text(json.dumps(_request(tmp_path)))
    assert main(["pack", str(req), "--json"]) == 0
    both_accept(json.loads(capsys.readouterr().out), "placement")
    req.write_text(json.dumps({"schema": "colopred.placement_request", "mode": "timeslice",
                               "job": {"profile": str(PROFILES / f"{NAMES[0]}.json")},
                               "candidates": [{"profile": str(PROFILES / f"{n}.json")} for n in NAMES[1:]], "k": 3}))
    assert main(["rank", str(req), "--json"]) == 0
    both_accept(json.loads(capsys.readouterr().out), "partners")


def test_the_manifest_schemas_enums_are_the_codes_own_choices():
    """A manifest names its contention load, interval growth and MPS wait gate from sets the code defines; the schema
    that checks manifests lists exactly those, so a model of any valid choice loads and no other does."""
    from colopred.runtime.baseline import CROSS_GATES, LOAD_KINDS
    from colopred.runtime.estimator import INTERVAL_SCALES

    props = json.loads((ROOT / "colopred" / "schemas" / "model_manifest.schema.json").read_text())["properties"]
    assert set(props["contention_load"]["enum"]) == set(LOAD_KINDS)
    assert set(props["interval_scale"]["enum"]) == set(INTERVAL_SCALES)
    assert set(props["mps_wait_cross_gate"]["enum"]) == set(CROSS_GATES)


def test_pack_and_rank_json_carry_their_warnings_and_validate(tmp_path, capsys):
    """A warning printed on stderr is also in the JSON answer (a scheduler reading --json sees it), which still
    validates against its schema; without warnings the list is empty."""
    p0, p1, p2 = (str(PROFILES / f"{n}.json") for n in NAMES[:3])
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"schema": "colopred.placement_request", "mode": "mps", "limits": {"max_per_gpu": 2},
                               "jobs": [{"profile": p} for p in (p0, p1, p2)],
                               "gpus": [{"name": "a", "running": NAMES[:3]}, {"name": "b"}]}))
    assert main(["pack", str(req), "--json"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    both_accept(doc, "placement")
    assert doc["warnings"] == ["GPU a: its 3 running jobs already exceed max_per_gpu 2; it keeps them and takes no new job"]
    assert err.strip() == f"colopred: warning: {doc['warnings'][0]}"
    h200 = DATA.parent / "h200" / "profiles" / "ncu" / "resnet18-b64-fp32.json"  # a profile of another GPU
    req.write_text(json.dumps({"schema": "colopred.placement_request", "mode": "mps", "job": {"profile": str(h200)},
                               "candidates": [{"profile": p} for p in (p1, p2)]}))
    assert main(["rank", str(req), "--json"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    both_accept(doc, "partners")
    assert len(doc["warnings"]) == 1 and "H200" in doc["warnings"][0]
    assert err.strip() == f"colopred: warning: {doc['warnings'][0]}"
    req.write_text(json.dumps({"schema": "colopred.placement_request", "mode": "mps",
                               "job": {"profile": p0}, "candidates": [{"profile": p1}]}))
    assert main(["rank", str(req), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["warnings"] == [] and err == ""
