#!/usr/bin/env python3
"""Benchmark: colopred serve as a real server process on loopback, driven by concurrent HTTP clients. Prints a table.

  python scripts/bench_service.py                         # everything, 1 and 2 worker processes
  python scripts/bench_service.py --parts predict,k8s --workers 1

Parts:
  predict   POST /v1/predict of a pair by registered names, 32 connections: latency at a fixed rate (default 500/s)
            and the most the server answers (closed loop), for one pair asked again and again (cached answers) and
            for pairs drawn at random among 10,000 registered profiles (nearly every answer computed)
  k8s       /k8s/filter then /k8s/prioritize of one pod over 1,000 reported nodes of 2 GPUs each (nodeCacheCapable:
            node names; and the full Node objects), a new pod's profile each time
  pack      POST /v1/pack of 1,000 jobs on 500 GPUs (max 2 per GPU), by registered names
  memory    resident memory of the server holding 10,000 profiles and 1,000,000 observations, after answering
            predictions; and how long it takes to start on that store (the state rebuilt from it)
  inprocess the same predictions with Predictor in this process, for scale

Load generator: wrk (Debian's ``wrk``, C, with a Lua script per scenario; at a fixed rate each connection waits
``delay()`` between its requests, so the latency measured is the server's, not the wait) for the predict figures;
Python's http.client for the rest (one request at a time: those figures are per-request latencies). Without wrk the
predict rows are measured with a Python asyncio client and say so.

The store is seeded directly through the store's interface (not over HTTP): 10,000 profiles are the shipped ncu
profiles re-timed to distinct solo times, and the 1,000,000 observations are SYNTHETIC, marked so in their records
(slowdown = the model's prediction times log-normal noise): they measure the server's memory and start-up, not any
accuracy.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colopred.profile import JobProfile  # noqa: E402
from tests.service_support import Server, call  # noqa: E402

PROFILES = ROOT / "datasets" / "h100" / "profiles" / "ncu"
CONNECTIONS = 32


# ------------------------------------------------------------------------------------------------ seeding
def population(n: int) -> list[JobProfile]:
    """``n`` distinct profiles: the shipped ncu profiles, each re-timed to several solo times (0.8x to 1.2x)."""
    base = [JobProfile.from_json(p) for p in sorted(PROFILES.glob("*.json"))]
    per = math.ceil(n / len(base))
    out = []
    for i, f in enumerate(np.linspace(0.8, 1.2, per)):
        for p in base:
            out.append(p.retimed(p.iteration_ms * f).with_(name=f"{p.name}.t{i}"))
    return out[:n]


def seed_profiles(store_dir: Path, profiles: list[JobProfile]) -> None:
    from colopred.service.store import open_store

    store = open_store(str(store_dir))
    items = []
    for p in profiles:
        doc = p.to_dict()
        items.append((p.name, doc, hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()))
    for lo in range(0, len(items), 2000):
        store.put_profiles(items[lo:lo + 2000])
    store.close()


def seed_observations(store_dir: Path, profiles: list[JobProfile], n: int, log) -> None:
    """``n`` SYNTHETIC observations of random pairs and triples (mps), each with the model's real prediction."""
    from colopred.runtime.predictor import Predictor
    from colopred.service.state import load_models
    from colopred.service.store import ObservationJob, ObservationRecord, now_utc, open_store

    models = load_models()
    m = models["h100-mps"]
    raw = Predictor(m.predictor.model, "mps", m.predictor.manifest)
    store = open_store(str(store_dir))
    rng = np.random.default_rng(60)
    t0 = time.perf_counter()
    chunk = 20_000
    for lo in range(0, n, chunk):
        k = min(chunk, n - lo)
        sizes = rng.choice([2, 2, 3], size=k)
        sets = [list(rng.choice(len(profiles), size=s, replace=False)) for s in sizes]
        pred = raw.predict_many([[profiles[i] for i in s] for s in sets])["slowdown"].to_numpy()
        noise = np.exp(rng.normal(0, 0.06, size=len(pred)))
        measured = pred * noise
        records, pos = [], 0
        at = now_utc()
        for s in sets:
            jobs = tuple(ObservationJob(profiles[i].name, float(measured[pos + j]), float(pred[pos + j]), float(pred[pos + j]),
                                        float(np.log(measured[pos + j] / pred[pos + j]))) for j, i in enumerate(s))
            pos += len(s)
            records.append(ObservationRecord(0, "mps", m.id, at, jobs, None, "synthetic",
                                             {"profile_versions": [1] * len(s), "synthetic": "scripts/bench_service.py"}))
        store.add_observations(records)
        log(f"  seeded {lo + k:,} observations ({time.perf_counter() - t0:.0f} s)")
    store.close()


