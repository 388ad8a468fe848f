"""A cluster trace replayed through a running ``colopred serve``, exactly as a scheduler would drive it.

``colopred simulate --server URL`` (:func:`replay`): the trace's jobs' profiles are registered (``PUT
/v1/profiles``, one per zoo job: the trace's jobs of one type are one workload, profiled once); at every arrival and
completion the scheduler asks ``POST /v1/pack`` for the waiting jobs (the first ``COLOPRED_WINDOW``), the running
ones pinned to their GPUs; when a set of jobs that shared a GPU ends (a job completes or another joins) its jobs'
*measured* slowdowns are posted (``POST /v1/observations``, the GPU and the simulated time given), and every later
answer of the service moves with them.

**Outcomes come from measurements, never from the model**, as in :mod:`.simulation`: jobs progress at the measured
slowdowns of the set they share (mean over its windows).

The scheduler filters before it asks, as kube-scheduler does before it calls an extender: a job may join a GPU only
where the resulting set was measured (the replay has no outcome for any other) and holds no job twice, the rules the
offline colopred policy's scorer enforces. Each decision sends the waiting jobs with as many empty GPUs as jobs asked
about (empty GPUs are interchangeable) and, only where those are too few (an empty GPU gains more throughput than any
set, slowdowns being at least 1), the occupied GPUs that some of them may join: of GPUs running the same jobs
(interchangeable) no more than there are jobs asked about, at most ``CANDIDATE_GPUS`` in all. Where the answer puts a
job on a set it predicts to do less than one job alone (normalised throughput < 1, which the offline policy never uses
either), the job waits for the next event (``unpaid``); where it puts a job on a GPU the filter refuses (``refused``),
the refused jobs are asked about once more, together, with only the GPUs some of them may join, and a job refused
again waits. A decision is at most two requests; its latency is theirs (client side, loopback). Each observation's
post is timed too. With ``report_nodes``, each node whose GPUs changed at an event is reported (``PUT /v1/nodes``, as
a node agent would), so ``/status`` shows the cluster as the replay goes.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from ..profile import JobProfile
from .simulation import COLOPRED_WINDOW, MeasuredSets, TraceJob, advance

CANDIDATE_GPUS = 100
"""Most occupied GPUs a request sends: kube-scheduler's floor of feasible nodes it scores in a large cluster
(``minFeasibleNodesToFind``)."""
GPUS_PER_NODE = 8
"""The replay's GPUs are ``node-K:G``, eight to a node, each node reported (``PUT /v1/nodes``) when its GPUs change."""


@dataclass
class ReplayLog:
    """What the scheduler saw: each decision's latency, each observation's error as served, the refusals."""

    decisions: list[dict[str, Any]] = field(default_factory=list)
    observations: list[dict[str, Any]] = field(default_factory=list)
    refused: int = 0
    """Jobs the answer put where the scheduler's filter refuses them (a set never measured, or a job twice)."""
    unpaid: int = 0
    """Jobs the answer put on a set it predicts to do less than one job alone (they wait)."""
    stopped_early: bool = False


def replicate(trace: Sequence[TraceJob], copies: int, seed: int = 0) -> list[TraceJob]:
    """``copies`` copies of the trace, each job's arrival moved by a seeded uniform draw within the trace's mean gap
    between arrivals (so the copies interleave instead of arriving at the same instant)."""
    arrivals = sorted(j.arrival_s for j in trace)
    gap = (arrivals[-1] - arrivals[0]) / max(1, len(arrivals) - 1)
    rng = random.Random(seed)
    out = []
    for c in range(copies):
        for j in trace:
            out.append(TraceJob(len(out), j.kind, j.zoo_job, j.arrival_s + (rng.uniform(0, gap) if c else 0.0), j.iterations))
    return out


