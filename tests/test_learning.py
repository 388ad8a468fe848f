"""colopred learns from the cluster it serves: observations validated (implausible ones quarantined with their reason),
model versions in the store and the models folder, a running server switching versions without a restart, rollback,
and ``colopred train --store`` promoting a new version only when it beats the one serving on the latest observations.
Real server processes on loopback; the observations posted are measured windows of ``datasets/h100``."""

from __future__ import annotations

import csv
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from colopred.profile import JobProfile
from colopred.runtime.manifest import default_model_path
from colopred.runtime.observed import Observation
from colopred.runtime.predictor import Predictor

from .service_support import PROFILES, ROOT, Server, call, profile_doc

JOBS = ("resnet18-b64-fp32", "gpt2_small-b8-bf16", "lstm_lm-b64-fp32")
DATA = ROOT / "datasets" / "h100"


def post(server: Server, path: str, body=None, raw: bytes | None = None, **kw):
    status, headers, data = call(server.url + path, "POST", body, raw=raw, **kw)
    return status, json.loads(data), {k.lower(): v for k, v in headers.items()}


def get(server: Server, path: str):
    status, headers, data = call(server.url + path)
    ctype = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    return status, json.loads(data) if ctype.startswith("application/json") else data.decode()


def register(server: Server, jobs) -> None:
    for job in jobs:
        assert call(server.url + f"/v1/profiles/{job}", "PUT", profile_doc(job))[0] in (200, 201)


def poisoned(jobs=JOBS[:2]) -> list[tuple[str, dict | bytes]]:
    """One observation of each kind a scheduler's bad feedback takes, each as (the kind expected, the body)."""
    a, b = jobs
    nan = json.dumps({"mode": "mps", "jobs": [a, b], "slowdowns": [1.5, 1.2]}).replace("1.5", "NaN").encode()
    return [("unknown_job", {"mode": "mps", "jobs": [a, "no-such-job"], "slowdowns": [1.5, 1.2]}),
            ("implausible_slowdown", {"mode": "mps", "jobs": [a, b], "slowdowns": [150.0, 1.2]}),
            ("not_finite", nan),
            ("not_finite", {"mode": "mps", "jobs": [a, b], "solo_ms": [1e-320, 10.0], "colocated_ms": [1e300, 12.0]}),
            ("gpu_mismatch", {"mode": "mps", "jobs": [a, b], "slowdowns": [1.5, 1.2], "gpu_type": "NVIDIA A100-SXM4-40GB"}),
            ("gpu_mismatch", {"mode": "mps", "jobs": [a, b], "slowdowns": [1.5, 1.2], "gpu": "NVIDIA A100-SXM4-80GB"}),
            ("implausible_slowdown", {"mode": "mps", "jobs": [a, b], "slowdowns": [0.1, 1.2]}),
            ("mode_mismatch", {"mode": "mps", "jobs": [a, b], "slowdowns": [1.5, 1.2], "gpu": "node-ts:0"})]


def post_poison(server: Server, jobs=JOBS[:2]) -> list[tuple[str, dict]]:
    """Post :func:`poisoned`; every one answered 202 with its kind. Returns (kind, answer)."""
    assert call(server.url + "/v1/nodes/node-ts", "PUT", {"mode": "timeslice", "gpus": [{"name": "0"}]})[0] in (200, 201)
    out = []
    for kind, body in poisoned(jobs):
        status, doc, headers = post(server, "/v1/observations", raw=body if isinstance(body, bytes) else json.dumps(body).encode())
        assert status == 202 and doc["quarantined"] and doc["kind"] == kind, (kind, status, doc)
        assert doc["reason"].startswith(doc["field"]) and "\n" not in doc["reason"]
        assert headers["location"] == f"/v1/quarantine/{doc['id']}"
        out.append((kind, doc))
    return out


