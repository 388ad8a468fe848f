"""colopred serve under abuse, as a real process on loopback: a bounded soak of valid and malformed requests, and
SIGKILL in the middle of a stream of observations, repeated. Bounded in count and time; marked slow."""

from __future__ import annotations

import http.client
import json
import math
import random
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from .service_support import Server, call, profile_doc

pytestmark = pytest.mark.slow

JOBS = ("resnet18-b64-fp32", "gpt2_small-b8-bf16", "lstm_lm-b64-fp32", "alexnet-b128-fp32", "resnet50-b64-fp32",
        "vgg16-b32-fp32", "unet-b8-fp32", "dlrm-b512-fp32")
SOAK_REQUESTS = 20_000
SOAK_THREADS = 8


def _registered(server: Server) -> list[str]:
    for job in JOBS:
        status, _, _ = call(f"{server.url}/v1/profiles/{job}", "PUT", profile_doc(job))
        assert status in (200, 201)
    return list(JOBS)


class Conn:
    """One keep-alive connection per thread."""

    def __init__(self, port: int):
        self.port = port
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def send(self, method: str, path: str, body: bytes | None, ctype: str = "application/json") -> tuple[int, bytes]:
        headers = {"Content-Type": ctype} if body is not None else {}
        for attempt in (0, 1):
            try:
                self.c.request(method, path, body=body, headers=headers)
                r = self.c.getresponse()
                data = r.read()
                if r.getheader("connection", "").lower() == "close":
                    self.c.close()
                return r.status, data
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.c.close()
                self.c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                if attempt:
                    raise
        raise AssertionError("unreachable")


def _malformed(rng: random.Random, names: list[str]) -> tuple[str, str, bytes, str]:
    a, b = rng.sample(names, 2)
    kind = rng.randrange(16)
    if kind == 14:
        return "POST", "/v1/predict", b"[" * 50_000 + b"]" * 50_000, "application/json"
    if kind == 15:
        return "POST", "/v1/observations", b'{"mode": "mps", "jobs": ["\xff\xfe"]}', "application/json"
    if kind == 0:
        return "POST", "/v1/predict", b'{"mode": "mps", "jobs": ["' + a.encode() + b'", ', "application/json"
    if kind == 1:
        return "POST", "/v1/predict", json.dumps({"mode": "mps", "jobs": [a, rng.choice([3, None, True, [1], 2.5])]}).encode(), "application/json"
    if kind == 2:
        return "POST", "/v1/observations", f'{{"mode": "timeslice", "jobs": ["{a}", "{b}"], "slowdowns": [NaN, 1.2]}}'.encode(), "application/json"
    if kind == 3:
        return "POST", "/v1/predict", json.dumps({"mode": "mps", "jobs": [a, f"unknown-{rng.randrange(10**6)}"]}).encode(), "application/json"
    if kind == 4:
        return "POST", "/v1/predict", json.dumps({"mode": "mps", "jobs": []}).encode(), "application/json"
    if kind == 5:
        return "POST", "/v1/predict", json.dumps({"mode": "mps", "jobs": [a] * 17}).encode(), "application/json"
    if kind == 6:  # over the body limit (the server runs with --max-body-mib 1)
        return "POST", "/v1/predict", b'{"mode": "mps", "jobs": ["' + b"z" * (1024 * 1024 + 10) + b'"]}', "application/json"
    if kind == 7:
        return "POST", "/v1/predict", json.dumps({"mode": "mps", "jobs": ["ジョブ", "naïve-job"]}, ensure_ascii=False).encode(), "application/json"
    if kind == 8:
        return "POST", "/v1/predict", json.dumps({"mode": "mps", "jobs": ["n" * 10_000, b]}).encode(), "application/json"
    if kind == 9:
        return "POST", "/v1/observations", json.dumps({"mode": "timeslice", "jobs": [a, b], "slowdowns": [1.2]}).encode(), "application/json"
    if kind == 10:
        return "POST", "/v1/pack", json.dumps({"mode": "mps", "jobs": [{"profile": "/etc/passwd"}], "n_gpus": 1}).encode(), "application/json"
    if kind == 11:
        return "PUT", f"/v1/profiles/{a}-bad", json.dumps({**profile_doc(a), "busy_fraction": "high"}).encode(), "application/json"
    if kind == 12:
        return "POST", "/k8s/filter", json.dumps({"Pod": {"metadata": {"annotations": {"colopred.io/profile": a,
                                                                                       "colopred.io/max-slowdown": "lots"}}},
                                                  "NodeNames": ["n1"]}).encode(), "application/json"
    return "POST", "/v1/predict", b"mode=mps&jobs=a", "application/x-www-form-urlencoded"


