"""colopred serve, as a real server process on loopback: the CLI's answers over HTTP, the registry, observations
that move predictions and survive restarts, the Kubernetes extender, errors, limits, the token, the client."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import jsonschema
import numpy as np
import pytest

from colopred.profile import JobProfile
from colopred.runtime.documents import partners_document, placement_document, prediction_document, table_document
from colopred.runtime.observed import Observation
from colopred.runtime.predictor import Predictor

from .service_support import PROFILES, ROOT, Server, call, profile_doc

JOBS = ("resnet18-b64-fp32", "gpt2_small-b8-bf16", "lstm_lm-b64-fp32", "alexnet-b128-fp32")


def schema(name: str) -> dict:
    return json.loads((ROOT / "colopred" / "schemas" / f"{name}.schema.json").read_text())


def local(job: str) -> JobProfile:
    return JobProfile.from_json(PROFILES / f"{job}.json")


def post(server: Server, path: str, body, **kw):
    status, _headers, data = call(server.url + path, "POST", body, **kw)
    return status, json.loads(data) if data else None


def put(server: Server, path: str, body, **kw):
    status, _headers, data = call(server.url + path, "PUT", body, **kw)
    return status, json.loads(data)


def get(server: Server, path: str):
    status, headers, data = call(server.url + path)
    ctype = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    return status, json.loads(data) if ctype.startswith("application/json") else data.decode()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One server for the module's read-mostly tests, the shipped profiles registered under their own names."""
    store = tmp_path_factory.mktemp("serve") / "store"
    with Server(store) as s:
        for job in JOBS:
            status, rec = put(s, f"/v1/profiles/{job}", profile_doc(job))
            assert status == 201 and rec["version"] == 1, rec
        yield s


def test_predict_answers_what_the_cli_prints(server):
    status, doc = post(server, "/v1/predict", {"mode": "mps", "jobs": list(JOBS[:2])})
    assert status == 200
    jsonschema.validate(doc, schema("prediction"))
    pred = Predictor.default("mps")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        expected = prediction_document(pred.predict([local(j) for j in JOBS[:2]]), pred.profile_source,
                                       [str(w.message) for w in caught])
    for j in expected["jobs"]:
        j["observations"] = 0  # the service always says how many observations shifted each job (none here)
    assert doc == json.loads(json.dumps(expected))
    # the CLI's own output, the same numbers
    r = subprocess.run([sys.executable, "-m", "colopred", "predict", *(str(PROFILES / f"{j}.json") for j in JOBS[:2]), "--mode", "mps",
                        "--json"], capture_output=True, text=True, cwd=ROOT)
    cli = json.loads(r.stdout)
    assert [j["slowdown"] for j in cli["jobs"]] == [j["slowdown"] for j in doc["jobs"]] and cli["delta"] == doc["delta"]
    # an inline profile is the same job as its registered name
    status, inline = post(server, "/v1/predict", {"mode": "mps", "jobs": [JOBS[0], profile_doc(JOBS[1])]})
    assert status == 200 and inline == doc


def test_predict_many_rank_and_pack_answer_the_runtimes_documents(server):
    pred = Predictor.default("timeslice")
    profiles = {j: local(j) for j in JOBS}
    sets = [list(JOBS[:2]), list(JOBS[1:4]), [JOBS[3]]]
    status, doc = post(server, "/v1/predict_many", {"mode": "timeslice", "sets": sets})
    assert status == 200
    jsonschema.validate(doc["rows"], schema("prediction_table"))
    expected = table_document(pred.predict_many([[profiles[j] for j in s] for s in sets]))
    assert doc["rows"] == json.loads(json.dumps(expected))

    status, ranked = post(server, "/v1/rank", {"mode": "timeslice", "job": {"profile": JOBS[0]},
                                               "candidates": [{"profile": j} for j in JOBS[1:]], "k": 2})
    assert status == 200
    jsonschema.validate(ranked, schema("partners"))
    expected = partners_document("timeslice", JOBS[0], pred.rank_partners(profiles[JOBS[0]], [profiles[j] for j in JOBS[1:]], k=2), [])
    assert ranked["partners"] == json.loads(json.dumps(expected["partners"]))

    request = {"mode": "timeslice", "jobs": [{"profile": j} for j in JOBS], "n_gpus": 2, "limits": {"max_per_gpu": 2}}
    status, placed = post(server, "/v1/pack", request)
    assert status == 200
    jsonschema.validate(placed, schema("placement"))
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        pl = pred.pack([profiles[j] for j in JOBS], n_gpus=2, max_per_gpu=2)
    assert {k: v for k, v in placed.items() if k != "warnings"} == \
        {k: v for k, v in json.loads(json.dumps(placement_document("timeslice", pl, []))).items() if k != "warnings"}
    # the request file the CLI reads is accepted as it is ("schema" included), profiles by name
    status, again = post(server, "/v1/pack", {"schema": "colopred.placement_request", "schema_version": 1, **request})
    assert status == 200 and again == placed