def test_a_poisoned_stream_is_quarantined_each_with_its_reason_and_moves_nothing(tmp_path):
    with Server(tmp_path / "store") as s:
        register(s, JOBS)
        _, before, _ = post(s, "/v1/predict", {"mode": "mps", "jobs": list(JOBS[:2])})
        held = post_poison(s)
        # nothing quarantined moved a prediction or was counted as an observation
        _, after, _ = post(s, "/v1/predict", {"mode": "mps", "jobs": list(JOBS[:2])})
        assert after == before and all(j["observations"] == 0 for j in after["jobs"])
        _, models = get(s, "/v1/models")
        assert all(m["observations"] == 0 for m in models["models"])
        # kept, queryable, newest first, by job and by kind; the NaN as a string in strict JSON
        status, listed = get(s, "/v1/quarantine")
        assert status == 200 and [q["id"] for q in listed["quarantined"]] == [d["id"] for _, d in reversed(held)]
        assert listed["counts"] == {"unknown_job": 1, "implausible_slowdown": 2, "not_finite": 2, "gpu_mismatch": 2,
                                    "mode_mismatch": 1}
        nan = next(d for k, d in held if k == "not_finite")
        assert get(s, f"/v1/quarantine/{nan['id']}")[1]["body"]["slowdowns"][0] == "NaN"
        _, by_job = get(s, "/v1/quarantine?job=no-such-job")
        assert [q["kind"] for q in by_job["quarantined"]] == ["unknown_job"]
        _, by_kind = get(s, "/v1/quarantine?kind=gpu_mismatch")
        assert {q["field"] for q in by_kind["quarantined"]} == {"gpu", "gpu_type"}
        assert get(s, "/v1/quarantine?kind=bogus")[0] == 422
        # a retried post with the same key is kept once; the key is refused for another body, accepted or held
        body = {"mode": "mps", "jobs": list(JOBS[:2]), "slowdowns": [150.0, 1.2], "idempotency_key": "q-1"}
        first, again = post(s, "/v1/observations", body), post(s, "/v1/observations", body)
        assert (first[0], again[0]) == (202, 200) and first[1] == again[1] and again[2]["idempotent-replayed"] == "true"
        assert post(s, "/v1/observations", {**body, "slowdowns": [1.5, 1.2]})[0] == 409
        ok = {"mode": "mps", "jobs": list(JOBS[:2]), "slowdowns": [1.5, 1.2], "idempotency_key": "ok-1"}
        assert post(s, "/v1/observations", ok)[0] == 201
        assert post(s, "/v1/observations", {**ok, "slowdowns": [150.0, 1.2]})[0] == 409
        # malformed requests are refused, not kept
        for raw in (b'{"mode": "mps", "jobs": ["a"', json.dumps({"mode": "mps", "jobs": [JOBS[0], JOBS[0]], "slowdowns": [1, 1]}).encode(),
                    json.dumps({"mode": "mps", "jobs": list(JOBS[:2]), "slowdowns": [1.5]}).encode()):
            assert post(s, "/v1/observations", raw=raw)[0] in (400, 422)
        assert get(s, "/v1/quarantine")[1]["counts"]["implausible_slowdown"] == 3
        _, text = get(s, "/metrics")
        assert 'colopred_observations_quarantined_total{kind="not_finite"} 2.0' in text
        assert 'colopred_model_version{id="h100-mps@' in text
        assert 'colopred_predictions_total{mode="mps",model="h100-mps@' in text
    with Server(tmp_path / "store") as s:  # kept across a restart, still never applied
        assert get(s, "/v1/quarantine")[1]["counts"]["not_finite"] == 2
        _, models = get(s, "/v1/models")
        assert next(m for m in models["models"] if m["name"] == "h100-mps")["observations"] == 2


