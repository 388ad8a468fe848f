"""The service's store in a real PostgreSQL server: two replicas share one database, and a restart rebuilds the same
state. The test starts a private cluster in a temporary folder with Debian's ``postgresql`` binaries (about 5 s);
where they are not installed it is skipped, saying so."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from .service_support import Server, call, free_port, profile_doc

JOBS = ("resnet18-b64-fp32", "gpt2_small-b8-bf16", "lstm_lm-b64-fp32")


def _bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


@pytest.fixture(scope="module")
def postgres(tmp_path_factory):
    initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip("no PostgreSQL server binaries (Debian: apt-get install postgresql)")
    pytest.importorskip("psycopg")
    # its own folder in the system's temporary folder: pytest's are private to this user, and PostgreSQL runs as its own
    folder = Path(tempfile.mkdtemp(prefix="colopred-pg-"))
    data = folder / "data"
    as_user: list[str] = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root: run it as its own user
        if shutil.which("runuser") is None:
            pytest.skip("running as root without runuser: cannot start PostgreSQL as another user")
        shutil.chown(folder, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    t0 = time.monotonic()
    subprocess.run([*as_user, initdb, "-D", str(data), "-A", "trust", "-U", "colopred", "--no-sync", "-E", "UTF8"],
                   check=True, capture_output=True)
    subprocess.run([*as_user, pg_ctl, "-D", str(data), "-w", "-t", "60", "-l", str(folder / "pg.log"), "-o",
                    f"-k {folder} -p {port} -c listen_addresses='' -c fsync=on", "start"], check=True, capture_output=True)
    started_s = time.monotonic() - t0
    try:
        yield f"postgresql://colopred@/postgres?host={folder}&port={port}", started_s
    finally:
        subprocess.run([*as_user, pg_ctl, "-D", str(data), "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


def _post(server, path, body, **kw):
    status, _, data = call(server.url + path, "POST", body, **kw)
    return status, json.loads(data)


def test_replicas_share_a_postgresql_store_and_rebuild_the_same_state(postgres):
    url, started_s = postgres
    assert started_s < 60, f"PostgreSQL took {started_s:.0f} s to start"
    with Server(url) as a, Server(url) as b:
        for job in JOBS:
            assert call(f"{a.url}/v1/profiles/{job}", "PUT", profile_doc(job))[0] == 201
        status, first = _post(b, "/v1/predict", {"mode": "mps", "jobs": list(JOBS[:2])})  # b sees a's profiles
        assert status == 200 and first["jobs"][0]["observations"] == 0
        body = {"mode": "mps", "jobs": list(JOBS[:2]), "slowdowns": [2.0, 1.1], "idempotency_key": "pg-1"}
        assert _post(b, "/v1/observations", body)[0] == 201
        assert _post(a, "/v1/observations", body)[0] == 200  # the key is shared by the replicas
        assert _post(a, "/v1/observations", {**body, "slowdowns": [2.1, 1.1]})[1]["field"] == "idempotency_key"
        _post(a, "/v1/observations", {"mode": "mps", "jobs": [JOBS[0], JOBS[2]], "slowdowns": [1.4, 1.3]})
        pa = _post(a, "/v1/predict", {"mode": "mps", "jobs": list(JOBS[:2])})[1]
        pb = _post(b, "/v1/predict", {"mode": "mps", "jobs": list(JOBS[:2])})[1]
        assert pa == pb and [j["observations"] for j in pa["jobs"]] == [2, 1]
        offsets = json.loads(call(f"{a.url}/v1/models/h100-mps/offsets")[2])
        assert json.loads(call(f"{b.url}/v1/models/h100-mps/offsets")[2]) == offsets
    with Server(url) as c:
        assert json.loads(call(f"{c.url}/v1/models/h100-mps/offsets")[2]) == offsets
        assert _post(c, "/v1/predict", {"mode": "mps", "jobs": list(JOBS[:2])})[1] == pa
        status, _, data = call(f"{c.url}/v1/profiles/{JOBS[0]}/versions")
        assert status == 200 and len(json.loads(data)["versions"]) == 1


def test_the_postgresql_store_keeps_checkpoints_exactly(postgres):
    from colopred.service.store import open_store

    store = open_store(postgres[0])
    sums = {"m@1": {"a": (0.1 + 0.2, 3), "b": (-1e-17, 1)}, "m@2": {}}
    store.write_checkpoint(7, sums)
    store.write_checkpoint(7, sums)  # twice: kept once
    assert store.latest_checkpoint(["m@1", "m@2"]) == (7, sums)
    assert store.latest_checkpoint(["m@1", "m@3"]) is None
    store.close()


def test_replicas_of_a_postgresql_store_share_versions_rollbacks_and_quarantine(postgres, tmp_path):
    """A version promoted through one replica serves on the other at its next request (their models folder shared);
    a quarantined observation is kept once, whichever replica took it."""
    from colopred.runtime.manifest import default_model_path
    from colopred.runtime.predictor import Predictor
    from colopred.research.retrain import write_version
    from colopred.service.store import open_store
    from colopred.service.versions import model_id

    url, _ = postgres
    models = tmp_path / "models"
    pred = Predictor.load(default_model_path("timeslice"))
    path, sha = write_version(models, "h100-timeslice", Predictor(pred.model, "timeslice"),
                              {k: v for k, v in pred.manifest.items() if k != "files"} | {"tag": "pg"}, "origin\n")
    store = open_store(url)
    mv, _ = store.add_model_version("h100-timeslice", model_id("h100-timeslice", sha), sha,
                                    path.relative_to(models).as_posix(), "timeslice", "ncu", {})
    with Server(url, "--models-dir", str(models)) as a, Server(url, "--models-dir", str(models)) as b:
        for job in JOBS[:2]:
            assert call(f"{a.url}/v1/profiles/{job}", "PUT", profile_doc(job))[0] in (200, 201)
        body = {"mode": "timeslice", "jobs": list(JOBS[:2])}
        assert _post(a, "/v1/models/h100-timeslice/promote", {"version": mv.version})[0] == 201
        status, headers, _ = call(b.url + "/v1/predict", "POST", body)
        assert status == 200 and {k.lower(): v for k, v in headers.items()}["x-colopred-model"] == mv.model_id
        assert _post(b, "/v1/models/h100-timeslice/rollback", {})[0] == 201
        status, headers, _ = call(a.url + "/v1/predict", "POST", body)
        assert {k.lower(): v for k, v in headers.items()}["x-colopred-model"] != mv.model_id
        poison = {"mode": "timeslice", "jobs": [JOBS[0], "nobody"], "slowdowns": [1.5, 1.2], "idempotency_key": "pg-q"}
        first, again = _post(a, "/v1/observations", poison), _post(b, "/v1/observations", poison)
        assert (first[0], again[0]) == (202, 200) and first[1]["id"] == again[1]["id"]
        status, _, data = call(b.url + "/v1/quarantine")
        assert json.loads(data)["counts"] == {"unknown_job": 1}
