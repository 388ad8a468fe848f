"""``Client``: a running ``colopred serve`` behind the methods of ``Predictor``.

  from colopred.client import Client
  c = Client("http://127.0.0.1:8000", mode="mps")          # token="..." where the server has --token-file
  c.register(JobProfile.from_json("a.json"))                # the registry: register, profile, profiles, delete_profile
  p = c.predict(["a", "b"])                                 # Prediction; jobs by registered name or as JobProfile
  c.predict_many([["a", "b"], ["a", "b", "c"]])             # DataFrame, as Predictor.predict_many
  c.rank_partners("a", ["b", "c"], k=2)                     # DataFrame
  c.pack(["a", "b", "c"], n_gpus=2, max_per_gpu=2)          # Placement
  c.observe([("a", "b"), (1.52, 1.30)])                     # stored on the server: every later answer moves

Answers are the server's, with the warnings it gave raised again here as ``UserWarning``. A refused request raises
:class:`RequestRefused` (a ``ValueError``; ``status``, ``field`` and the server's one-line message), an unreachable
server :class:`ServerUnreachable`. Only the standard library is needed to talk to the server (the CLI's ``--server``
path imports nothing else); pandas and the runtime are imported for the answers that are frames or runtime types.
"""

from __future__ import annotations

import http.client
import json
import os
import threading
import uuid
import warnings
from typing import Any, Sequence
from urllib.parse import quote, urlencode, urlsplit

from .errors import ColopredError


class ServerUnreachable(ColopredError):
    """No answer from the server (refused, reset, timed out)."""


class RequestRefused(ColopredError, ValueError):
    """The server refused the request: HTTP ``status``, the ``field`` it names, its one-line message."""

    def __init__(self, status: int, field: str | None, message: str):
        self.status, self.field, self.message = status, field, message
        super().__init__(f"server: {message} (HTTP {status})")


