"""``/metrics`` in Prometheus' text format (prometheus_client).

  colopred_requests_total{method, endpoint, status}    requests answered, by route template (never the raw path)
  colopred_request_seconds{method, endpoint}           latency histogram
  colopred_predictions_total{mode, model}              sets predicted (predict, predict_many, the extender's GPUs),
                                                       by the version that answered (``NAME@SHA256[:12]``)
  colopred_observations_total{mode}                    observations stored by this process's requests
  colopred_observations_quarantined_total{kind}        observations this process's requests kept in quarantine
  colopred_model_version{model, id}                    the version number serving each model name (0: the one
                                                       the server started with), its ``NAME@SHA256[:12]`` as ``id``
  colopred_observations_stored{mode}                   observations in the store (the state every worker shares)
  colopred_rolling_error_pct{mode}                     mean |predicted - measured| / measured, in %, of the last
                                                       ROLLING_ERRORS observed jobs: each prediction as served at
                                                       the time, against the slowdown later measured for that set
  colopred_job_rolling_error_pct{mode, job}          the same of one job's last ROLLING_JOB_ERRORS observations,
                                                       for the DRIFT_JOBS_EXPORTED jobs of highest error (bounded)
  colopred_stale_threshold_pct{mode}                   DRIFT_STALE_FACTOR x the mode's model's cross-validated
                                                       (leave-architecture) MAPE, from its manifest
  colopred_model_stale{mode}                           1 where the rolling error, over at least
                                                       DRIFT_MIN_JOB_ROWS job rows, is above the threshold
  colopred_profiles, colopred_nodes, colopred_observed_jobs{model}, colopred_cache_hits_total, _misses_total

With several worker processes, ``colopred serve`` points ``PROMETHEUS_MULTIPROC_DIR`` at a private folder before
they start, and a scrape adds up every worker's counters and histograms (prometheus_client's multiprocess mode); the
figures read from the state are the same in every worker (it is rebuilt from the store) and come from the one asked.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

BUCKETS = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

REQUESTS = Counter("colopred_requests", "Requests answered", ("method", "endpoint", "status"))
LATENCY = Histogram("colopred_request_seconds", "Time to answer a request", ("method", "endpoint"), buckets=BUCKETS)
PREDICTIONS = Counter("colopred_predictions", "Sets predicted, by the model version that answered", ("mode", "model"))
OBSERVATIONS = Counter("colopred_observations", "Observations stored by this server's requests", ("mode",))
QUARANTINED = Counter("colopred_observations_quarantined", "Observations this server's requests kept in quarantine, by kind",
                      ("kind",))


class StateCollector:
    """The figures every worker reads from the same rebuilt state."""

    def __init__(self, state_of: Callable[[], Any]):
        self.state_of = state_of

    def collect(self):
        state = self.state_of()
        if state is None:
            return
        err = GaugeMetricFamily("colopred_rolling_error_pct", "Mean absolute % error of the last observed jobs' predictions "
                                "as served at the time", labels=["mode"])
        stored = GaugeMetricFamily("colopred_observations_stored", "Observations in the store", labels=["mode"])
        for mode in sorted(state.rolling):
            value = state.rolling_error_pct(mode)
            if value == value:  # not NaN: some observation of the mode
                err.add_metric([mode], value)
            stored.add_metric([mode], state.observation_counts.get(mode, 0))
        yield err
        yield stored
        from .state import DRIFT_JOBS_EXPORTED

        per_job = GaugeMetricFamily("colopred_job_rolling_error_pct", "Mean absolute % error of one job's last observed "
                                    "predictions as served at the time (the jobs of highest error)", labels=["mode", "job"])
        for r in state.job_drift(limit=DRIFT_JOBS_EXPORTED):
            per_job.add_metric([r["mode"], r["job"]], r["rolling_error_pct"])
        yield per_job
        threshold = GaugeMetricFamily("colopred_stale_threshold_pct", "Rolling error above which a mode's model is "
                                      "stale", labels=["mode"])
        stale = GaugeMetricFamily("colopred_model_stale", "1: the mode's rolling error is above its stale threshold",
                                  labels=["mode"])
        for mode, d in state.drift().items():
            if d["threshold_pct"] is not None:
                threshold.add_metric([mode], d["threshold_pct"])
            stale.add_metric([mode], 1.0 if d["stale"] else 0.0)
        yield threshold
        yield stale
        yield GaugeMetricFamily("colopred_profiles", "Registered profiles", value=len(state.profiles))
        yield GaugeMetricFamily("colopred_nodes", "Nodes reported", value=len(state.nodes))
        jobs = GaugeMetricFamily("colopred_observed_jobs", "Jobs whose predictions observations shift", labels=["model"])
        versions = GaugeMetricFamily("colopred_model_version", "The version serving each model name (0: the start-up "
                                     "model)", labels=["model", "id"])
        with state.lock:
            for m in state.models.values():
                jobs.add_metric([m.name], len(m.sums))
                versions.add_metric([m.name, m.id], m.version)
        yield jobs
        yield versions
        yield CounterMetricFamily("colopred_cache_hits", "Answers served from the cache",
                                  value=state.predictions.hits + state.set_values.hits)
        yield CounterMetricFamily("colopred_cache_misses", "Answers computed",
                                  value=state.predictions.misses + state.set_values.misses)


def exposition(state_of: Callable[[], Any]) -> tuple[bytes, str]:
    """The scrape's text: this process's metrics, or every worker's in multiprocess mode, plus the state's."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        from prometheus_client import REGISTRY as registry  # type: ignore[no-redef]
    extra = CollectorRegistry()
    extra.register(StateCollector(state_of))
    return generate_latest(registry) + generate_latest(extra), CONTENT_TYPE_LATEST


class MetricsMiddleware:
    """ASGI middleware: counts and times every HTTP request by its route's template."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0 = time.perf_counter()
        status = 500

        async def tracked(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        finally:
            route = scope.get("route")
            endpoint = getattr(route, "path_format", None) or getattr(route, "path", None) or "(unrouted)"
            method = scope.get("method", "")
            LATENCY.labels(method, endpoint).observe(time.perf_counter() - t0)
            REQUESTS.labels(method, endpoint, str(status)).inc()