def _valid(rng: random.Random, names: list[str]) -> tuple[str, str, bytes, str]:
    kind = rng.randrange(6)
    k = rng.choice((2, 2, 2, 3))
    jobs = rng.sample(names, k)
    if kind <= 2:
        return "POST", "/v1/predict", json.dumps({"mode": rng.choice(("mps", "timeslice")), "jobs": jobs}).encode(), "application/json"
    if kind == 3:
        return "POST", "/v1/observations", json.dumps({"mode": "timeslice", "jobs": jobs,
                                                       "slowdowns": [round(rng.uniform(1.05, 2.5), 3) for _ in jobs]}).encode(), "application/json"
    if kind == 4:
        return "POST", "/v1/rank", json.dumps({"mode": "mps", "job": {"profile": jobs[0]},
                                               "candidates": [{"profile": j} for j in names if j != jobs[0]]}).encode(), "application/json"
    return "GET", "/v1/profiles", None, ""


def test_soak_of_valid_and_malformed_requests_gives_no_5xx_and_named_fields(tmp_path):
    rng = random.Random(60)
    with Server(tmp_path / "store", "--max-body-mib", "1") as server:
        names = _registered(server)
        probe = json.dumps({"mode": "mps", "jobs": names[:2]}).encode()
        reference = Conn(server.port).send("POST", "/v1/predict", probe)
        assert reference[0] == 200
        plan = [(_malformed if i % 5 == 4 else _valid)(rng, names) for i in range(SOAK_REQUESTS)]
        local = threading.local()
        counts: dict[int, int] = {}
        problems: list[str] = []
        observed = [0]
        lock = threading.Lock()

        def one(req):
            conn = getattr(local, "conn", None) or Conn(server.port)
            local.conn = conn
            method, path, body, ctype = req
            status, data = conn.send(method, path, body, ctype)
            with lock:
                counts[status] = counts.get(status, 0) + 1
                if status == 201 and path == "/v1/observations":
                    observed[0] += 1
            if status >= 500:
                problems.append(f"{status} for {method} {path} {body[:80] if body else b''!r}: {data[:200]!r}")
            elif status >= 400:
                doc = json.loads(data)
                if set(doc) != {"error", "field", "status"} or doc["status"] != status or not isinstance(doc["error"], str):
                    problems.append(f"{status} without the JSON error: {data[:200]!r}")
                elif doc["field"] is not None and not doc["error"].startswith(doc["field"]):
                    problems.append(f"{status} whose message does not name its field: {doc}")
                elif doc["field"] is None and status not in (405,):
                    problems.append(f"{status} naming no field: {doc}")

        t0 = time.monotonic()
        with ThreadPoolExecutor(SOAK_THREADS) as pool:
            list(pool.map(one, plan))
        elapsed = time.monotonic() - t0
        assert not problems, problems[:5]
        assert sum(counts.values()) == SOAK_REQUESTS and not any(s >= 500 for s in counts)
        # every malformed one refused, or quarantined (an observation carrying NaN: 202, kept, never applied)
        assert sum(n for s, n in counts.items() if s >= 400 or s == 202) >= SOAK_REQUESTS // 5
        # still up, and answering as before (observations went to the other mode)
        after = Conn(server.port).send("POST", "/v1/predict", probe)
        assert after == reference
        status, _, data = call(server.url + "/healthz")
        assert status == 200 and json.loads(data)["observations"] == observed[0]
        print(f"soak: {SOAK_REQUESTS} requests in {elapsed:.1f} s ({SOAK_REQUESTS / elapsed:.0f}/s), statuses {dict(sorted(counts.items()))}")


KILL_ROUNDS = 4