class Client:
    def __init__(self, url: str = "http://127.0.0.1:8000", mode: str | None = None, token: str | None = None,
                 timeout: float = 60.0):
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url must be http://HOST:PORT (or https://), not {url!r}")
        self.url = f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"
        self._scheme, self._host, self._port, self._base = parts.scheme, parts.hostname, parts.port, parts.path.rstrip("/")
        self.mode = mode
        self.token = token if token is not None else os.environ.get("COLOPRED_TOKEN")
        self.timeout = timeout
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"Client({self.url!r}, mode={self.mode!r})"

    # ------------------------------------------------------------------ transport
    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
            conn = self._local.conn = cls(self._host, self._port, timeout=self.timeout)
        return conn

    def request(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
                retry: bool = True) -> tuple[int, Any]:
        """One HTTP request; returns (status, parsed JSON or text). A request whose connection the server closed
        while idle is sent again once on a new connection where ``retry`` (safe: reads, and writes keyed by an
        idempotency key)."""
        data = None if body is None else json.dumps(body, allow_nan=False).encode()
        h = {"Accept": "application/json", **(headers or {})}
        if data is not None:
            h["Content-Type"] = "application/json"
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        for attempt in (0, 1):
            conn = self._connection()
            try:
                conn.request(method, self._base + path, body=data, headers=h)
                resp = conn.getresponse()
                raw = resp.read()
                break
            except (ConnectionError, http.client.HTTPException, OSError) as e:
                conn.close()
                self._local.conn = None
                if attempt == 0 and retry and isinstance(e, (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)):
                    continue
                raise ServerUnreachable(f"{self.url}: no answer to {method} {path} ({e.__class__.__name__}: {e})") from None
        if resp.getheader("Connection", "").lower() == "close":
            conn.close()
            self._local.conn = None
        ctype = resp.getheader("Content-Type", "")
        doc = json.loads(raw) if "json" in ctype and raw else raw.decode("utf-8", "replace")
        if resp.status >= 400:
            if isinstance(doc, dict) and "error" in doc:
                raise RequestRefused(resp.status, doc.get("field"), doc["error"])
            raise RequestRefused(resp.status, None, str(doc)[:200])
        return resp.status, doc

    def _post(self, path: str, body: Any, headers: dict[str, str] | None = None, retry: bool = True) -> Any:
        return self.request("POST", path, body, headers, retry)[1]

    # ------------------------------------------------------------------ helpers
    def _mode(self, mode: str | None) -> str:
        m = mode or self.mode
        if m is None:
            raise ValueError("give the sharing mode: Client(url, mode='mps') or mode=... on the call")
        return m

    @staticmethod
    def _job(job: Any) -> Any:
        """A job as the API takes it: a registered name, or a JobProfile / profile document sent inline."""
        if isinstance(job, str):
            return job
        if isinstance(job, dict):
            return job
        to_dict = getattr(job, "to_dict", None)
        if to_dict is None:
            raise TypeError(f"a job is a registered profile's name or a JobProfile, not {type(job).__name__}")
        return to_dict()

    @staticmethod
    def _entry(job: Any) -> dict[str, Any]:
        return {"profile": Client._job(job)}

    @staticmethod
    def _warn(doc: dict[str, Any]) -> None:
        for note in doc.get("warnings") or ():
            warnings.warn(note, UserWarning, stacklevel=3)

    # ------------------------------------------------------------------ Predictor's methods
    def predict(self, profiles: Sequence[Any], mode: str | None = None, model: str | None = None):
        """``Predictor.predict``: a :class:`~colopred.runtime.predictor.Prediction` of the set."""
        from .runtime.predictor import Prediction

        doc = self.predict_document(profiles, mode, model)
        self._warn(doc)
        jobs = doc["jobs"]
        return Prediction(doc["mode"], tuple(j["name"] for j in jobs), tuple(j["slowdown"] for j in jobs),
                          tuple(tuple(j["interval"]) for j in jobs), tuple(j["solo_iteration_ms"] for j in jobs),
                          fits_memory=doc["fits_memory"], memory_gib=doc["memory_gib"],
                          observations=tuple(j.get("observations", 0) for j in jobs))

    def predict_document(self, profiles: Sequence[Any], mode: str | None = None, model: str | None = None) -> dict[str, Any]:
        """The JSON of ``colopred predict --json`` (schemas/prediction.schema.json), as the server answers it."""
        body: dict[str, Any] = {"mode": self._mode(mode), "jobs": [self._job(p) for p in profiles]}
        if model is not None:
            body["model"] = model
        return self._post("/v1/predict", body)

    def predict_many(self, sets: Sequence[Sequence[Any]], mode: str | None = None, model: str | None = None):
        """``Predictor.predict_many``: a DataFrame, one row per job of each set."""
        import pandas as pd

        from .runtime.predictor import PREDICT_MANY_COLUMNS

        body: dict[str, Any] = {"mode": self._mode(mode), "sets": [[self._job(p) for p in s] for s in sets]}
        if model is not None:
            body["model"] = model
        doc = self._post("/v1/predict_many", body)
        self._warn(doc)
        frame = pd.DataFrame(doc["rows"], columns=list(PREDICT_MANY_COLUMNS))
        return frame.astype(dict.fromkeys(("slowdown", "solo_iteration_ms", "collocated_iteration_ms", "delta", "throughput", "memory_gib"), float))

    def rank_partners(self, job: Any, candidates: Sequence[Any], k: int | None = None, mode: str | None = None):
        """``Predictor.rank_partners``: candidates ranked by the pair's predicted throughput, best first."""
        import pandas as pd

        body: dict[str, Any] = {"mode": self._mode(mode), "job": self._entry(job), "candidates": [self._entry(c) for c in candidates]}
        if k is not None:
            body["k"] = k
        doc = self._post("/v1/rank", body)
        self._warn(doc)
        return pd.DataFrame(doc["partners"], columns=["partner", "job_slowdown", "partner_slowdown", "delta", "throughput",
                                                      "fits_memory"])

    def pack(self, jobs: Sequence[Any], n_gpus: int | None = None, max_per_gpu: int = 3, max_slowdown: float | str | None = "fair",
             gpus: Sequence[Any] | None = None, solver: str = "auto", mode: str | None = None,
             min_throughput: float | None = 1.0):
        """``Predictor.pack``: a :class:`~colopred.runtime.placement.Placement`."""
        from .runtime.placement import Placement

        body: dict[str, Any] = {"mode": self._mode(mode), "jobs": [self._entry(j) for j in jobs],
                                "limits": {"max_per_gpu": max_per_gpu, "max_slowdown": max_slowdown,
                                           "min_throughput": min_throughput}, "solver": solver}
        if gpus is not None:
            body["gpus"] = [{"name": g.name, **({"memory_gib": g.memory_gib} if g.memory_gib is not None else {}),
                             "running": list(g.running)} if not isinstance(g, dict) else g for g in gpus]
        if n_gpus is not None:
            body["n_gpus"] = n_gpus
        doc = self._post("/v1/pack", body)
        self._warn(doc)
        return Placement(tuple(g["name"] for g in doc["gpus"]), tuple(tuple(g["jobs"]) for g in doc["gpus"]),
                         tuple(g["throughput"] for g in doc["gpus"]), {q["job"]: q["reason"] for q in doc["queued"]},
                         doc["solver"], doc["optimal"])

    def observe(self, observations: Sequence[Any], mode: str | None = None, gpu: str | None = None) -> "Client":
        """``Predictor.observe``: each observation (an ``Observation``, or a (jobs, slowdowns) pair of registered
        names) is stored on the server, which moves every later answer; returns this client (the server holds the
        state). Each post carries an idempotency key, so a post retried after a lost answer is stored once."""
        self.observed = [self.post_observation(*_pair(o), mode=mode, gpu=gpu) for o in observations]
        return self

    def post_observation(self, jobs: Sequence[Any], slowdowns: Sequence[float] | None = None, mode: str | None = None,
                         solo_ms: Sequence[float] | None = None, colocated_ms: Sequence[float] | None = None,
                         gpu: str | None = None, time: str | None = None, idempotency_key: str | None = None) -> dict[str, Any]:
        """``POST /v1/observations``: the stored record."""
        body: dict[str, Any] = {"mode": self._mode(mode), "jobs": [j if isinstance(j, str) else j.name for j in jobs]}
        for key, value in (("slowdowns", slowdowns), ("solo_ms", solo_ms), ("colocated_ms", colocated_ms), ("gpu", gpu), ("time", time)):
            if value is not None:
                body[key] = list(map(float, value)) if key in ("slowdowns", "solo_ms", "colocated_ms") else value
        body["idempotency_key"] = idempotency_key or uuid.uuid4().hex
        doc = self._post("/v1/observations", body)
        self._warn(doc)
        return doc

    # ------------------------------------------------------------------ registry and status
    def register(self, profile: Any, name: str | None = None) -> dict[str, Any]:
        """``PUT /v1/profiles/{name}`` (``name``: the profile's own by default); the record (name, version)."""
        doc = self._job(profile)
        if isinstance(doc, str):
            raise TypeError("register takes a JobProfile or a profile document, not a name")
        name = name or doc.get("name")
        return self.request("PUT", f"/v1/profiles/{quote(name, safe='')}", doc)[1]

    def profile(self, name: str, version: int | None = None):
        """The registered profile (a JobProfile), latest or ``version``."""
        from .profile import JobProfile

        q = f"?version={int(version)}" if version is not None else ""
        return JobProfile.from_dict(self.request("GET", f"/v1/profiles/{quote(name, safe='')}{q}")[1]["profile"])

    def profiles(self) -> list[dict[str, Any]]:
        out, after = [], ""
        while True:
            doc = self.request("GET", "/v1/profiles?" + urlencode({"after": after, "limit": 10_000}))[1]
            out += doc["profiles"]
            if not doc.get("next"):
                return out
            after = doc["next"]

    def delete_profile(self, name: str) -> dict[str, Any]:
        return self.request("DELETE", f"/v1/profiles/{quote(name, safe='')}")[1]

    def observations(self, job: str, mode: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        q = {"job": job, "limit": limit, **({"mode": mode} if mode else {})}
        return self.request("GET", "/v1/observations?" + urlencode(q))[1]["observations"]

    def report_node(self, name: str, gpus: Sequence[dict[str, Any]], mode: str | None = None) -> dict[str, Any]:
        """``PUT /v1/nodes/{name}``: what runs on the node's GPUs (the scheduler extender's view)."""
        return self.request("PUT", f"/v1/nodes/{quote(name, safe='')}", {"gpus": list(gpus), **({"mode": mode} if mode else {})})[1]

    def models(self) -> list[dict[str, Any]]:
        return self.request("GET", "/v1/models")[1]["models"]

    def health(self) -> dict[str, Any]:
        return self.request("GET", "/healthz")[1]


def _pair(o: Any) -> tuple[Sequence[Any], Sequence[float]]:
    if hasattr(o, "profiles") and hasattr(o, "slowdowns"):
        return [p.name for p in o.profiles], o.slowdowns
    jobs, slowdowns = o
    return jobs, slowdowns