def _version_of_shipped(models_dir: Path, store, name: str = "h100-mps", tag: str = "v1") -> tuple[int, str]:
    """The shipped model written as a trained version would be (another manifest, so another id), recorded in the
    store unpromoted; returns (version, id)."""
    from colopred.research.retrain import write_version
    from colopred.service.versions import model_id

    pred = Predictor.load(default_model_path("mps"))
    path, sha = write_version(models_dir, name, Predictor(pred.model, "mps"), {**{k: v for k, v in pred.manifest.items()
                                                                                 if k not in ("files",)}, "tag": tag}, "origin\n")
    mv, _ = store.add_model_version(name, model_id(name, sha), sha, path.relative_to(models_dir).as_posix(), "mps", "ncu",
                                    {"training": {"tag": tag}})
    return mv.version, mv.model_id


def test_a_running_server_serves_a_promoted_version_without_a_restart_and_rolls_back(tmp_path):
    from colopred.service.store import open_store

    with Server(tmp_path / "store") as s:
        register(s, JOBS)
        status, rec, _ = post(s, "/v1/observations", {"mode": "mps", "jobs": list(JOBS[:2]), "slowdowns": [2.1, 1.2]})
        start_id = rec["model"]
        store = open_store(str(tmp_path / "store"))
        version, vid = _version_of_shipped(tmp_path / "store" / "models", store)
        assert vid != start_id
        _, doc, headers = post(s, "/v1/predict", {"mode": "mps", "jobs": list(JOBS[:2])})
        assert headers["x-colopred-model"] == start_id  # recorded, not promoted: nothing changes
        status, ev, _ = post(s, "/v1/models/h100-mps/promote", {"version": version, "reason": "test"})
        assert status == 201 and ev["serving"] == {"version": version, "id": vid}
        _, doc, headers = post(s, "/v1/predict", {"mode": "mps", "jobs": list(JOBS[:2])})
        assert headers["x-colopred-model"] == vid
        # the observation taken under the start-up model shifts the new version's predictions as Predictor.observe would
        profiles = {j: JobProfile.from_json(PROFILES / f"{j}.json") for j in JOBS[:2]}
        expected = Predictor.default("mps").observe([Observation(tuple(profiles[j] for j in JOBS[:2]), (2.1, 1.2))])
        assert np.allclose([j["slowdown"] for j in doc["jobs"]], expected.predict(list(profiles.values())).slowdown, rtol=1e-12)
        assert [j["observations"] for j in doc["jobs"]] == [1, 1]
        # another process writing an event (colopred models rollback) is applied at the next request
        r = subprocess.run([sys.executable, "-m", "colopred", "models", "rollback", "h100-mps", "--store", str(tmp_path / "store")],
                           capture_output=True, text=True, cwd=ROOT)
        assert r.returncode == 0 and json.loads(r.stdout)["version"] == 0, r.stderr
        _, _, headers = post(s, "/v1/predict", {"mode": "mps", "jobs": list(JOBS[:2])})
        assert headers["x-colopred-model"] == start_id
        status, err, _ = post(s, "/v1/models/h100-mps/rollback", {})  # back to the version before the rollback
        assert status == 201 and err["serving"]["version"] == version
        _, versions = get(s, "/v1/models/h100-mps/versions")
        assert versions["serving"]["version"] == version and [e["action"] for e in versions["events"]] == ["promote", "rollback", "rollback"]
        assert post(s, "/v1/models/h100-mps/promote", {"version": 9})[0] == 404
        assert post(s, "/v1/models/nope/rollback", {})[0] == 404
        # a version whose files were changed is refused; the version serving stays
        bad_version, _ = _version_of_shipped(tmp_path / "store" / "models", store, tag="v2")
        manifest = tmp_path / "store" / "models" / store.model_version("h100-mps", bad_version).path
        manifest.write_text(manifest.read_text().replace('"tag": "v2"', '"tag": "v3"'))
        status, ev, _ = post(s, "/v1/models/h100-mps/promote", {"version": bad_version})
        assert status == 201 and ev["serving"]["version"] == version and "checksum" in ev["serving"]["error"]
        _, fingerprint = get(s, "/v1/models/h100-mps/offsets")
    with Server(tmp_path / "store") as s:  # a restart serves what the store's events say, with the same offsets
        _, _, headers = post(s, "/v1/predict", {"mode": "mps", "jobs": list(JOBS[:2])})
        assert headers["x-colopred-model"] == vid
        assert get(s, "/v1/models/h100-mps/offsets")[1] == fingerprint