def _sums_from_store(path, model: str, head: int) -> dict[str, tuple[float, int]]:
    """Each job's (sum of log ratios, count) of ``model`` over the observations up to ``head``, in seq order: the
    state the server's offsets hold, computed apart from the server's own code."""
    db = sqlite3.connect(path)
    out: dict[str, tuple[float, int]] = {}
    for job, lr in db.execute("SELECT j.job, j.log_ratio FROM observation_jobs j JOIN observations o ON o.seq = j.seq "
                              "WHERE o.model LIKE ? AND j.seq <= ? ORDER BY j.seq, j.position", (model + "@%", head)):
        total, k = out.get(job, (0.0, 0))
        out[job] = (total + lr, k + 1)
    db.close()
    return out


def test_sigkill_during_observation_posts_loses_nothing_acknowledged(tmp_path):
    store = tmp_path / "store"
    db_path = store / "colopred.sqlite3"
    acked: dict[str, int] = {}
    rng = random.Random(61)
    for round_ in range(KILL_ROUNDS):
        workers = ("--workers", "2") if round_ % 2 else ()
        server = Server(store, *workers)
        names = _registered(server)
        snapshots: list[dict] = []
        stop = threading.Event()

        def poster(tid: int):
            conn = Conn(server.port)
            i = 0
            while not stop.is_set():
                jobs = rng.sample(names, 2)
                key = f"r{round_}-t{tid}-{i}"
                body = json.dumps({"mode": "mps", "jobs": jobs, "slowdowns": [1.1 + (i % 7) / 10, 1.3],
                                   "idempotency_key": key}).encode()
                try:
                    status, data = conn.send("POST", "/v1/observations", body)
                except (OSError, http.client.HTTPException):
                    return  # the server died mid-request: not acknowledged
                if status in (200, 201):
                    acked[key] = json.loads(data)["id"]
                i += 1

        def watcher():
            conn = Conn(server.port)
            while not stop.is_set():
                try:
                    status, data = conn.send("GET", "/v1/models/h100-mps/offsets", None)
                except (OSError, http.client.HTTPException):
                    return
                if status == 200:
                    snapshots.append(json.loads(data))
                time.sleep(0.05)

        threads = [threading.Thread(target=poster, args=(t,)) for t in range(4)] + [threading.Thread(target=watcher)]
        for t in threads:
            t.start()
        time.sleep(rng.uniform(0.8, 2.5))
        server.kill()  # SIGKILL to the server's process group, mid-stream
        stop.set()
        for t in threads:
            t.join(60)
        # the store is whole: integrity, and every observation with all its jobs
        db = sqlite3.connect(db_path)
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        half = db.execute("SELECT COUNT(*) FROM observations o WHERE o.n_jobs != (SELECT COUNT(*) FROM observation_jobs j "
                          "WHERE j.seq = o.seq)").fetchone()[0]
        orphans = db.execute("SELECT COUNT(*) FROM observation_jobs j LEFT JOIN observations o ON o.seq = j.seq "
                             "WHERE o.seq IS NULL").fetchone()[0]
        db.close()
        assert half == 0 and orphans == 0
        # every acknowledged observation is there after a restart, as acknowledged
        server = Server(store)
        try:
            for key, oid in acked.items():
                status, _, data = call(f"{server.url}/v1/observations/{oid}")
                assert status == 200 and json.loads(data)["idempotency_key"] == key
            # the state rebuilt equals the state the killed server served, up to its last snapshot...
            if snapshots:
                last = snapshots[-1]
                sums = _sums_from_store(db_path, "h100-mps", last["heads"]["observations"])
                assert {j: (v["sum_log_ratio"], v["observations"]) for j, v in last["jobs"].items()} == sums
            # ...and the whole store, as a second restart rebuilds it too
            status, _, data = call(f"{server.url}/v1/models/h100-mps/offsets")
            rebuilt = json.loads(data)
            head = rebuilt["heads"]["observations"]
            assert {j: (v["sum_log_ratio"], v["observations"]) for j, v in rebuilt["jobs"].items()} == \
                _sums_from_store(db_path, "h100-mps", head)
        finally:
            server.stop()
        with Server(store) as again:
            assert json.loads(call(f"{again.url}/v1/models/h100-mps/offsets")[2]) == rebuilt
    assert len(acked) > 20 * KILL_ROUNDS
    print(f"kill: {KILL_ROUNDS} rounds, {len(acked)} acknowledged observations, all present after restart")
    assert all(math.isfinite(v) for v in acked.values())