def test_profiles_keep_every_version_and_a_deleted_name_stops_resolving(server):
    doc = profile_doc(JOBS[0])
    status, rec = put(server, "/v1/profiles/versioned", doc)
    assert status == 201 and rec["version"] == 1
    status, rec = put(server, "/v1/profiles/versioned", doc)  # the same document: nothing new
    assert status == 200 and rec["version"] == 1
    status, rec = put(server, "/v1/profiles/versioned", {**doc, "iteration_ms": doc["iteration_ms"] * 1.1})
    assert status == 201 and rec["version"] == 2
    status, got = get(server, "/v1/profiles/versioned?version=1")
    assert status == 200 and got["profile"]["iteration_ms"] == doc["iteration_ms"] and got["profile"]["name"] == "versioned"
    status, got = get(server, "/v1/profiles/versioned")
    assert got["version"] == 2 and got["profile"]["iteration_ms"] == pytest.approx(doc["iteration_ms"] * 1.1)
    status, _ = post(server, "/v1/predict", {"mode": "mps", "jobs": ["versioned", JOBS[1]]})
    assert status == 200
    assert call(server.url + "/v1/profiles/versioned", "DELETE")[0] == 200
    status, err = post(server, "/v1/predict", {"mode": "mps", "jobs": [JOBS[1], "versioned"]})
    assert status == 404 and err["field"] == "jobs[1]" and "versioned" in err["error"]
    status, hist = get(server, "/v1/profiles/versioned/versions")
    assert [v["version"] for v in hist["versions"]] == [1, 2, 3] and hist["versions"][-1]["deleted"]
    status, listed = get(server, "/v1/profiles")
    assert "versioned" not in [p["name"] for p in listed["profiles"]] and JOBS[0] in [p["name"] for p in listed["profiles"]]
    # a profile that fails the runtime's schema is refused with its field, and nothing is stored
    status, err = put(server, "/v1/profiles/bad", {**doc, "busy_fraction": -1})
    assert status == 422 and "busy_fraction" in err["error"]
    assert get(server, "/v1/profiles/bad")[0] == 404