def test_the_store_keeps_versions_events_and_quarantine_apart():
    import tempfile

    from colopred.service.store import IdempotencyConflict, QuarantineRecord, StoreError, now_utc, open_store
    from colopred.service.versions import previous_version

    with tempfile.TemporaryDirectory() as d:
        store = open_store(d)
        assert store.active_versions() == {} and previous_version([]) is None
        v1, ev = store.add_model_version("m", "m@1", "1" * 64, "m/1/m.json", "mps", "ncu", {"a": 1}, promote="better")
        v2, none = store.add_model_version("m", "m@2", "2" * 64, "m/2/m.json", "mps", "ncu", {})
        assert (v1.version, v2.version, none) == (1, 2, None) and ev.version == 1
        assert store.active_versions()["m"].version == 1 and store.model_version_by_id("m@2") == v2
        store.add_model_event("m", "promote", 2, "operator")
        assert previous_version(store.model_events("m")) == 1
        store.add_model_event("m", "rollback", 1, "back")
        assert previous_version(store.model_events("m")) == 2
        with pytest.raises(StoreError):
            store.add_model_event("m", "promote", 5, "none such")
        q = QuarantineRecord(0, "not_finite", "slowdowns[0]", "slowdowns[0]: NaN", now_utc(), "mps", ("a", "b"),
                             {"slowdowns": [math.nan, 1.0]}, "key", "sha")
        first, new = store.add_quarantined(q)
        assert new and first.to_dict()["body"]["slowdowns"] == ["NaN", 1.0]
        assert store.add_quarantined(q) == (first, False)
        with pytest.raises(IdempotencyConflict):
            store.add_quarantined(QuarantineRecord(0, "not_finite", None, "x", now_utc(), "mps", ("a",), {}, "key", "other"))
        assert store.quarantined(job="b")[0].seq == first.seq and store.quarantined(job="c") == []


def _small_dataset(root: Path, campaigns=("h100-c12", "h100-c14")) -> Path:
    (root / "campaigns").mkdir(parents=True)
    for c in campaigns:
        shutil.copytree(DATA / "campaigns" / c, root / "campaigns" / c)
    shutil.copytree(DATA / "profiles" / "ncu", root / "profiles" / "ncu")
    return root


def _measured_windows(campaigns=("h100-c10", "h100-c11", "h100-c13")):
    """Measured MPS windows of campaigns the small dataset does not hold: what a cluster would report."""
    from colopred.measurement.harness.reader import read_windows, slowdown_table

    sl = slowdown_table(read_windows([DATA / "campaigns" / c for c in campaigns]))
    return sl[sl["mode"] == "mps"]


