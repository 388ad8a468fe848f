"""Drift (each mode's and each job's rolling error, the stale flag), the /status page seen in a real headless
browser, and a trace replayed through a real server process (``colopred simulate --server``)."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from colopred.client import Client
from colopred.constants import DRIFT_MIN_JOB_ROWS, DRIFT_STALE_FACTOR
from colopred.profile import JobProfile
from colopred.research.replay import replay
from colopred.research.simulation import MeasuredSets, TraceJob
from colopred.service.state import ROLLING_ERRORS, ROLLING_JOB_ERRORS

from .service_support import PROFILES, Server, call, profile_doc

A, B, C = "resnet18-b64-fp32", "gpt2_small-b8-bf16", "lstm_lm-b64-fp32"
BROWSER_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync")


def _get(server: Server, path: str):
    status, _h, data = call(server.url + path)
    return status, json.loads(data)


def _post_observations(server: Server, n: int) -> list[dict]:
    """``n`` observations of (A, B) and (A, C), measured alternately 1.8x and 0.6x above the model's own prediction
    (within the plausible 3x): the offsets cannot learn them away, the error stays high."""
    records = []
    for k in range(n):
        jobs = [A, B] if k % 2 == 0 else [A, C]
        status, raw = call(server.url + "/v1/predict", "POST", {"mode": "mps", "jobs": jobs})[0::2]
        assert status == 200
        base = [j["slowdown"] for j in json.loads(raw)["jobs"]]
        factor = 1.8 if (k // 2) % 2 == 0 else 0.6
        status, _h, data = call(server.url + "/v1/observations", "POST",
                                {"mode": "mps", "jobs": jobs, "slowdowns": [max(0.55, factor * s) for s in base]})
        assert status == 201, data
        records.append(json.loads(data))
    return records


def _errors(records: list[dict]) -> list[tuple[str, float]]:
    return [(job, 100 * abs(p - s) / s) for r in records for job, p, s in zip(r["jobs"], r["predicted"], r["slowdowns"])]


@pytest.fixture(scope="module")
def observed(tmp_path_factory):
    """A server with three profiles, a node report and 40 observations (80 job rows) posted."""
    store = tmp_path_factory.mktemp("status") / "store"
    with Server(store) as s:
        for job in (A, B, C):
            assert call(s.url + f"/v1/profiles/{job}", "PUT", profile_doc(job))[0] == 201
        assert call(s.url + "/v1/nodes/node-a", "PUT", {"mode": "mps", "gpus": [{"name": "0", "running": [A, B]},
                                                                                 {"name": "1", "running": []}]})[0] == 201
        yield s, _post_observations(s, 40)


def test_each_mode_and_job_has_its_rolling_error_and_the_stale_flag_follows_the_threshold(observed):
    server, records = observed
    errors = _errors(records)
    mode_err = sum(e for _, e in errors[-ROLLING_ERRORS:]) / len(errors[-ROLLING_ERRORS:])
    status, drift = _get(server, "/v1/drift")
    assert status == 200
    assert drift["modes"]["mps"]["rolling_error_pct"] == pytest.approx(mode_err, abs=1e-3)
    assert drift["modes"]["mps"]["rows"] == len(errors) >= DRIFT_MIN_JOB_ROWS
    cv = max(m["metrics"]["leave-arch"]["slowdown_mape_pct"] for m in _get(server, "/v1/models")[1]["models"]
             if m["mode"] == "mps")
    assert drift["modes"]["mps"]["threshold_pct"] == pytest.approx(DRIFT_STALE_FACTOR * cv, abs=1e-3)
    assert drift["modes"]["mps"]["stale"] is (mode_err > DRIFT_STALE_FACTOR * cv) is True  # 1.8x and 0.6x off
    assert drift["modes"]["timeslice"] == {**drift["modes"]["timeslice"], "rows": 0, "stale": False}
    for job in (A, B, C):
        own = [e for j, e in errors if j == job][-ROLLING_JOB_ERRORS:]
        (row,) = [r for r in drift["jobs"] if r["job"] == job]
        assert row["rows"] == len(own) and row["rolling_error_pct"] == pytest.approx(sum(own) / len(own), abs=1e-3)
    assert [r["rolling_error_pct"] for r in drift["jobs"]] == sorted((r["rolling_error_pct"] for r in drift["jobs"]), reverse=True)
    health = _get(server, "/healthz")[1]
    assert health["drift"] == drift["modes"]
    text = call(server.url + "/metrics")[2].decode()
    gauges = dict(re.findall(r'^colopred_job_rolling_error_pct\{job="([^"]+)",mode="mps"\} (\S+)$', text, re.M))
    assert {j: pytest.approx(float(v), abs=1e-3) for j, v in gauges.items()} == {r["job"]: r["rolling_error_pct"] for r in drift["jobs"]}
    assert re.search(rf'^colopred_model_stale\{{mode="mps"\}} {1.0 if drift["modes"]["mps"]["stale"] else 0.0}$', text, re.M)
    assert call(server.url + "/v1/drift?mode=gpu")[0] == 422


def test_the_status_page_refuses_a_bad_job_name_in_one_json_line(observed):
    server, _ = observed
    status, _h, data = call(server.url + "/status?job=" + "x" * 300)
    doc = json.loads(data)
    assert status == 422 and doc["field"] == "job" and doc["error"].startswith("job:")


def _browser() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _chromium(binary: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    profile.mkdir()
    return subprocess.run([binary, *BROWSER_FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True,
                          timeout=120, check=True)


def test_the_status_page_in_a_real_browser(observed, tmp_path):
    binary = _browser()
    if binary is None:
        if os.environ.get("COLOPRED_REQUIRE_BROWSER"):
            pytest.fail("COLOPRED_REQUIRE_BROWSER is set but no chromium binary is on PATH")
        pytest.skip("no chromium binary on PATH (Debian: apt-get install chromium; .ci/run installs it)")
    server, records = observed
    dom = _chromium(binary, tmp_path, "--dump-dom", server.url + "/status").stdout
    assert "colopred status" in dom and "node-a" in dom and A in dom and B in dom
    section = dom[dom.index('id="scatter"'):dom.index('id="error"')]
    assert section.count("<circle") == sum(len(r["jobs"]) for r in records) + 1  # a dot per job row, one in the legend
    assert "<polyline" in dom[dom.index('id="error"'):]
    drift = _get(server, "/v1/drift")[1]["modes"]["mps"]
    state = dom[dom.index('id="drift-mps-ncu"'):].split("</td>")[0]
    assert ("stale" if drift["stale"] else "ok") in state
    job_dom = _chromium(binary, tmp_path, "--dump-dom", f"{server.url}/status?job={C}").stdout
    table = job_dom[job_dom.index('id="job"'):]
    ids = [int(x) for x in re.findall(r"<tr><td>(\d+)</td>", table)]
    assert ids == sorted((r["id"] for r in records if C in r["jobs"]), reverse=True)
    shot = Path(os.environ.get("COLOPRED_STATUS_SCREENSHOT") or tmp_path / "status.png")
    _chromium(binary, tmp_path, f"--screenshot={shot}", "--window-size=1280,1000", "--hide-scrollbars", server.url + "/status")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert (int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")) == (1280, 1000)


def _sets(measured: dict) -> MeasuredSets:
    rows = [{"set": "+".join(sorted(members)), "job": job, "slowdown": s}
            for members, slow in measured.items() for job, s in zip(members, slow)]
    return MeasuredSets(pd.DataFrame(rows))


def test_a_trace_replayed_through_a_server_runs_at_the_measured_slowdowns(tmp_path):
    """Outcomes come from the measurements given, never from the service's predictions; only measured sets run; every
    shared set that ran is posted as an observation with its measured slowdowns, which the store then holds."""
    profiles = {n: JobProfile.from_json(PROFILES / f"{n}.json") for n in (A, B, C)}
    measured = {(A, B): (1.45, 1.7), (A, C): (1.3, 1.25)}  # B with C was never measured: it must never run
    sets = _sets(measured)
    zoo = [A, B, C, A, C, B, A, B]
    trace = [TraceJob(i, "x", z, 60.0 * i, round((300 + 70 * i) * 1e3 / profiles[z].iteration_ms)) for i, z in enumerate(zoo)]
    with Server(tmp_path / "store") as server:
        run, rec = replay(Client(server.url), trace, profiles, sets, n_gpus=2, mode="mps")
        stored = Client(server.url).observations(A, mode="mps", limit=1000)
    run = run.set_index("job_id")
    assert run["finish_s"].notna().all()
    lookup = {frozenset(k): dict(zip(k, v)) for k, v in measured.items()}
    obs = pd.DataFrame(rec.observations)
    assert len(obs) > 0
    for _, o in obs.iterrows():
        assert frozenset(o["set"].split("+")) in lookup  # only measured sets ran
        assert o["measured"] == lookup[frozenset(o["set"].split("+"))][o["job"]]
    # each job's progress: its time shared at the measured slowdowns plus its time alone is its solo work
    for i, r in run.iterrows():
        mine = [o for o in rec.observations if o["gpu"] == r["gpu"] and o["from_s"] >= r["start_s"] - 1e-6
                and o["time_s"] <= r["finish_s"] + 1e-6 and o["job"] == trace[i].zoo_job]
        shared = sum(o["time_s"] - o["from_s"] for o in mine)
        work = sum((o["time_s"] - o["from_s"]) / o["measured"] for o in mine) + (r["finish_s"] - r["start_s"] - shared)
        assert work == pytest.approx(r["solo_s"], rel=1e-6)
    assert {o["id"] for o in rec.observations if o["job"] == A} == {s["id"] for s in stored}
    assert len(rec.decisions) > 0 and all(d["ms"] > 0 and not math.isnan(d["ms"]) for d in rec.decisions)


@pytest.mark.parametrize("args, needle", [
    (["--replicate", "3"], "--replicate: only with --server URL"),
    (["--max-events", "10"], "--max-events: only with --server URL"),
    (["--server", "http://127.0.0.1:9", "--replicate", "0"], "--replicate: give a positive number"),
    (["--server", "http://127.0.0.1:9", "--max-wall-s", "-1"], "--max-wall-s: give a positive number"),
])
def test_simulate_replay_options_are_refused_in_one_line(capsys, args, needle):
    from colopred.cli import main

    code = main(["simulate", *args])
    err = capsys.readouterr().err
    assert code != 0 and needle in err and err.strip().count("\n") == 0, err
