"""A cluster trace replayed through a running ``colopred serve``, exactly as a scheduler would drive it.

``colopred simulate --server URL`` (:func:`replay`): the trace's jobs' profiles are registered (``PUT
/v1/profiles``, one per zoo job: the trace's jobs of one type are one workload, profiled once); at every arrival and
completion the scheduler asks ``POST /v1/pack`` for the waiting jobs (the first ``COLOPRED_WINDOW``), the running
ones pinned to their GPUs; when a set of jobs that shared a GPU ends (a job completes or another joins) its jobs'
*measured* slowdowns are posted (``POST /v1/observations``, the GPU and the simulated time given), and every later
answer of the service moves with them.

**Outcomes come from measurements, never from the model**, as in :mod:`.simulation`: jobs progress at the measured
slowdowns of the set they share (mean over its windows). The scheduler's own admission check stands between the
service's answer and the cluster, as the offline colopred policy's does: a job joins a GPU only where the resulting
set was measured, holds no job twice, and is predicted (by the service's answer) to do at least as well as one job
alone (predicted normalised throughput ≥ 1); else it waits for the next decision (counted in ``refused``).

The scheduler sends the GPUs that can take a job: every GPU with room, the empty ones at most as many as jobs asked
about (empty GPUs are interchangeable). Each decision's latency (the ``pack`` request, client side) and each
observation's post are timed.
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
from .simulation import COLOPRED_WINDOW, MeasuredSets, TraceJob


@dataclass
class ReplayLog:
    """What the scheduler saw: each decision's latency, each observation's error as served, the refusals."""

    decisions: list[dict[str, Any]] = field(default_factory=list)
    observations: list[dict[str, Any]] = field(default_factory=list)
    refused: int = 0
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
           max_wall_s: float | None = None, log: Callable[[str], None] = lambda s: None) -> tuple[pd.DataFrame, ReplayLog]:
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
    t_wall = time.perf_counter()

    def zoo(ids: Sequence[int]) -> list[str]:
        return [by_id[i].zoo_job for i in ids]

    def rate(g: int) -> dict[int, float]:
        ids = gpus[g]
        if len(ids) <= 1:
            return dict.fromkeys(ids, 1.0)
        meas = sets.measured[frozenset(zoo(ids))]
        return {i: 1.0 / meas[by_id[i].zoo_job] for i in ids}

    def set_ends(g: int) -> None:
        """GPU g's set is about to change: post what was measured of it, if it was shared and ran."""
        ids = gpus[g]
        if len(ids) >= 2 and now > since[g]:
            names = zoo(ids)
            meas = sets.measured[frozenset(names)]
            t0 = time.perf_counter()
            doc = client.post_observation(names, [meas[n] for n in names], mode=mode, gpu=f"g{g}",
                                          time=_iso(now), idempotency_key=f"replay-{mode}-g{g}-{since[g]:.3f}-{now:.3f}")
            ms = 1e3 * (time.perf_counter() - t0)
            for k, n in enumerate(names):
                rec.observations.append({"id": doc.get("id"), "time_s": now, "job": n, "set": "+".join(sorted(names)),
                                         "measured": meas[n], "predicted": doc["predicted"][k],
                                         "predicted_uncorrected": doc["predicted_uncorrected"][k], "post_ms": ms,
                                         "model": doc.get("model")})
        since[g] = now

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

    def decide() -> None:
        nonlocal queue
        asked = queue[:window]
        if not asked:
            return
        room = [g for g in range(n_gpus) if 0 < len(gpus[g]) < max_per_gpu]
        empty = [g for g in range(n_gpus) if not gpus[g]][:len(asked)]
        sent = room + empty
        if not sent:
            return
        running = [i for g in sent for i in gpus[g]]
        names = instance_names(running + asked)
        body = {"mode": mode, "jobs": [{"profile": by_id[i].zoo_job} for i in running + asked],
                "gpus": [{"name": f"g{g}", "running": [names[i] for i in gpus[g]]} for g in sent],
                "limits": {"max_per_gpu": max_per_gpu}}
        t0 = time.perf_counter()
        doc = client._post("/v1/pack", body)
        ms = 1e3 * (time.perf_counter() - t0)
        by_name = {names[i]: i for i in asked}
        admitted = 0
        for gdoc in doc["gpus"]:
            g = int(gdoc["name"][1:])
            joining = [by_name[n] for n in gdoc["jobs"] if n in by_name]
            if not joining:
                continue
            members = zoo(gpus[g]) + zoo(joining)
            ok = (len(set(members)) == len(members) and sets.has(members)
                  and (len(members) <= 1 or gdoc["throughput"] >= 1.0))
            if not ok:
                rec.refused += len(joining)
                # the scheduler's check refuses the set; a job alone on an empty GPU is always measured
                if not gpus[g] and len(joining) > 1:
                    joining = joining[:1]
                else:
                    continue
            set_ends(g)
            for i in joining:
                gpus[g].append(i)
                start[i] = now
                where[i] = g
                admitted += 1
        queue = [i for i in queue if i not in where]
        rec.decisions.append({"event": events, "time_s": now, "ms": ms, "jobs_asked": len(asked), "gpus_sent": len(sent),
                              "running_sent": len(running), "admitted": admitted, "busy_gpus": sum(1 for x in gpus if x)})

    while nxt < len(arrivals) or queue or any(gpus):
        if max_events is not None and events >= max_events or max_wall_s is not None and time.perf_counter() - t_wall > max_wall_s:
            rec.stopped_early = True
            break
        rates = {i: v for g in range(n_gpus) for i, v in rate(g).items()}
        t_done = min((now + remaining[i] / v for i, v in rates.items()), default=math.inf)
        t_arrive = arrivals[nxt].arrival_s if nxt < len(arrivals) else math.inf
        t = min(t_done, t_arrive)
        if t == math.inf:
            raise RuntimeError("jobs wait that no GPU can ever take")
        dt = t - now
        for i, v in rates.items():
            remaining[i] -= v * dt
        busy_gpu_s += dt * sum(1 for g in gpus if g)
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
    from datetime import datetime, timedelta, timezone

    t = datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=seconds)
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")