@pytest.mark.slow
def test_train_from_the_store_promotes_only_a_version_that_beats_the_serving_one_and_learns_nothing_quarantined(tmp_path):
    small = _small_dataset(tmp_path / "small")
    r = subprocess.run([sys.executable, "-m", "colopred", "train", "--data", str(small), "--out", str(tmp_path / "base" / "small"),
                        "--modes", "mps", "--no-metrics", "-q"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    base = tmp_path / "base" / "small-mps.json"
    windows = _measured_windows()
    store_dir = tmp_path / "store"
    train = [sys.executable, "-m", "colopred", "train", "--store", str(store_dir), "--data", str(small), "--model", str(base),
             "--modes", "mps", "-q"]
    with Server(store_dir, "--model", str(base)) as s:
        register(s, sorted(windows["job"].unique()))
        # only poison so far: nothing to learn from, no version
        held = post_poison(s, jobs=tuple(sorted(windows["job"].unique())[:2]))
        r = subprocess.run(train, capture_output=True, text=True, cwd=ROOT)
        assert r.returncode == 0 and json.loads(r.stdout)[0]["version"] is None, r.stderr
        # the measured stream, the poison again in the middle of it
        for i, (wid, g) in enumerate(windows.groupby("window_id", sort=False)):
            status, _, _ = post(s, "/v1/observations", {"mode": "mps", "jobs": list(g["job"]), "solo_ms": list(g["solo_ms"]),
                                                        "colocated_ms": list(g["colo_ms"]), "gpu_type": "NVIDIA H100 80GB HBM3",
                                                        "time": str(g["started_at"].iloc[0]), "idempotency_key": wid})
            assert status == 201
            if i == 60:
                post_poison(s, jobs=tuple(g["job"].iloc[:2]))
        start_id = post(s, "/v1/predict", {"mode": "mps", "jobs": list(windows["job"].unique()[:2])})[2]["x-colopred-model"]
        r = subprocess.run(train, capture_output=True, text=True, cwd=ROOT)
        assert r.returncode == 0, r.stderr
        result = json.loads(r.stdout)[0]
        cmp = result["comparison"]
        assert result["version"] == 1 and cmp["rows"] >= 40
        # the rule: promoted only with the margin and the bootstrap bound, and then better on the held-out rows
        assert result["promoted"] == (cmp["gain_points"] > 0 and cmp["gain_lower_points"] > 0)
        assert result["promoted"], cmp  # a model of 73 sets, taught by ~150 more measured ones, beats the one of 73
        assert cmp["candidate_mape_pct"] < cmp["current_mape_pct"]
        _, _, headers = post(s, "/v1/predict", {"mode": "mps", "jobs": list(windows["job"].unique()[:2])})
        assert headers["x-colopred-model"] == result["id"] != start_id  # no restart
        # the version's files: a strict-JSON manifest with checksums, the training rows with their provenance
        _, versions = get(s, "/v1/models/small-mps/versions")
        v = versions["versions"][0]
        folder = (store_dir / "models" / v["path"]).parent
        assert sorted(p.name for p in folder.iterdir()) == ["small-mps.interval.ubj", "small-mps.json", "small-mps.point.ubj",
                                                           "training_rows.csv"]
        manifest = json.loads((folder / "small-mps.json").read_text())
        assert manifest["observations"]["observations"] == v["training"]["observations"]
        rows = list(csv.DictReader((folder / "training_rows.csv").open()))
        accepted = {o["id"] for o in get(s, "/v1/observations?job=" + windows["job"].iloc[0] + "&limit=1000")[1]["observations"]}
        assert rows and {r["origin"] for r in rows} == {"observation"} and {r["predicted_by"] for r in rows} == {start_id}
        assert all(r["gpu_type"] == "NVIDIA H100 80GB HBM3" and r["time"] for r in rows)
        seen = {int(r["observation"]) for r in rows}
        assert max(seen) == v["training"]["through_observation"] < v["training"]["held_out_from_observation"]
        assert {int(r["observation"]) for r in rows if r["job"] == windows["job"].iloc[0]} <= accepted
        assert all(0.5 <= float(r["slowdown"]) <= 25 for r in rows)  # no 150x, no NaN
        assert "no-such-job" not in {r["job"] for r in rows}
        counts = get(s, "/v1/quarantine")[1]["counts"]
        assert sum(counts.values()) == 2 * len(held)
        # the same store trained again learns nothing new: no worse version is promoted
        r = subprocess.run(train, capture_output=True, text=True, cwd=ROOT)
        again = json.loads(r.stdout)[0]
        assert r.returncode == 0 and again["version"] == 2 and not again["promoted"], again
        assert post(s, "/v1/predict", {"mode": "mps", "jobs": list(windows["job"].unique()[:2])})[2]["x-colopred-model"] == result["id"]