# ------------------------------------------------------------------------------------------------ measuring
def rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def tree_rss(pid: int) -> dict[int, float]:
    """Resident MiB of a process and its children (uvicorn's supervisor and workers)."""
    out = {pid: rss_mib(pid)}
    try:
        kids = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    except FileNotFoundError:
        kids = []
    for k in kids:
        out.update(tree_rss(int(k)))
    return out


def load_average() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def wrk_lua(names: list[str], pair: tuple[str, str] | None, delay_ms: float | None) -> str:
    names_lua = ",".join(json.dumps(n) for n in names)
    body = ('\'{"mode":"mps","jobs":["' + pair[0] + '","' + pair[1] + '"]}\'') if pair else None
    lines = ['wrk.method = "POST"', 'wrk.headers["Content-Type"] = "application/json"']
    if body:
        lines.append(f"wrk.body = {body}")
    else:
        lines += [f"local names = {{{names_lua}}}", "local counter = 0",
                  "function setup(thread) thread:set('id', counter); counter = counter + 1 end",
                  "function init(args) math.randomseed(os.time() * 100 + id) end",
                  "request = function()",
                  "  local a = names[math.random(#names)]",
                  "  local b = names[math.random(#names)]",
                  "  while b == a do b = names[math.random(#names)] end",
                  "  return wrk.format(nil, nil, nil, '{\"mode\":\"mps\",\"jobs\":[\"' .. a .. '\",\"' .. b .. '\"]}')",
                  "end"]
    if delay_ms is not None:
        lines.append(f"delay = function() return {delay_ms:.1f} end")
    lines.append("done = function(summary, latency, requests)")
    lines.append("  io.write(string.format('RESULT %d %d %d %f %f %f\\n', summary.requests, summary.errors.status, "
                 "summary.duration, latency:percentile(50), latency:percentile(99), latency.mean))")
    lines.append("end")
    return "\n".join(lines) + "\n"


def run_wrk(url: str, lua: str, seconds: int, tmp: Path) -> dict:
    script = tmp / f"bench-{random.randrange(10**9)}.lua"
    script.write_text(lua)
    r = subprocess.run(["wrk", "-t2", f"-c{CONNECTIONS}", f"-d{seconds}s", "-s", str(script), "--latency", url + "/v1/predict"],
                       capture_output=True, text=True, timeout=seconds + 60)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("RESULT")), None)
    if line is None:
        raise RuntimeError(f"wrk: {r.stdout}\n{r.stderr}")
    n, bad, dur_us, p50, p99, _mean = line.split()[1:]
    non2xx = next((int(ln.split(":")[1]) for ln in r.stdout.splitlines() if "Non-2xx" in ln), 0)
    return {"requests": int(n), "rate": int(n) / (int(dur_us) / 1e6), "p50_ms": float(p50) / 1e3, "p99_ms": float(p99) / 1e3,
            "errors": int(bad) + non2xx}