def test_an_observation_moves_the_prediction_as_predictor_observe_does(tmp_path):
    with Server(tmp_path / "store") as s:
        for job in JOBS[:3]:
            put(s, f"/v1/profiles/{job}", profile_doc(job))
        _, before = post(s, "/v1/predict", {"mode": "mps", "jobs": list(JOBS[:2])})
        status, rec = post(s, "/v1/observations", {"mode": "mps", "jobs": list(JOBS[:2]), "slowdowns": [2.1, 1.2],
                                                   "gpu": "NVIDIA H100 80GB HBM3", "time": "2026-11-29T10:00:00Z"})
        assert status == 201 and rec["predicted"] == [j["slowdown"] for j in before["jobs"]]
        status, rec2 = post(s, "/v1/observations", {"mode": "mps", "jobs": [JOBS[0], JOBS[2]],
                                                    "solo_ms": [16.0, 30.0], "colocated_ms": [30.0, 36.0]})
        assert status == 201 and rec2["slowdowns"] == [30.0 / 16.0, 36.0 / 30.0]
        _, after = post(s, "/v1/predict", {"mode": "mps", "jobs": list(JOBS[:2])})
        assert [j["observations"] for j in after["jobs"]] == [2, 1]
        assert after["jobs"][0]["slowdown"] > before["jobs"][0]["slowdown"]  # measured above the prediction
        # the same numbers as Predictor.observe of the same observations, in-process
        profiles = {j: local(j) for j in JOBS[:3]}
        pred = Predictor.default("mps").observe([Observation((profiles[JOBS[0]], profiles[JOBS[1]]), (2.1, 1.2)),
                                                 Observation((profiles[JOBS[0]], profiles[JOBS[2]]), (30 / 16, 36 / 30))])
        expected = pred.predict([profiles[j] for j in JOBS[:2]])
        assert np.allclose([j["slowdown"] for j in after["jobs"]], expected.slowdown, rtol=1e-12)
        # listed by job, newest first
        status, listed = get(s, f"/v1/observations?job={JOBS[0]}")
        assert [o["id"] for o in listed["observations"]] == [rec2["id"], rec["id"]]
        assert listed["observations"][1]["gpu"] == "NVIDIA H100 80GB HBM3"
        # an idempotency key stores an observation once; the same key for another observation is a conflict
        body = {"mode": "mps", "jobs": list(JOBS[:2]), "slowdowns": [1.7, 1.3]}
        s1, r1 = post(s, "/v1/observations", body, headers={"Idempotency-Key": "run-42"})
        s2, r2 = post(s, "/v1/observations", body, headers={"Idempotency-Key": "run-42"})
        s3, r3 = post(s, "/v1/observations", {**body, "slowdowns": [1.8, 1.3]}, headers={"Idempotency-Key": "run-42"})
        assert (s1, s2, s3) == (201, 200, 409) and r1 == {**r2, "warnings": r1["warnings"]} and r3["field"] == "idempotency_key"
        _, models = get(s, "/v1/models")
        assert next(m for m in models["models"] if m["name"] == "h100-mps")["observations"] == 6  # 3 observations x 2 jobs
        # the metrics carry the rolling error of the predictions as served against what was measured
        _, text = get(s, "/metrics")
        assert 'colopred_rolling_error_pct{mode="mps"}' in text and 'colopred_observations_stored{mode="mps"} 3.0' in text
        assert 'colopred_requests_total{endpoint="/v1/predict",method="POST",status="200"}' in text
        _, offsets_before = get(s, "/v1/models/h100-mps/offsets")
        _, final = post(s, "/v1/predict", {"mode": "mps", "jobs": list(JOBS[:2])})
    # a restarted server rebuilds the same state from the store, to the last bit
    with Server(tmp_path / "store") as s:
        _, offsets_after = get(s, "/v1/models/h100-mps/offsets")
        _, again = post(s, "/v1/predict", {"mode": "mps", "jobs": list(JOBS[:2])})
    assert offsets_after == offsets_before and again == final