def register_profiles(client: Any, trace: Sequence[TraceJob], profiles: dict[str, JobProfile]) -> list[str]:
    """``PUT /v1/profiles/{zoo job}`` of every zoo job of the trace; the names registered."""
    names = sorted({j.zoo_job for j in trace})
    for name in names:
        client.register(profiles[name].with_(meta={}), name=name)
    return names


def replay(client: Any, trace: Sequence[TraceJob], profiles: dict[str, JobProfile], sets: MeasuredSets, n_gpus: int,
           mode: str, max_per_gpu: int = 2, window: int = COLOPRED_WINDOW, max_events: int | None = None,
           max_wall_s: float | None = None, report_nodes: bool = True, max_gpus_sent: int = CANDIDATE_GPUS,
           log: Callable[[str], None] = lambda s: None) -> tuple[pd.DataFrame, ReplayLog]:
    """One replay through the service behind ``client`` (a :class:`colopred.client.Client`); a row per job as
    :func:`.simulation.simulate` gives (jobs not finished when ``max_events`` or ``max_wall_s`` stopped it have NaN
    times), and the scheduler's log."""
    register_profiles(client, trace, profiles)
    rec = ReplayLog()
    solo_s = {j.job_id: j.iterations * profiles[j.zoo_job].iteration_ms / 1e3 for j in trace}
    remaining = dict(solo_s)
    gpus: list[list[int]] = [[] for _ in range(n_gpus)]
    since = [0.0] * n_gpus
    queue: list[int] = []
    by_id = {j.job_id: j for j in trace}
    start: dict[int, float] = {}
    finish: dict[int, float] = {}
    where: dict[int, int] = {}
    busy_gpu_s = 0.0
    arrivals = sorted(trace, key=lambda j: (j.arrival_s, j.job_id))
    nxt, now, events = 0, 0.0, 0
    changed: set[int] = set()
    rotate = 0
    t_wall = time.perf_counter()

    def zoo(ids: Sequence[int]) -> list[str]:
        return [by_id[i].zoo_job for i in ids]

    def rate(g: int) -> dict[int, float]:
        return sets.speeds(gpus[g], lambda i: by_id[i].zoo_job)

    def set_ends(g: int) -> None:
        """GPU g's set is about to change: post what was measured of it, if it was shared and ran."""
        changed.add(g)
        ids = gpus[g]
        if len(ids) >= 2 and now > since[g]:
            names = zoo(ids)
            meas = sets.measured[frozenset(names)]
            t0 = time.perf_counter()
            doc = client.post_observation(names, [meas[n] for n in names], mode=mode, gpu=gpu_id(g),
                                          time=_iso(now), idempotency_key=f"replay-{mode}-g{g}-{since[g]:.3f}-{now:.3f}")
            ms = 1e3 * (time.perf_counter() - t0)
            for k, n in enumerate(names):
                rec.observations.append({"id": doc.get("id"), "from_s": since[g], "time_s": now, "gpu": g, "job": n, "set": "+".join(sorted(names)),
                                         "measured": meas[n], "predicted": doc["predicted"][k],
                                         "predicted_uncorrected": doc["predicted_uncorrected"][k], "post_ms": ms,
                                         "model": doc.get("model")})
        since[g] = now

    def gpu_id(g: int) -> str:
        return f"node-{g // GPUS_PER_NODE}:{g % GPUS_PER_NODE}"

    def report(changed: set[int]) -> None:
        """``PUT /v1/nodes/{name}`` of each node whose GPUs changed: what runs where, as a node agent reports it."""
        if not report_nodes:
            return
        for node in sorted({g // GPUS_PER_NODE for g in changed}):
            gs = range(node * GPUS_PER_NODE, min(n_gpus, (node + 1) * GPUS_PER_NODE))
            client.report_node(f"node-{node}", [{"name": str(g % GPUS_PER_NODE), "running": zoo(gpus[g])} for g in gs],
                               mode=mode)

    def instance_names(ids: Sequence[int]) -> dict[int, str]:
        """The name the service gives each job of a request listing ``ids`` in this order (a zoo job given n > 1
        times is n copies, JOB#1 .. JOB#n in order)."""
        counts: dict[str, int] = {}
        for i in ids:
            counts[by_id[i].zoo_job] = counts.get(by_id[i].zoo_job, 0) + 1
        seen: dict[str, int] = {}
        out = {}
        for i in ids:
            z = by_id[i].zoo_job
            seen[z] = seen.get(z, 0) + 1
            out[i] = z if counts[z] == 1 else f"{z}#{seen[z]}"
        return out

    def can_join(i: int, g: int) -> bool:
        """The scheduler's filter: GPU g has room, and the set it would run was measured and holds no job twice."""
        members = zoo(gpus[g]) + [by_id[i].zoo_job]
        return len(members) <= max_per_gpu and len(set(members)) == len(members) and sets.has(members)

    def candidates(asked: list[int], copies: int) -> list[int]:
        """The occupied GPUs some of ``asked`` may join, at most ``copies`` of each running set (GPUs running the same
        jobs are interchangeable, and no more than ``copies`` jobs can join them), ``max_gpus_sent`` in all, taken from
        where the last decision stopped (as kube-scheduler samples the nodes of a large cluster)."""
        nonlocal rotate
        seen: dict[tuple[str, ...], int] = {}
        out: list[int] = []
        for k in range(n_gpus):
            g = (rotate + k) % n_gpus
            if not gpus[g] or len(gpus[g]) >= max_per_gpu:
                continue
            key = tuple(sorted(zoo(gpus[g])))
            if seen.get(key, 0) >= copies or not any(can_join(i, g) for i in asked):
                continue
            seen[key] = seen.get(key, 0) + 1
            out.append(g)
            if len(out) == max_gpus_sent:
                rotate = (g + 1) % n_gpus
                break
        return out

    def ask(asked: list[int], sent: list[int]) -> tuple[list[tuple[int, list[int], float]], float]:
        """``POST /v1/pack`` of ``asked`` with the GPUs ``sent`` (their running jobs pinned): each GPU's joining jobs and
        predicted throughput, and the request's time (ms, client side)."""
        running = [i for g in sent for i in gpus[g]]
        names = instance_names(running + asked)
        body = {"mode": mode, "jobs": [{"profile": by_id[i].zoo_job} for i in running + asked],
                "gpus": [{"name": f"g{g}", "running": [names[i] for i in gpus[g]]} for g in sent],
                "limits": {"max_per_gpu": max_per_gpu}}
        t0 = time.perf_counter()
        doc = client.request("POST", "/v1/pack", body)[1]
        ms = 1e3 * (time.perf_counter() - t0)
        by_name = {names[i]: i for i in asked}
        out = []
        for gdoc in doc["gpus"]:
            joining = [by_name[n] for n in gdoc["jobs"] if n in by_name]
            if joining:
                out.append((int(gdoc["name"][1:]), joining, float(gdoc["throughput"])))
        return out, ms

    def admit(g: int, joining: list[int], throughput: float) -> list[int]:
        """Run what the service chose on GPU g where the scheduler's filter passes and the answer predicts the set to
        do at least as well as one job alone; the jobs the filter refused (a set never measured, or a job twice)."""
        members = zoo(gpus[g]) + zoo(joining)
        feasible = len(set(members)) == len(members) and sets.has(members)
        if feasible and len(members) > 1 and throughput < 1.0:  # predicted to do less than one job alone: they wait
            if gpus[g] or len(joining) == 1:
                rec.unpaid += len(joining)
                return []
            rec.unpaid += len(joining) - 1
            joining = joining[:1]
            feasible = True
        refused: list[int] = []
        if not feasible:
            if gpus[g] or len(joining) == 1:
                return joining
            joining, refused = joining[:1], joining[1:]  # an empty GPU takes the first alone: always measured
        set_ends(g)
        for i in joining:
            gpus[g].append(i)
            start[i] = now
            where[i] = g
        return refused

    def decide() -> None:
        nonlocal queue
        asked = queue[:window]
        if not asked:
            return
        empty = [g for g in range(n_gpus) if not gpus[g]]
        room = [] if len(empty) >= len(asked) else candidates(asked, len(asked))
        sent = room + empty[:len(asked)]
        if not sent:
            return
        placed, ms = ask(asked, sent)
        requests, refused = 1, []
        for g, joining, throughput in placed:
            refused += admit(g, joining, throughput)
        rec.refused += len(refused)
        again = sorted((i for i in refused if i not in where), key=asked.index)
        own = candidates(again, len(again)) + [g for g in range(n_gpus) if not gpus[g]][:len(again)] if again else []
        if own:  # one second round: the refused jobs, with only the GPUs some of them may join (refused again: they wait)
            placed, extra = ask(again, own)
            ms += extra
            requests += 1
            for g, joining, throughput in placed:
                admit(g, joining, throughput)
        queue = [i for i in queue if i not in where]
        rec.decisions.append({"event": events, "time_s": now, "ms": ms, "requests": requests, "jobs_asked": len(asked),
                              "gpus_sent": len(sent), "refused": len(refused), "admitted": sum(1 for i in asked if i in where),
                              "busy_gpus": sum(1 for x in gpus if x)})

    while nxt < len(arrivals) or queue or any(gpus):
        if (max_events is not None and events >= max_events) or (max_wall_s is not None and time.perf_counter() - t_wall > max_wall_s):
            rec.stopped_early = True
            break
        rates = {i: v for g in range(n_gpus) for i, v in rate(g).items()}
        t_arrive = arrivals[nxt].arrival_s if nxt < len(arrivals) else math.inf
        t = advance(rates, remaining, now, t_arrive)
        busy_gpu_s += (t - now) * sum(1 for g in gpus if g)
        now = t
        for g in range(n_gpus):
            done = [i for i in gpus[g] if remaining[i] <= 1e-9 * solo_s[i]]
            if done:
                set_ends(g)
                for i in done:
                    gpus[g].remove(i)
                    finish[i] = now
        while nxt < len(arrivals) and arrivals[nxt].arrival_s <= now:
            queue.append(arrivals[nxt].job_id)
            nxt += 1
        decide()
        report(changed)
        changed.clear()
        events += 1
        if events % 500 == 0:
            log(f"  {mode}, {n_gpus} GPUs: {events} events, {len(finish)} of {len(trace)} jobs done, "
                f"{len(rec.observations)} job rows observed")
    rows = [{"job_id": j.job_id, "kind": j.kind, "zoo_job": j.zoo_job, "arrival_s": j.arrival_s,
             "start_s": start.get(j.job_id, math.nan), "finish_s": finish.get(j.job_id, math.nan),
             "solo_s": solo_s[j.job_id], "gpu": where.get(j.job_id, -1)} for j in trace]
    out = pd.DataFrame(rows)
    out.attrs["busy_gpu_s"] = busy_gpu_s
    return out, rec


def error_by_decile(observations: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """The observed job rows in the order they were posted, in ten equal parts: MAPE of the predictions as served
    (with every earlier observation's offsets) and of the model's own (uncorrected) predictions."""
    d = pd.DataFrame(list(observations))
    if d.empty:
        return pd.DataFrame(columns=["decile", "rows", "served_mape_pct", "uncorrected_mape_pct"])
    d["part"] = np.minimum(9, (np.arange(len(d)) * 10) // len(d))
    d["served"] = 100 * (d["predicted"] - d["measured"]).abs() / d["measured"]
    d["raw"] = 100 * (d["predicted_uncorrected"] - d["measured"]).abs() / d["measured"]
    g = d.groupby("part")
    return pd.DataFrame({"decile": g.size().index + 1, "rows": g.size().to_numpy(), "served_mape_pct": g["served"].mean().to_numpy(),
                         "uncorrected_mape_pct": g["raw"].mean().to_numpy()})


def _iso(seconds: float) -> str:
    """Simulated time as ISO 8601: seconds after the trace's epoch (2026-01-01T00:00:00Z)."""
    from datetime import UTC, datetime, timedelta

    t = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=seconds)
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def run_replay(url: str, data_dir: str, trace_path: str, gpu_counts: Sequence[int], modes: Sequence[str],
               max_per_gpu: int = 2, copies: int = 1, max_events: int | None = None, max_wall_s: float | None = None,
               out_dir: str | None = None, token: str | None = None,
               log: Callable[[str], None] = lambda s: None) -> tuple[pd.DataFrame, dict[tuple[str, int], tuple[pd.DataFrame, ReplayLog]]]:
    """``colopred simulate --server URL``: the trace (``copies`` times, :func:`replicate`) replayed through the
    service at ``url`` in each mode and cluster size; a summary row per run (:func:`.simulation.summarize` of the jobs
    that finished, decision latency, observation error), and each run's jobs and log. With ``out_dir``, each run's
    ``replay-MODE-GPUS-{jobs,decisions,observations}.csv``."""
    from pathlib import Path

    from ..client import Client
    from ..errors import InputError
    from .dataset import load_dataset
    from .simulation import read_gavel_trace, summarize

    trace = read_gavel_trace(trace_path)
    if not trace:
        raise InputError(trace_path, "no single-GPU job in the trace")
    if copies > 1:
        trace = replicate(trace, copies)
    log(f"reading {data_dir}")
    ds = load_dataset(data_dir)
    missing = sorted({j.zoo_job for j in trace} - set(ds.profiles))
    if missing:
        raise InputError(data_dir, f"no profile of the mapped zoo job(s) {', '.join(missing)}")
    rows, runs = [], {}
    for mode in modes:
        sets = MeasuredSets(ds.for_mode(mode))
        for n in gpu_counts:
            log(f"{mode}, {n} GPUs: replaying {len(trace)} jobs through {url}")
            client = Client(url, mode=mode, token=token)
            run, rec = replay(client, trace, ds.profiles, sets, n, mode, max_per_gpu=max_per_gpu, max_events=max_events,
                              max_wall_s=max_wall_s, log=log)
            runs[(mode, n)] = (run, rec)
            done = run.dropna(subset=["finish_s"])
            ms = np.array([d["ms"] for d in rec.decisions]) if rec.decisions else np.array([math.nan])
            obs = pd.DataFrame(rec.observations)
            row: dict[str, Any] = {"mode": mode, "gpus": n, "jobs": len(trace), "finished": len(done),
                                   "decisions": len(rec.decisions), "decision_p50_ms": float(np.percentile(ms, 50)),
                                   "decision_p99_ms": float(np.percentile(ms, 99)), "decision_max_ms": float(ms.max()),
                                   "observed_rows": len(obs), "refused": rec.refused, "unpaid": rec.unpaid}
            if len(obs):
                row["served_mape_pct"] = float((100 * (obs["predicted"] - obs["measured"]).abs() / obs["measured"]).mean())
                row["uncorrected_mape_pct"] = float((100 * (obs["predicted_uncorrected"] - obs["measured"]).abs()
                                                     / obs["measured"]).mean())
                row["post_p50_ms"] = float(obs.drop_duplicates("id")["post_ms"].median())
            if len(done) == len(run):
                row.update(summarize(run))
            rows.append(row)
            if out_dir is not None:
                out = Path(out_dir)
                out.mkdir(parents=True, exist_ok=True)
                run.to_csv(out / f"replay-{mode}-{n}-jobs.csv", index=False)
                pd.DataFrame(rec.decisions).to_csv(out / f"replay-{mode}-{n}-decisions.csv", index=False)
                obs.to_csv(out / f"replay-{mode}-{n}-observations.csv", index=False)
    return pd.DataFrame(rows), runs