def run_python_load(url: str, names: list[str], pair, rate: float | None, seconds: int) -> dict:
    """The fallback load generator: asyncio, 32 connections (HTTP/1.1 keep-alive), optional fixed rate."""
    import asyncio

    host, port = url.split("//")[1].split(":")
    lat: list[float] = []
    errors = [0]

    async def conn_loop(deadline: float, interval: float | None):
        reader, writer = await asyncio.open_connection(host, int(port))
        rng = random.Random()
        nxt = time.perf_counter()
        while time.perf_counter() < deadline:
            a, b = pair or rng.sample(names, 2)
            body = json.dumps({"mode": "mps", "jobs": [a, b]}).encode()
            if interval:
                nxt += interval
                await asyncio.sleep(max(0.0, nxt - time.perf_counter()))
            t0 = time.perf_counter()
            writer.write(b"POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
                         + str(len(body)).encode() + b"\r\n\r\n" + body)
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(next(h.split(b":")[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")))
            await reader.readexactly(length)
            lat.append(time.perf_counter() - t0)
            if not head.startswith(b"HTTP/1.1 200"):
                errors[0] += 1
        writer.close()

    async def main():
        deadline = time.perf_counter() + seconds
        interval = CONNECTIONS / rate if rate else None
        await asyncio.gather(*(conn_loop(deadline, interval) for _ in range(CONNECTIONS)))

    t0 = time.perf_counter()
    asyncio.run(main())
    el = time.perf_counter() - t0
    lat.sort()
    return {"requests": len(lat), "rate": len(lat) / el, "p50_ms": 1e3 * lat[len(lat) // 2],
            "p99_ms": 1e3 * lat[int(len(lat) * 0.99)], "errors": errors[0]}


def bench_predict(server: Server, names: list[str], rate: float, seconds: int, tmp: Path, rows: list, label: str) -> None:
    have_wrk = shutil.which("wrk") is not None
    pair = (names[0], names[1])
    for which, p in (("one pair again and again", pair), ("random pairs of 10,000 profiles", None)):
        for mode, r in (("fixed rate", rate), ("closed loop", None)):
            if have_wrk:
                # each connection sends, waits for the answer, then waits delay(): a few ms less than the period
                # so that the answers' own time does not bring the rate under the target
                delay = None if r is None else max(0.0, 1000.0 * CONNECTIONS / r - 5.0)
                res = run_wrk(server.url, wrk_lua(names, p, delay), seconds, tmp)
                gen = "wrk"
            else:
                res = run_python_load(server.url, names, p, r, seconds)
                gen = "python asyncio"
            rows.append((label, f"predict pair by name, {which}", f"{mode}{'' if r is None else f' {r:.0f}/s'}, {CONNECTIONS} conn. ({gen})",
                         f"{res['rate']:.0f}/s", f"{res['p50_ms']:.2f}", f"{res['p99_ms']:.2f}",
                         f"errors {res['errors']}, load {load_average()}"))
            print(" | ".join(rows[-1]), flush=True)


def bench_k8s(server: Server, names: list[str], rows: list, label: str, pods: int = 30) -> None:
    rng = random.Random(7)
    nodes = [f"node-{i:04d}" for i in range(1000)]
    for n in nodes:  # what runs where: 0 to 2 jobs on each of 2 GPUs
        gpus = [{"name": str(g), "memory_gib": 79.6, "running": rng.sample(names, rng.choice((0, 1, 1, 2)))} for g in range(2)]
        status, _, _ = call(f"{server.url}/v1/nodes/{n}", "PUT", {"mode": "mps", "gpus": gpus})
        assert status in (200, 201)
    items = [{"metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}},
              "status": {"allocatable": {"nvidia.com/gpu": "2", "cpu": "64", "memory": "512Gi"}}} for n in nodes]
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)  # kept alive, as kube-scheduler's client does

    def post(path: str, body: dict) -> tuple[int, bytes]:
        conn.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, r.read()

    for kind in ("NodeNames", "Nodes"):
        filt, prio, both = [], [], []
        for i in range(pods):
            pod = {"metadata": {"name": f"train-{i}", "namespace": "ml", "annotations": {
                "colopred.io/profile": rng.choice(names), "colopred.io/max-slowdown": "2.5"}}}
            args = {"Pod": pod, **({"NodeNames": nodes} if kind == "NodeNames" else {"Nodes": {"items": items}})}
            t0 = time.perf_counter()
            s1, d1 = post("/k8s/filter", args)
            t1 = time.perf_counter()
            passed = json.loads(d1)
            kept = passed["NodeNames"] if kind == "NodeNames" else [n["metadata"]["name"] for n in passed["Nodes"]["items"]]
            args2 = {"Pod": pod, **({"NodeNames": kept} if kind == "NodeNames" else
                                    {"Nodes": {"items": [x for x in items if x["metadata"]["name"] in set(kept)]}})}
            s2, _ = post("/k8s/prioritize", args2)
            t2 = time.perf_counter()
            assert s1 == 200 and s2 == 200
            filt.append(t1 - t0)
            prio.append(t2 - t1)
            both.append(t2 - t0)
        rows.append((label, f"k8s filter + prioritize, 1,000 nodes x 2 GPUs ({kind})", f"{pods} pods, one at a time",
                     f"{1 / statistics.median(both):.0f} pods/s", f"{1e3 * statistics.median(both):.1f}",
                     f"{1e3 * max(both):.1f}", f"one kept-alive connection; filter p50 {1e3 * statistics.median(filt):.1f} ms, prioritize p50 "
                     f"{1e3 * statistics.median(prio):.1f} ms, load {load_average()}"))
        print(" | ".join(rows[-1]), flush=True)


def bench_pack(server: Server, names: list[str], rows: list, label: str, runs: int = 3) -> None:
    body = {"mode": "mps", "jobs": [{"profile": n} for n in names[:1000]], "n_gpus": 500, "limits": {"max_per_gpu": 2}}
    times, placed = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        status, _, data = call(server.url + "/v1/pack", "POST", body, timeout=600)
        times.append(time.perf_counter() - t0)
        assert status == 200, data[:300]
        placed = json.loads(data)
    rows.append((label, "pack 1,000 jobs on 500 GPUs (max 2 per GPU), by name", f"{runs} runs, one at a time", "",
                 f"{1e3 * statistics.median(times):.0f}", f"{1e3 * max(times):.0f}",
                 f"placed {placed['placed']}, throughput {placed['throughput']:.1f} ({placed['solver']}), load {load_average()}"))
    print(" | ".join(rows[-1]), flush=True)


def bench_memory(store: Path, workers: int, names: list[str], rows: list, tmp: Path) -> None:
    t0 = time.perf_counter()
    server = Server(store, *(["--workers", str(workers)] if workers > 1 else []), log=tmp / f"mem-{workers}.log")
    start_s = time.perf_counter() - t0
    try:
        rng = random.Random(3)
        for _ in range(3000):  # answers computed and cached, as a serving server holds them
            call(server.url + "/v1/predict", "POST", {"mode": "mps", "jobs": rng.sample(names, 2)})
        health = json.loads(call(server.url + "/healthz")[2])
        rss = tree_rss(server.proc.pid)
        worker_rss = sorted(rss.values())[-workers:] if workers > 1 else list(rss.values())
        rows.append((f"{workers} worker{'s' if workers > 1 else ''}", "resident memory, 10,000 profiles + 1,000,000 observations",
                     "after 3,000 predictions", "", "", "",
                     f"{' + '.join(f'{v:.0f}' for v in worker_rss)} MiB per worker"
                     + (f" (+ {min(rss.values()):.0f} MiB supervisor)" if workers > 1 else "")
                     + f"; started in {start_s:.1f} s; {health['profiles']:,} profiles, {health['observations']:,} observations"))
        print(" | ".join(rows[-1]), flush=True)
    finally:
        server.stop()


def bench_inprocess(profiles: list[JobProfile], rows: list) -> None:
    from colopred.runtime.predictor import Predictor

    pred = Predictor.default("mps")
    rng = random.Random(5)
    pairs = [rng.sample(profiles, 2) for _ in range(2000)]
    lat = []
    for a, b in pairs:
        t0 = time.perf_counter()
        pred.predict([a, b])
        lat.append(time.perf_counter() - t0)
    lat.sort()
    rows.append(("in-process", "Predictor.predict of a pair", "2,000 distinct pairs, one at a time",
                 f"{len(lat) / sum(lat):.0f}/s", f"{1e3 * lat[len(lat) // 2]:.2f}", f"{1e3 * lat[int(len(lat) * 0.99)]:.2f}",
                 f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '(unset)')}"))
    print(" | ".join(rows[-1]), flush=True)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        placed = pred.pack(profiles[:1000], n_gpus=500, max_per_gpu=2)
        el = time.perf_counter() - t0
    rows.append(("in-process", "Predictor.pack of the same 1,000 jobs on 500 GPUs", "once", "", f"{1e3 * el:.0f}", "",
                 f"placed {placed.placed}, throughput {placed.throughput:.1f} ({placed.solver})"))
    print(" | ".join(rows[-1]), flush=True)
    t0 = time.perf_counter()
    sets = [rng.sample(profiles, 2) for _ in range(100_000)]
    pred.predict_many(sets)
    el = time.perf_counter() - t0
    rows.append(("in-process", "Predictor.predict_many", "100,000 distinct pairs at once", f"{len(sets) / el:,.0f} sets/s",
                 "", "", f"{el:.1f} s"))
    print(" | ".join(rows[-1]), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="predict,k8s,pack,memory,inprocess")
    ap.add_argument("--workers", default="1,2", help="worker processes to measure, comma separated")
    ap.add_argument("--rate", type=float, default=500.0, help="requests per second of the fixed-rate runs")
    ap.add_argument("--seconds", type=int, default=15, help="length of each predict run")
    ap.add_argument("--profiles", type=int, default=10_000)
    ap.add_argument("--observations", type=int, default=1_000_000)
    ap.add_argument("--keep", help="a folder to keep the seeded stores in (reused when present)")
    a = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    parts = set(a.parts.split(","))
    workers = [int(w) for w in a.workers.split(",")]
    tmp = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="bench-service-"))
    tmp.mkdir(parents=True, exist_ok=True)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    profiles = population(a.profiles)
    names = [p.name for p in profiles]
    rows: list[tuple] = []
    print(f"machine: {os.cpu_count()} cores, load average {load_average()} at start; wrk: {shutil.which('wrk') or 'absent'}",
          flush=True)
    try:
        if parts & {"predict", "k8s", "pack"}:
            store = tmp / "store-profiles"
            if not (store / "colopred.sqlite3").exists():
                log(f"seeding {len(profiles):,} profiles")
                seed_profiles(store, profiles)
            for w in workers:
                label = f"{w} worker{'s' if w > 1 else ''}"
                server = Server(store, *(["--workers", str(w)] if w > 1 else []), log=tmp / f"serve-{w}.log")
                try:
                    if "predict" in parts:
                        bench_predict(server, names, a.rate, a.seconds, tmp, rows, label)
                    if "k8s" in parts:
                        bench_k8s(server, names[:2000], rows, label)
                    if "pack" in parts:
                        bench_pack(server, names, rows, label)
                finally:
                    server.stop()
        if "memory" in parts:
            store = tmp / "store-observations"
            if not (store / "colopred.sqlite3").exists():
                log(f"seeding {len(profiles):,} profiles and {a.observations:,} synthetic observations")
                seed_profiles(store, profiles)
                seed_observations(store, profiles, a.observations, log)
            for w in workers:
                bench_memory(store, w, names, rows, tmp)
        if "inprocess" in parts:
            bench_inprocess(profiles, rows)
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    head = ("server", "what", "how", "throughput", "p50 ms", "p99 / max ms", "notes")
    print()
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print(f"\nmax resident set of this benchmark process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