def test_bad_requests_get_one_json_error_naming_the_field(server):
    cases = [
        (b'{"mode": "mps", "jobs": ["a"', 400, "body"),
        (b'{"mode": "mps", "jobs": [NaN, "x"]}', 400, "body"),
        (b'{"mode": "mps", "jobs": ["' + b"x" * 10_000 + b'", "y"]}', 422, "jobs[0]"),
        (json.dumps({"mode": "mps", "jobs": [JOBS[0], "nobody"]}).encode(), 404, "jobs[1]"),
        (json.dumps({"mode": "mps", "jobs": [JOBS[0], 7]}).encode(), 422, "jobs[1]"),
        (json.dumps({"mode": "gpu", "jobs": list(JOBS[:2])}).encode(), 422, "mode"),
        (json.dumps({"mode": "mps", "jobs": []}).encode(), 422, "jobs"),
        (json.dumps({"mode": "mps", "jobs": [JOBS[0]] * 17}).encode(), 422, "jobs"),
        (json.dumps({"mode": "mps", "jobs": ["bé", "€"]}).encode(), 422, "jobs[0]"),
        (json.dumps({"mode": "mps", "jobs": list(JOBS[:2]), "extra": 1}).encode(), 422, "extra"),
        (json.dumps({"mode": "mps", "jobs": [JOBS[0], {"schema": "colopred.job_profile"}]}).encode(), 422, "jobs[1]"),
        (json.dumps({"mode": "mps", "jobs": list(JOBS[:2]), "model": "h100-timeslice"}).encode(), 422, "model"),
        (b"[]", 422, "body"),
        (b"[" * 100_000 + b"]" * 100_000, 400, "body"),
        (b"\xff\xfe{}", 400, "body"),
        (b"", 422, "body"),
    ]
    for raw, status, field in cases:
        got, _headers, data = call(server.url + "/v1/predict", "POST", raw=raw)
        doc = json.loads(data)
        assert (got, doc["field"]) == (status, field), (raw[:60], doc)
        assert doc["error"].startswith(field) and "\n" not in doc["error"]
    # pack: the runtime's request reader names the field; a path is never read
    for body, field in (({"mode": "mps", "jobs": [{"profile": "/etc/passwd"}], "n_gpus": 1}, "jobs[0].profile"),
                        ({"mode": "mps", "jobs": [{"profile": JOBS[0]}], "n_gpus": 1, "limits": {"max_per_gpu": 0}}, "limits.max_per_gpu"),
                        ({"mode": "mps", "jobs": [{"profile": JOBS[0]}], "n_gpus": 1, "model": "../x.json"}, "model"),
                        ({"mode": "mps", "jobs": [{"profile": JOBS[0]}], "n_gpus": 1, "job": {"profile": JOBS[1]}}, "job")):
        status, doc = post(server, "/v1/pack", body)
        assert status in (404, 422) and doc["error"].startswith(field), doc
    status, doc = post(server, "/v1/pack", {"mode": "mps", "jobs": [{"profile": JOBS[0]}] * 6000, "n_gpus": 1})
    assert status == 413 and doc["field"] == "jobs"
    big = b'{"mode": "mps", "jobs": ["' + b"y" * (17 * 1024 * 1024) + b'"]}'
    status, _headers, data = call(server.url + "/v1/predict", "POST", raw=big)
    assert status == 413 and json.loads(data)["field"] == "body"
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)  # a chunked body: no Content-Length
    conn.request("POST", "/v1/predict", body=iter([b'{"mode": "mps", "jobs": ["'] + [b"y" * 1024 * 1024] * 17 + [b'"]}']),
                 headers={"Content-Type": "application/json"}, encode_chunked=True)
    r = conn.getresponse()
    assert r.status == 413 and json.loads(r.read())["field"] == "body"
    conn.request("POST", "/v1/predict", body=iter([b'{"mode": "mps", ', json.dumps({"jobs": list(JOBS[:2])}).encode()[1:]]),
                 headers={"Content-Type": "application/json"}, encode_chunked=True)
    r = conn.getresponse()
    assert r.status == 200 and json.loads(r.read())["mode"] == "mps"
    status, doc = get(server, "/v1/nowhere")
    assert status == 404 and doc["field"] == "path"
    status, _headers, data = call(server.url + "/v1/predict", "GET")
    assert status == 405 and json.loads(data)["error"].startswith("method")
    assert get(server, "/healthz")[0] == 200


def test_openapi_describes_every_endpoint_with_the_shipped_schemas(server):
    status, doc = get(server, "/openapi.json")
    assert status == 200 and doc["openapi"].startswith("3.")
    for path in ("/v1/predict", "/v1/predict_many", "/v1/rank", "/v1/pack", "/v1/profiles/{name}", "/v1/profiles",
                 "/v1/observations", "/v1/models", "/healthz", "/metrics", "/k8s/filter", "/k8s/prioritize", "/v1/nodes/{name}"):
        assert path in doc["paths"], path
    comps = doc["components"]["schemas"]
    assert comps["prediction"]["properties"].keys() == schema("prediction")["properties"].keys()
    assert doc["paths"]["/v1/pack"]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"] == \
        "#/components/schemas/placement_request"
    refs = set(json.dumps(doc).split('"$ref": "')[1:])
    for r in refs:  # every reference resolves
        name = r.split('"')[0].split("/")[-1]
        assert name in comps, name


