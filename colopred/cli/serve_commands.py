"""``colopred serve`` (the HTTP service, docs/service.md), and ``predict`` / ``pack`` / ``rank --server URL``: the
same answers from a warm server, without loading a model in the command (with ``--json``, the command imports only
the standard library's HTTP client)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ..errors import ColopredError, InputError


def cmd_serve(a) -> int:
    if a.threads < 1:
        raise ColopredError(f"--threads must be at least 1, not {a.threads}")
    # before numpy and XGBoost load: their thread pools read it once (each worker process inherits it)
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    try:
        import uvicorn  # noqa: F401

        from ..service import app  # noqa: F401 (FastAPI, prometheus_client)
        from ..service.config import Limits, ServiceConfig
        from ..service.server import serve
    except ImportError as e:
        raise ColopredError(f"colopred serve needs the serve extra ({e.name} is missing): pip install \"colopred[serve]\"") from None
    if a.workers < 1:
        raise ColopredError(f"--workers must be at least 1, not {a.workers}")
    if a.max_body_mib <= 0:
        raise ColopredError(f"--max-body-mib must be positive, not {a.max_body_mib:g}")
    if a.max_slowdown is not None and not a.max_slowdown >= 1:
        raise ColopredError(f"--max-slowdown must be at least 1, not {a.max_slowdown:g}")
    for m in a.model or ():
        if not Path(m).is_file():
            raise InputError(m, "no such model manifest (--model)")
    retrain = None
    if a.retrain_every is not None:
        if not a.retrain_every > 0:
            raise ColopredError(f"--retrain-every must be a positive number of minutes, not {a.retrain_every:g}")
        from .common import need

        need("serve --retrain-every", "sklearn", "scipy")  # the retraining fits models
        if a.retrain_min_new < 1:
            raise ColopredError(f"--retrain-min-new must be at least 1, not {a.retrain_min_new}")
        if not Path(a.retrain_data).is_dir():
            raise InputError(a.retrain_data, "dataset directory not found (--retrain-data): a retraining adds the "
                                             "observations to it")
        retrain = (60.0 * a.retrain_every, a.retrain_min_new, a.retrain_data)
    config = ServiceConfig(store=a.store, models=tuple(a.model or ()), token_file=a.token_file,
                           limits=Limits(max_body_bytes=int(a.max_body_mib * 1024 * 1024)), max_per_gpu=a.max_per_gpu,
                           max_slowdown=a.max_slowdown, models_dir=a.models_dir)
    return serve(config, host=a.host, port=a.port, workers=a.workers, access_log=a.access_log, log_level=a.log_level,
                 retrain=retrain)


def _client(a):
    from ..client import Client

    return Client(a.server, timeout=a.timeout if getattr(a, "timeout", None) else 600.0)


def _print_warnings(doc: dict) -> None:
    for note in doc.get("warnings") or ():
        print(f"colopred: warning: {note}", file=sys.stderr)


def _inline(path: Path, where: str):
    from ..io import read_json

    return read_json(path)


def remote_predict(a) -> int:
    """``colopred predict --server URL``: each argument is a profile file (sent inline) or a registered name."""
    if a.observed:
        raise ColopredError("--observed: with --server, post observations to the server (POST /v1/observations) instead")
    if a.model:
        raise ColopredError("--model: with --server, the server's models answer (GET /v1/models)")
    if len(a.profiles) < 2:
        raise ColopredError("predict needs at least two profiles")
    jobs = [_inline(Path(p), p) if Path(p).is_file() else p for p in a.profiles]
    doc = _client(a).predict_document(jobs, a.mode)
    _print_warnings(doc)
    if a.json:
        print(json.dumps(doc, indent=1))
        return 0
    from ..runtime.predictor import Prediction

    jobs_ = doc["jobs"]
    p = Prediction(doc["mode"], tuple(j["name"] for j in jobs_), tuple(j["slowdown"] for j in jobs_),
                   tuple(tuple(j["interval"]) for j in jobs_), tuple(j["solo_iteration_ms"] for j in jobs_),
                   fits_memory=doc["fits_memory"], memory_gib=doc["memory_gib"],
                   observations=tuple(j.get("observations", 0) for j in jobs_))
    print(p.summary())
    if doc.get("profile_source", "ncu") != "ncu":
        print(f"(model for {doc['profile_source']} GPM profiles)")
    return 0


def remote_placement(a, kind: str) -> int:
    """``colopred pack|rank REQUEST.json --server URL``: the request sent with its profile files inlined (a
    ``profile`` string that is no file beside the request is sent as a registered name)."""
    from ..io import read_json

    path = Path(a.request)
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise InputError(path, "not a colopred placement request (expected a JSON object)")
    doc = dict(doc)
    for key in ("jobs", "candidates"):
        if isinstance(doc.get(key), list):
            doc[key] = [_inline_entry(path, e) for e in doc[key]]
    if "job" in doc:
        doc["job"] = _inline_entry(path, doc["job"])
    out = None
    if a.output is not None:
        from ..io import check_output

        out = check_output(a.output, a.request)
    from ..client import RequestRefused

    try:
        answer = _client(a)._post(f"/v1/{kind}", doc)
    except RequestRefused as e:
        raise ColopredError(f"{a.request}: {e.message}") from None
    _print_warnings(answer)
    text = json.dumps(answer, indent=1) + "\n"
    if out is not None:
        from ..io import write_text_atomic

        write_text_atomic(out, text)
    if a.json:
        print(text, end="")
    elif kind == "pack":
        print(f"mode {answer['mode']}: {answer['placed']} jobs placed on {len(answer['gpus'])} GPUs, predicted normalised "
              f"throughput {answer['throughput']:.2f} ({answer['solver']}{', optimal' if answer['optimal'] else ''})")
        for g in answer["gpus"]:
            print(f"  {g['name']:<12} {g['throughput']:5.2f}  {' + '.join(g['jobs']) if g['jobs'] else '(empty)'}")
        for q in answer["queued"]:
            print(f"  queued: {q['job']}: {q['reason']}")
    else:
        print(f"mode {answer['mode']}: partners of {answer['job']}, best first (predicted normalised throughput of the pair)")
        for r in answer["partners"]:
            print(f"  {r['partner']:<34} throughput {r['throughput']:.2f}  slowdowns {r['job_slowdown']:.2f} / "
                  f"{r['partner_slowdown']:.2f}{'' if r['fits_memory'] else '  (does not fit in memory)'}")
    return 0


def _inline_entry(path: Path, entry):
    if isinstance(entry, dict) and isinstance(entry.get("profile"), str):
        f = path.parent / entry["profile"]
        if f.is_file():
            from ..io import read_json

            return {**entry, "profile": read_json(f)}
    return entry


def add_server_option(p) -> None:
    p.add_argument("--server", metavar="URL",
                   help="ask a running colopred serve at URL (e.g. http://127.0.0.1:8000) "
                        "instead of loading a model here; a profile argument that is no file is a registered name")


def add_commands(sub) -> None:
    from .common import command

    p = command(sub, "serve", "serve predictions over HTTP (the API, a profile registry, an observation store, a "
                "Kubernetes scheduler extender)", cmd_serve,
                "Serve colopred over HTTP: /v1/predict, /v1/pack, /v1/rank, profiles, observations, /k8s/filter and "
                "/k8s/prioritize, /metrics, /openapi.json (docs/service.md). Needs the serve extra.", verbosity=False)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on")
    p.add_argument("--store", default="colopred-store",
                   help="the store: a folder (SQLite, on a local disk) or a postgresql:// URL shared by replicas")
    p.add_argument("--model", action="append", metavar="MANIFEST",
                   help="a model manifest to serve (repeat for several; default: the shipped models)")
    p.add_argument("--workers", type=int, default=1, help="worker processes (about one per core)")
    p.add_argument("--threads", type=int, default=1, help="threads each worker's predictions use (OMP_NUM_THREADS)")
    p.add_argument("--token-file", help="a file holding a bearer token that every writing endpoint requires")
    p.add_argument("--max-body-mib", type=float, default=16.0, help="largest request body, MiB")
    p.add_argument("--max-per-gpu", type=int, default=3, help="the extender's limit of jobs per GPU")
    p.add_argument("--max-slowdown", type=float, help="the extender's limit of any job's predicted slowdown")
    p.add_argument("--models-dir", help="the folder of trained model versions (default: STORE/models for a folder store; "
                                        "a database store's replicas share one)")
    p.add_argument("--retrain-every", type=float, metavar="MINUTES",
                   help="run `colopred train --store` this often when enough observations arrived (one replica only)")
    p.add_argument("--retrain-min-new", type=int, default=50, help="observations that must have arrived since the last "
                                                                   "retraining for the next one")
    p.add_argument("--retrain-data", default="datasets/h100", help="the dataset a retraining adds the observations to")
    p.add_argument("--access-log", action="store_true", help="log every request")
    p.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"),
                   help="least severe log messages printed")