def _pod(profile: str | None, **notes: str) -> dict:
    ann = {**({"colopred.io/profile": profile} if profile else {}), **{f"colopred.io/{k.replace('_', '-')}": v for k, v in notes.items()}}
    return {"metadata": {"name": "train-1", "namespace": "ml", "uid": "u-1", "annotations": ann},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


def test_the_extender_filters_and_prioritizes_as_kube_scheduler_expects(server):
    nodes = {"node-a": [[JOBS[0]], []], "node-b": [[JOBS[0], JOBS[1]]], "node-c": [[JOBS[1]]], "node-d": [[JOBS[3]]]}
    for name, gpus in nodes.items():
        status, _ = put(server, f"/v1/nodes/{name}", {"mode": "mps", "gpus": [{"name": str(i), "running": r} for i, r in enumerate(gpus)]})
        assert status in (200, 201)
    names = [*nodes, "node-unknown"]
    args = {"Pod": _pod(JOBS[2], max_slowdown="2.5", max_per_gpu="2"), "Nodes": None, "NodeNames": names}
    status, filtered = post(server, "/k8s/filter", args)
    assert status == 200 and list(filtered) == ["Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"]
    assert filtered["Error"] == "" and filtered["Nodes"] is None
    assert "node-b" in filtered["FailedNodes"] and "max_per_gpu" in filtered["FailedNodes"]["node-b"]
    assert set(filtered["NodeNames"]) | set(filtered["FailedNodes"]) == set(names) and "node-unknown" in filtered["NodeNames"]
    status, scores = post(server, "/k8s/prioritize", args)
    assert status == 200 and [h["Host"] for h in scores] == names and all(set(h) == {"Host", "Score"} for h in scores)
    by = {h["Host"]: h["Score"] for h in scores}
    assert by["node-a"] == 10 and by["node-b"] == 0 and by["node-unknown"] == 0  # node-a has an empty GPU: gain 1
    # a shared GPU scores its predicted gain: T(running + pod) - T(running), as the predictor has it
    pred = Predictor.default("mps")
    gain = pred.predict([local(JOBS[1]), local(JOBS[2])]).throughput - 1.0
    assert by["node-c"] == max(0, min(10, round(10 * gain)))
    # Nodes (not nodeCacheCapable) in, Nodes out; keys read in any letter case, as Go's decoder does
    items = [{"metadata": {"name": n}, "status": {"allocatable": {"nvidia.com/gpu": "2"}}} for n in names]
    status, filtered2 = post(server, "/k8s/filter", {"pod": _pod(JOBS[2], max_slowdown="2.5", max_per_gpu="2"), "nodes": {"items": items}})
    assert status == 200 and filtered2["NodeNames"] is None
    assert [n["metadata"]["name"] for n in filtered2["Nodes"]["items"]] == filtered["NodeNames"]
    # a pod that names no colopred profile is not colopred's: every node passes and scores 0
    status, other = post(server, "/k8s/filter", {"Pod": _pod(None), "NodeNames": names})
    assert other["NodeNames"] == names and other["FailedNodes"] == {}
    # an unregistered profile is the request's error, named
    status, err = post(server, "/k8s/filter", {"Pod": _pod("nobody"), "NodeNames": names})
    assert status == 404 and "colopred.io/profile" in err["error"]


def test_client_has_predictors_methods_and_the_cli_asks_a_server(server):
    from colopred.client import Client, RequestRefused

    c = Client(server.url, mode="timeslice")
    pred = Predictor.default("timeslice")
    profiles = [local(j) for j in JOBS]
    assert c.predict(JOBS[:2]).slowdown == pred.predict(profiles[:2]).slowdown
    assert c.predict(profiles[1:3]).interval == pred.predict(profiles[1:3]).interval  # JobProfiles sent inline
    assert np.allclose(c.predict_many([JOBS[:2], JOBS[1:]])["slowdown"], pred.predict_many([profiles[:2], profiles[1:]])["slowdown"])
    assert c.rank_partners(JOBS[0], JOBS[1:], k=2)["partner"].tolist() == pred.rank_partners(profiles[0], profiles[1:], k=2)["partner"].tolist()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert c.pack(JOBS, n_gpus=2, max_per_gpu=2).gpus == pred.pack(profiles, n_gpus=2, max_per_gpu=2).gpus
    assert {m["name"] for m in c.models()} >= {"h100-mps", "h100-timeslice"}
    # the registry and observations through the client
    assert c.register(local(JOBS[0]), name="client-job")["version"] == 1
    c.register(profile_doc(JOBS[1]), name="client-partner")  # its own names: the module's other tests see no observation
    assert c.profile("client-job").iteration_ms == local(JOBS[0]).iteration_ms
    before = c.predict(["client-job", "client-partner"])
    assert c.observe([(("client-job", "client-partner"), (2.5, 1.2))]) is c
    after = c.predict(["client-job", "client-partner", JOBS[2]])
    assert after.observations == (1, 1, 0) and c.predict(["client-job", "client-partner"]).slowdown[0] > before.slowdown[0]
    assert c.observations("client-job")[0]["slowdowns"] == [2.5, 1.2]
    with pytest.raises(RequestRefused) as e:
        c.predict([JOBS[0], "nobody"])
    assert e.value.status == 404 and e.value.field == "jobs[1]"
    # the CLI: --server gives the local command's JSON
    out = subprocess.run([sys.executable, "-m", "colopred", "predict", JOBS[0], str(PROFILES / f"{JOBS[1]}.json"), "--mode",
                          "timeslice", "--server", server.url, "--json"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert [j["slowdown"] for j in json.loads(out.stdout)["jobs"]] == list(pred.predict(profiles[:2]).slowdown)
    bad = subprocess.run([sys.executable, "-m", "colopred", "predict", JOBS[0], "nobody", "--mode", "mps", "--server", server.url],
                         capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "nobody" in bad.stderr


def test_pack_and_rank_with_server_print_what_the_local_commands_print(server, tmp_path):
    request = {"schema": "colopred.placement_request", "mode": "mps",
               "jobs": [{"profile": str(PROFILES / f"{j}.json")} for j in JOBS], "n_gpus": 2, "limits": {"max_per_gpu": 2}}
    (tmp_path / "pack.json").write_text(json.dumps(request))
    rank = {"schema": "colopred.placement_request", "mode": "mps", "job": {"profile": str(PROFILES / f"{JOBS[0]}.json")},
            "candidates": [{"profile": JOBS[1]}, {"profile": str(PROFILES / f"{JOBS[2]}.json")}]}  # a registered name too
    (tmp_path / "rank.json").write_text(json.dumps(rank))
    local_rank = {**rank, "candidates": [{"profile": str(PROFILES / f"{j}.json")} for j in JOBS[1:3]]}
    (tmp_path / "rank-local.json").write_text(json.dumps(local_rank))
    for kind, remote_file, local_file in (("pack", "pack.json", "pack.json"), ("rank", "rank.json", "rank-local.json")):
        here = subprocess.run([sys.executable, "-m", "colopred", kind, str(tmp_path / local_file), "--json"], capture_output=True,
                              text=True, cwd=ROOT)
        there = subprocess.run([sys.executable, "-m", "colopred", kind, str(tmp_path / remote_file), "--json", "--server", server.url],
                               capture_output=True, text=True, cwd=ROOT)
        assert here.returncode == 0 and there.returncode == 0, here.stderr + there.stderr
        assert json.loads(there.stdout) == json.loads(here.stdout)


def test_writes_need_the_token_when_one_is_set(tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret-token\n")
    with Server(tmp_path / "store", "--token-file", str(token)) as s:
        status, err = put(s, f"/v1/profiles/{JOBS[0]}", profile_doc(JOBS[0]))
        assert status == 401 and err["field"] == "authorization"
        status, err = put(s, f"/v1/profiles/{JOBS[0]}", profile_doc(JOBS[0]), headers={"Authorization": "Bearer wrong"})
        assert status == 401
        status, _ = put(s, f"/v1/profiles/{JOBS[0]}", profile_doc(JOBS[0]), headers={"Authorization": "Bearer s3cret-token"})
        assert status == 201
        put(s, f"/v1/profiles/{JOBS[1]}", profile_doc(JOBS[1]), headers={"Authorization": "Bearer s3cret-token"})
        assert post(s, "/v1/predict", {"mode": "mps", "jobs": list(JOBS[:2])})[0] == 200  # reads need none
        assert post(s, "/v1/observations", {"mode": "mps", "jobs": list(JOBS[:2]), "slowdowns": [1.5, 1.2]})[0] == 401
        assert call(s.url + f"/v1/profiles/{JOBS[0]}", "DELETE")[0] == 401


def test_two_servers_share_one_store(tmp_path):
    with Server(tmp_path / "store") as a, Server(tmp_path / "store") as b:
        for job in JOBS[:2]:
            put(a, f"/v1/profiles/{job}", profile_doc(job))
        assert post(b, "/v1/predict", {"mode": "mps", "jobs": list(JOBS[:2])})[0] == 200  # b sees a's profiles
        post(b, "/v1/observations", {"mode": "mps", "jobs": list(JOBS[:2]), "slowdowns": [2.0, 1.1]})
        _, pa = post(a, "/v1/predict", {"mode": "mps", "jobs": list(JOBS[:2])})
        _, pb = post(b, "/v1/predict", {"mode": "mps", "jobs": list(JOBS[:2])})
        assert pa == pb and pa["jobs"][0]["observations"] == 1


def test_a_store_on_a_network_file_system_is_refused(tmp_path, monkeypatch):
    from colopred.service.store import StoreError, sqlite

    monkeypatch.setattr(sqlite, "filesystem_type", lambda folder: "nfs4")
    with pytest.raises(StoreError, match=r"network file system.*postgresql"):
        sqlite.SqliteStore(tmp_path / "store")


def test_serve_refuses_bad_options_in_one_line(tmp_path):
    (tmp_path / "file").write_text("x")
    for args, needle in ((["--store", str(tmp_path / "file")], "not a folder"),
                         (["--token-file", str(tmp_path / "none")], "token file"),
                         (["--workers", "0"], "--workers")):
        r = subprocess.run([sys.executable, "-m", "colopred", "serve", *args, "--port", "1"], capture_output=True, text=True,
                           cwd=ROOT, timeout=120)
        assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_observations_another_model_predicted_are_predicted_again_by_the_served_one(tmp_path):
    """A replica or an earlier server with another model stored them: the served model of their mode takes them with
    its own predictions of the same profile versions, as Predictor.observe would."""
    from colopred.service.routers.profiles import canonical
    from colopred.service.state import ServiceState, load_models
    from colopred.service.store import ObservationJob, ObservationRecord, now_utc, open_store

    store = open_store(str(tmp_path / "store"))
    for job in JOBS[:3]:
        store.put_profile(job, *canonical(local(job).to_dict()))
    measured = [((JOBS[0], JOBS[1]), (2.0, 1.1)), ((JOBS[0], JOBS[2]), (1.5, 1.4))]
    store.add_observations([ObservationRecord(0, "mps", "elsewhere@000000000000", now_utc(),
                                              tuple(ObservationJob(j, s, 1.0, 1.0, float(np.log(s))) for j, s in zip(jobs, slows)),
                                              None, f"sha{i}", {"profile_versions": [1, 1]})
                            for i, (jobs, slows) in enumerate(measured)])
    state = ServiceState(store, load_models())
    served = state.models["h100-mps"].predictor
    profiles = {j: local(j) for j in JOBS[:3]}
    expected = Predictor.default("mps").observe([Observation(tuple(profiles[j] for j in jobs), slows) for jobs, slows in measured])
    assert served.offsets.keys() == expected.offsets.keys()
    for job, off in expected.offsets.items():
        assert served.offsets[job].observations == off.observations
        assert served.offsets[job].mean_log_ratio == pytest.approx(off.mean_log_ratio, rel=1e-12)
    assert not state.models["h100-timeslice"].sums  # another mode's model takes none


def test_a_start_from_a_checkpoint_holds_the_state_a_full_replay_holds(tmp_path, monkeypatch):
    from colopred.service.routers.profiles import canonical
    from colopred.service.state import ServiceState, load_models
    from colopred.service.store import ObservationJob, ObservationRecord, now_utc, open_store

    store = open_store(str(tmp_path / "store"))
    for job in JOBS:
        store.put_profile(job, *canonical(local(job).to_dict()))
    model = load_models()["h100-mps"].id
    rng = np.random.default_rng(4)

    def add(n):
        records = []
        for _i in range(n):
            jobs = rng.choice(JOBS, size=2, replace=False)
            s = rng.uniform(1.05, 2.5, size=2)
            records.append(ObservationRecord(0, "mps", model, now_utc(), tuple(
                ObservationJob(str(j), float(x), float(x) * 0.9, float(x) * 0.95, float(np.log(1 / 0.95 + rng.normal(0, 0.01))))
                for j, x in zip(jobs, s)), None, f"r{rng.integers(1 << 60)}", {"profile_versions": [1, 1]}))
        store.add_observations(records)

    add(300)
    first = ServiceState(store, load_models())
    first.checkpoint()
    add(250)
    from_checkpoint = ServiceState(store, load_models())
    assert from_checkpoint.replayed == 250 * 2  # only the rows after the checkpoint were read
    monkeypatch.setattr(type(store), "latest_checkpoint", lambda self, models: None)
    full = ServiceState(store, load_models())
    assert full.replayed == 550 * 2
    assert from_checkpoint.fingerprint() == full.fingerprint()
    assert from_checkpoint.models["h100-mps"].predictor.offsets == full.models["h100-mps"].predictor.offsets
